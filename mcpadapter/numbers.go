package mcpadapter

import (
	"strconv"
	"strings"
)

// The outcome of exactInt.
const (
	intOK = iota
	intNotInteger
	intOutOfRange
	intMalformed
)

// exactInt reads the JSON number v as an int64, exactly: 7, 7.0, 70e-1 and
// 0.7e1 are 7; 7.5 is not an integer; 1e19 is out of range. Its work is
// linear in the length of v whatever the exponent says, so that a hostile
// number (1e999999, or a million digits) costs microseconds: the decimal is
// normalised to digits × 10^exp, and only a result of at most 19 digits is
// ever built. (big.Rat would build 10^999999.)
func exactInt(v []byte) (int64, int) {
	s := string(v)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	if intPart == "" || !allDigits(intPart) || !allDigits(frac) || hasExp && expPart == "" {
		return 0, intMalformed
	}
	// The exponent, saturated far beyond anything that can matter (digits
	// is at most the length of v, which a request bounds).
	var exp int64
	if hasExp {
		sign := int64(1)
		switch expPart[0] {
		case '-':
			sign, expPart = -1, expPart[1:]
		case '+':
			expPart = expPart[1:]
		}
		if expPart == "" || !allDigits(expPart) {
			return 0, intMalformed
		}
		for _, c := range expPart {
			if exp < 1<<40 {
				exp = exp*10 + int64(c-'0')
			}
		}
		exp *= sign
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	trimmed := strings.TrimRight(digits, "0")
	exp += int64(len(digits) - len(trimmed))
	digits = trimmed
	switch {
	case digits == "":
		return 0, intOK // zero, however written
	case exp < 0:
		return 0, intNotInteger // a nonzero digit after the point
	case int64(len(digits))+exp > 19:
		return 0, intOutOfRange
	}
	text := digits + strings.Repeat("0", int(exp))
	if neg {
		text = "-" + text
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, intOutOfRange
	}
	return n, intOK
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
