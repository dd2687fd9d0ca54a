package procs_test

import (
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/statesidecar/state/examples/internal/procs"
)

// A child that echoes its stdin; once it has exited and been reaped, it is
// gone.
func ExampleStart() {
	cmd := exec.Command("cat")
	stdin, stdout, err := procs.Start(cmd)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = io.WriteString(stdin, "hello\n")
	_ = stdin.Close()
	out, _ := io.ReadAll(stdout)
	fmt.Print(string(out))
	fmt.Println(cmd.Wait(), procs.Gone(cmd.Process.Pid))
	fmt.Println(procs.Gone(os.Getpid()))
	// Output:
	// hello
	// <nil> true
	// false
}
