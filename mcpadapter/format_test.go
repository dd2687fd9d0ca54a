package mcpadapter

import (
	"testing"
	"time"
)

func TestTimesAreEpochSecondsWithMilliseconds(t *testing.T) {
	base := time.Date(2024, 6, 10, 6, 13, 20, 0, time.UTC) // 1718000000
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "1718000000.0"},
		{123 * time.Millisecond, "1718000000.123"},
		{120 * time.Millisecond, "1718000000.12"},
		{500*time.Millisecond + 999*time.Microsecond, "1718000000.5"},
		{5 * time.Millisecond, "1718000000.005"},
	} {
		b, _ := stamp(base.Add(c.d)).MarshalJSON()
		if string(b) != c.want {
			t.Errorf("stamp(+%v) = %s, want %s", c.d, b, c.want)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.0"},
		{4 * time.Millisecond, "0.0"},
		{5 * time.Millisecond, "0.01"},
		{12345 * time.Millisecond, "12.35"},
		{90 * time.Second, "90.0"},
	} {
		b, _ := seconds(c.d).MarshalJSON()
		if string(b) != c.want {
			t.Errorf("seconds(%v) = %s, want %s", c.d, b, c.want)
		}
	}
}
