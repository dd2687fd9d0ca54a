package pyimport

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/statesidecar/state"
)

// A Source is a Python sidecar's data, read-only: its SQLite file or its
// Redis. Open one with Open, OpenSQLite or OpenRedis, and Close it.
type Source struct {
	r    reader
	path string
}

// Open opens the Python sidecar's data that src names: a redis:// or
// rediss:// URL (its REDIS_URL), or otherwise the path of its SQLite file
// (its DB_PATH). Data that is not a Python sidecar's is an error wrapping
// ErrNotPython.
func Open(ctx context.Context, src string) (*Source, error) {
	if strings.HasPrefix(src, "redis://") || strings.HasPrefix(src, "rediss://") {
		return OpenRedis(ctx, src)
	}
	return OpenSQLite(ctx, src)
}

// String describes the source: `Python sidecar SQLite file "<path>"` or
// `Python sidecar Redis <url without password>`.
func (s *Source) String() string { return s.r.String() }

// Path returns the path of a SQLite source, "" for Redis.
func (s *Source) Path() string { return s.path }

// Close releases the source.
func (s *Source) Close() error { return s.r.close() }

// reader reads one kind of Python storage. Each method that takes fn calls
// it with the records of one kind, batchSize at a time, until they are all
// read, fn fails or ctx ends.
type reader interface {
	String() string
	close() error
	// count returns how many records of each kind the source holds.
	count(ctx context.Context) (map[Kind]int, error)
	// historySource names the source's history log for
	// state.Store.ImportHistory: "" when it keeps no history.
	historySource(ctx context.Context) (string, error)
	// historyUpTo counts the history rows with ids up to seq.
	historyUpTo(ctx context.Context, seq int64) (int, error)
	// history reads the history rows after seq, by ascending id.
	history(ctx context.Context, after int64, fn func([]item[state.ImportedEvent]) error) error
	entries(ctx context.Context, fn func([]item[state.ImportedEntry]) error) error
	sessions(ctx context.Context, fn func([]item[state.ImportedSession]) error) error
	leases(ctx context.Context, fn func([]item[state.ImportedLease]) error) error
	// runs reads the runs with their outputs.
	runs(ctx context.Context, fn func([]item[state.ImportedRun]) error) error
	// skipped counts the outputs that belong to no run, and says why they
	// and anything else left out were.
	skipped(ctx context.Context) (int, []string, error)
	// notes says what else the source holds that is not imported.
	notes() []string
}

// pyTime converts Python epoch seconds (time.time() or unixepoch()) to a
// time in milliseconds.
func pyTime(s float64) time.Time { return time.UnixMilli(int64(math.Round(s * 1000))).UTC() }

// The range of the times a source may hold, in Python epoch seconds: the
// years 1 to 9999, as time.Time and every backend keep them.
const (
	minPySeconds = -62135596800
	maxPySeconds = 253402300799
)

// pySeconds reads a time column of a row, scanned into v, as Python epoch
// seconds; col names the column (table.column) for the problem it returns
// when the value is not a number of seconds, or beyond the years 1 to 9999
// (it would overflow the conversion, and an expiry would read as past).
func pySeconds(col string, v any) (float64, string) {
	var f float64
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	case []byte, string:
		s := strings.TrimSpace(asString(x))
		var err error
		if f, err = strconv.ParseFloat(s, 64); err != nil {
			return 0, fmt.Sprintf("%s %q is not a number of seconds", col, s)
		}
	case nil:
		return 0, col + " is NULL"
	default:
		return 0, fmt.Sprintf("%s %v is not a number of seconds", col, v)
	}
	return checkSeconds(col, f)
}

// checkSeconds refuses a time beyond the years 1 to 9999.
func checkSeconds(col string, f float64) (float64, string) {
	if math.IsNaN(f) || f < minPySeconds || f > maxPySeconds {
		return 0, fmt.Sprintf("%s %v is out of range (a time between the years 1 and 9999, in seconds since 1970)", col, f)
	}
	return f, ""
}

func asString(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	s, _ := v.(string)
	return s
}

// remaining returns the lifetime left at now of something that expires at
// Python epoch seconds exp, and whether it is still live (Python's own
// test: its expiry is after now).
func remaining(exp float64, now time.Time) (time.Duration, bool) {
	d := pyTime(exp).Sub(now)
	return d, d >= time.Millisecond
}

// runStatuses are the statuses a Python run can have.
var runStatuses = map[string]state.Status{"created": state.StatusCreated, "claimed": state.StatusClaimed,
	"running": state.StatusRunning, "done": state.StatusDone, "failed": state.StatusFailed}

// pyRun builds the run the store imports from a Python run's fields: a run
// its agent claimed has attempt 1 (Python claims once, and never again).
// where names the record's place for its problems ("workflows." in SQLite).
func pyRun(where, id, name, status, tagsJSON string, agent *string, lastStep int64, created, updated float64) (state.ImportedRun, string) {
	for _, t := range []struct {
		col string
		v   float64
	}{{"created_at", created}, {"updated_at", updated}} {
		if _, problem := checkSeconds(where+t.col, t.v); problem != "" {
			return state.ImportedRun{}, problem
		}
	}
	st, ok := runStatuses[status]
	if !ok {
		return state.ImportedRun{}, fmt.Sprintf("status %q is not one of created, claimed, running, done, failed", status)
	}
	var tags map[string]string
	if err := json.Unmarshal([]byte(tagsJSON), &tags); err != nil {
		return state.ImportedRun{}, fmt.Sprintf("tags %s are not a JSON object of strings: %v", tagsJSON, err)
	}
	r := state.ImportedRun{ID: id, Name: name, Tags: tags, Status: st, LastStep: lastStep,
		CreatedAt: pyTime(created), UpdatedAt: pyTime(updated)}
	if agent != nil && *agent != "" {
		r.AgentID, r.Attempt = *agent, 1
	}
	return r, ""
}
