package procs_test

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/statesidecar/state/examples/internal/procs"
	"github.com/statesidecar/state/internal/syncbuf"
)

// Once reaped, the child is gone.
func ExampleGone() {
	cmd := exec.Command("sh", "-c", "echo oops >&2")
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(stderr.String())
	fmt.Println(procs.Gone(cmd.Process.Pid))
	fmt.Println(procs.Gone(os.Getpid()))
	// Output:
	// oops
	// true
	// false
}
