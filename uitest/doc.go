// Package uitest holds the browser tests of the operator console (package
// console, served by the sidecar at /ui): a headless Chromium, Debian's
// package, driven by chromedp, checks what a person sees on the pages
// (computed visibility and text, not attributes), on SQLite and on Redis.
//
// It is a module of its own, so that the library's go.mod does not carry
// chromedp. Run it from this directory:
//
//	go test ./...
//
// Without Chromium the tests skip (UITEST_CHROMIUM names the browser and
// makes its absence a failure). STATE_TEST_REDIS_URL adds the Redis runs.
// Screenshots go to screenshots/ (ignored by git), or UITEST_ARTIFACTS.
package uitest
