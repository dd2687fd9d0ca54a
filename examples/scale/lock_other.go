//go:build !unix

package main

import "errors"

// lockFile is not available where flock(2) is not.
func lockFile(string) (func() error, error) {
	return nil, errors.New("-lock needs flock(2), which this system does not have")
}
