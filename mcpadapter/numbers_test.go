package mcpadapter

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// ratInt is what exactInt must agree with: big.Rat's exact reading.
func ratInt(v string) (int64, int) {
	r, ok := new(big.Rat).SetString(v)
	switch {
	case !ok:
		return 0, intMalformed
	case !r.IsInt():
		return 0, intNotInteger
	case !r.Num().IsInt64():
		return 0, intOutOfRange
	}
	return r.Num().Int64(), intOK
}

func TestExactInt(t *testing.T) {
	for _, v := range []string{"0", "-0", "7", "7.0", "70e-1", "0.7e1", "7E0", "7.5", "1e18", "1e19", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809", "92233720368547758070e-1", "0.000e99",
		"100000000000000000000e-2", "1e-1", "10e-1", "123.456e3", "123.4567e3", "0e-5"} {
		n, how := exactInt([]byte(v))
		wn, whow := ratInt(v)
		if n != wn || how != whow {
			t.Errorf("%s: %d (%d), want %d (%d)", v, n, how, wn, whow)
		}
	}
	for _, v := range []string{"1e999999", "1e-999999", "-1e999999", strings.Repeat("9", 1<<20)} {
		_, how := exactInt([]byte(v))
		if how == intOK {
			t.Errorf("%.20s...: read as an int64", v)
		}
	}
	if n, how := exactInt([]byte("0e999999999999999999999")); n != 0 || how != intOK {
		t.Errorf("0e999999999999999999999: %d (%d), want 0", n, how)
	}
}

// FuzzExactInt checks exactInt against big.Rat on valid JSON numbers of
// moderate exponent.
func FuzzExactInt(f *testing.F) {
	for _, s := range []string{"7", "-7.50e1", "0.0001e4", "9223372036854775807", "1e19"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var n json.Number
		if json.Unmarshal([]byte(v), &n) != nil || !strings.HasPrefix(strings.TrimSpace(v), string(n)) || len(v) > 200 {
			return
		}
		v = string(n)
		if i := strings.IndexAny(v, "eE"); i >= 0 && len(v)-i > 5 {
			return // big.Rat would take long: that is what exactInt avoids
		}
		gn, ghow := exactInt([]byte(v))
		wn, whow := ratInt(v)
		if gn != wn || ghow != whow {
			t.Fatalf("%s: %d (%d), want %d (%d)", v, gn, ghow, wn, whow)
		}
	})
}

// BenchmarkHostileInteger is what an integer argument of 1e999999 costs:
// it cost 178 ms through big.Rat (issue 20).
func BenchmarkHostileInteger(b *testing.B) {
	v := []byte("1e999999")
	for b.Loop() {
		if _, how := exactInt(v); how != intOutOfRange {
			b.Fatal(how)
		}
	}
}
