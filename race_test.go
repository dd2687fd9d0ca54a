//go:build race

package state_test

// raceEnabled is whether this test binary was built with -race; builds run
// from a test pass it on, so that they reuse the test's cached packages.
const raceEnabled = true
