package redisstate

import (
	_ "embed"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
)

// The scripts. The cold ones run with KEYS[1] = the namespace's base key
// and start with base.lua (the key layout and common helpers) and the other
// pieces they use. Lua defines every helper anew on each call, and that
// costs even when unused, so the hot ones (get, set, claim, lease) stand
// alone and spell the formats out; Go encodes the JSON strings it can
// (agents, holders) with encoding/json.
var (
	//go:embed lua/base.lua
	baseLua string
	//go:embed lua/rec.lua
	recLua string
	//go:embed lua/ev.lua
	evLua string
	//go:embed lua/get.lua
	getLua string
	//go:embed lua/set.lua
	setLua string
	//go:embed lua/commit.lua
	commitLua string
	//go:embed lua/getmany.lua
	getManyLua string
	//go:embed lua/list.lua
	listLua string
	//go:embed lua/count.lua
	countLua string
	//go:embed lua/history.lua
	historyLua string
	//go:embed lua/reset.lua
	resetLua string
	//go:embed lua/sweep.lua
	sweepLua string
	//go:embed lua/trim.lua
	trimLua string
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/lease.lua
	leaseLua string
	//go:embed lua/claimone.lua
	claimOneLua string
	//go:embed lua/leaseone.lua
	leaseOneLua string

	getScript     = redis.NewScript(getLua)
	setScript     = redis.NewScript(setLua)
	commitScript  = redis.NewScript(baseLua + recLua + evLua + commitLua)
	getManyScript = redis.NewScript(baseLua + recLua + getManyLua)
	listScript    = redis.NewScript(baseLua + recLua + listLua)
	countScript   = redis.NewScript(baseLua + countLua)
	historyScript = redis.NewScript(baseLua + historyLua)
	resetScript   = redis.NewScript(baseLua + evLua + resetLua)
	sweepScript   = redis.NewScript(baseLua + evLua + sweepLua)
	trimScript    = redis.NewScript(baseLua + evLua + trimLua)
	claimScript   = redis.NewScript(layoutNames.Replace(claimLua))
	leaseScript   = redis.NewScript(leaseLua)
	// A claim or lease call made alone takes a script of its own, which
	// spares it the batch's tables (batch.go).
	claimOneScript = redis.NewScript(layoutNames.Replace(claimOneLua))
	leaseOneScript = redis.NewScript(leaseOneLua)

	allScripts = []*redis.Script{getScript, setScript, commitScript, getManyScript, listScript, countScript,
		historyScript, resetScript, sweepScript, trimScript, claimScript, leaseScript, claimOneScript, leaseOneScript}
)

// layoutNames spells out in a script the names of the record layout's
// keys (backend's layout.go) that it would otherwise take as arguments
// (lua/claim.lua).
var layoutNames = strings.NewReplacer("$RunPrefix", backend.RunPrefix, "$ClaimedCount", backend.ClaimedRunsKey,
	"$ChildCounts", strings.TrimSuffix(backend.ClaimedChildrenKey("x"), "x/"+backend.RunClaimed), "$Claimed", backend.RunClaimed)

// recHeader is the length of a packed record's header (lua/rec.lua): the
// little-endian revision, create revision, updated ms and expiry ms (8
// bytes each) and the writer's length (4 bytes).
const recHeader = 36

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// le64 and le32 read little-endian signed integers at the start of s.
func le64(s string) int64 {
	_ = s[7]
	return int64(uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56)
}

func le32(s string) int64 {
	_ = s[3]
	return int64(int32(uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24))
}

// asInt reads an integer from a reply element: an integer reply, a bulk
// string of digits, or nil (0).
func asInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("unexpected reply element %T", v)
}

// asString reads a string from a reply element; nil gives "".
func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return itoa(x)
	}
	return ""
}

// asSlice reads an array reply.
func asSlice(v any) ([]any, error) {
	s, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", v)
	}
	return s, nil
}

// toRecord decodes key's packed record v (lua/rec.lua), judging liveness at
// nowMs. An absent record (nil) gives a Record with only Key set.
func toRecord(key string, v any, nowMs int64) (backend.Record, error) {
	r := backend.Record{Key: key}
	if v == nil {
		return r, nil
	}
	s, ok := v.(string)
	if !ok || len(s) < recHeader {
		return r, fmt.Errorf("record %q: unexpected reply %T of %d bytes", key, v, len(s))
	}
	wl := le32(s[32:])
	if wl < 0 || wl > int64(len(s)-recHeader) {
		return r, fmt.Errorf("record %q: corrupt header", key)
	}
	x := le64(s[24:])
	r.Revision, r.CreateRevision = le64(s), le64(s[8:])
	r.UpdatedAt, r.ExpiresAt = fromMs(le64(s[16:])), fromMs(x)
	r.Writer = s[recHeader : recHeader+wl]
	if strings.HasPrefix(key, backend.RunPrefix) {
		v, err := unpackRun(s[recHeader+wl:])
		if err != nil {
			return r, fmt.Errorf("record %q: %w", key, err)
		}
		r.Value = v
	} else {
		r.Value = []byte(s[recHeader+wl:])
	}
	r.Expired = x != 0 && x <= nowMs
	return r, nil
}

// unixMs converts a time to Unix milliseconds; the zero time gives 0.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// fromMs converts Unix milliseconds to a UTC time; 0 gives the zero time.
func fromMs(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// msTime converts a script's now back to a time: the caller's time when it
// gave one, otherwise Redis's.
func msTime(given time.Time, ms int64) time.Time {
	if !given.IsZero() {
		return given
	}
	return time.UnixMilli(ms).UTC()
}

// lexRange returns the ZRANGEBYLEX bounds of the keys having prefix.
func lexRange(prefix string) (lo, hi string) {
	if prefix == "" {
		return "-", "+"
	}
	return "[" + prefix, upperBound(prefix)
}

// upperBound returns the exclusive ZRANGEBYLEX upper bound of the keys
// having prefix: the prefix with its last byte below 0xff incremented and
// what follows dropped, or "+" when there is no such byte.
func upperBound(prefix string) string {
	b := []byte(prefix)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return "(" + string(b[:i+1])
		}
	}
	return "+"
}
