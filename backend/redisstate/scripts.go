package redisstate

import (
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/statesidecar/state/backend"
	"github.com/statesidecar/state/internal/layout"
)

// The scripts. Each but get.lua runs with KEYS[1] = the namespace's base
// key and starts with base.lua (the key layout and common helpers) and the
// other pieces it uses: Lua defines every helper anew on each call, so a
// script carries only what it needs.
var (
	//go:embed lua/base.lua
	baseLua string
	//go:embed lua/rec.lua
	recLua string
	//go:embed lua/ev.lua
	evLua string
	//go:embed lua/json.lua
	jsonLua string
	//go:embed lua/get.lua
	getLua string
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
	//go:embed lua/claim.lua
	claimLua string
	//go:embed lua/lease.lua
	leaseLua string

	getScript     = redis.NewScript(getLua)
	commitScript  = redis.NewScript(baseLua + recLua + evLua + commitLua)
	getManyScript = redis.NewScript(baseLua + getManyLua)
	listScript    = redis.NewScript(baseLua + listLua)
	countScript   = redis.NewScript(baseLua + countLua)
	historyScript = redis.NewScript(baseLua + evLua + historyLua)
	resetScript   = redis.NewScript(baseLua + evLua + resetLua)
	sweepScript   = redis.NewScript(baseLua + evLua + sweepLua)
	claimScript   = redis.NewScript(baseLua + recLua + evLua + jsonLua + claimLua)
	leaseScript   = redis.NewScript(baseLua + recLua + evLua + jsonLua + leaseLua)

	allScripts = []*redis.Script{getScript, commitScript, getManyScript, listScript, countScript, historyScript,
		resetScript, sweepScript, claimScript, leaseScript}
)

// recFields is the number of fields of a record in script replies:
// v, w, r, c, t, x.
const recFields = 6

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

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

// toRecord decodes the fields v, w, r, c, t, x of key's record, judging
// liveness at nowMs. An absent record gives a Record with only Key set.
func toRecord(key string, f []any, nowMs int64) (backend.Record, error) {
	r := backend.Record{Key: key}
	if len(f) < recFields {
		return r, fmt.Errorf("short record reply for %q", key)
	}
	if f[2] == nil {
		return r, nil
	}
	var nums [4]int64
	for i := range nums {
		n, err := asInt(f[2+i])
		if err != nil {
			return r, fmt.Errorf("record %q: %w", key, err)
		}
		nums[i] = n
	}
	if f[0] != nil {
		r.Value = []byte(asString(f[0]))
	}
	r.Writer = asString(f[1])
	r.Revision, r.CreateRevision = nums[0], nums[1]
	r.UpdatedAt, r.ExpiresAt = layout.Time(nums[2]), layout.Time(nums[3])
	r.Expired = nums[3] != 0 && nums[3] <= nowMs
	return r, nil
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
