//go:build !unix

package main

import (
	"errors"
	"os"
)

// stopProcess needs SIGSTOP and SIGCONT, which this system does not have.
func stopProcess(p *os.Process, cont bool) error {
	return errors.New("Freeze needs SIGSTOP and SIGCONT: run the demo on Linux or macOS")
}
