package pgtest

import "time"

// Overlapped reports whether any two of spans (each a call's start and
// end) overlapped in time: a race test that finds none raced nothing.
func Overlapped(spans [][2]time.Time) bool {
	for i := range spans {
		for j := range i {
			if spans[i][0].Before(spans[j][1]) && spans[j][0].Before(spans[i][1]) {
				return true
			}
		}
	}
	return false
}
