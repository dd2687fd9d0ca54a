package sidecar

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/statesidecar/state"
)

// Name is the sidecar command's name, as installed by
// go install github.com/statesidecar/state/cmd/state-sidecar.
const Name = "state-sidecar"

// A Command is a subcommand of state-sidecar besides serve, version and
// help: state-sidecar <Name> [arguments].
type Command struct {
	// Name is the word that selects the command.
	Name string
	// Usage is the command's line in the help, after the program's name:
	// its name, its arguments and what it does.
	Usage string
	// Run runs the command with the arguments that follow its name. An
	// error wrapping ErrConfig is a usage error (exit status 2);
	// flag.ErrHelp means help was shown (exit status 0).
	Run func(ctx context.Context, args []string, env Env) error
}

// Env is what a command gets of its process.
type Env struct {
	// LookupEnv reads an environment variable, as os.LookupEnv does.
	LookupEnv func(string) (string, bool)
	Stdin     io.Reader
	Stdout    io.Writer
	// Stderr receives logs and errors; never stdout, which is the stdio
	// transport's channel.
	Stderr io.Writer
}

// ProcessEnv returns the process's environment and standard streams.
func ProcessEnv() Env {
	return Env{LookupEnv: os.LookupEnv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
}

// ProcessMain is the whole main function of the state-sidecar program:
// Main with the process's arguments and environment (ProcessEnv) and the
// import, copy, erase and keys commands, under a context that SIGINT or SIGTERM cancels (a
// graceful stop). It exits the process with Main's status.
func ProcessMain() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], ProcessEnv(), ImportCommand(), CopyCommand(), EraseCommand(), KeysCommand())
	stop()
	os.Exit(code)
}

// Main runs the state-sidecar command line and returns its exit status:
//
//	state-sidecar [serve] [flags]    serve the tools until ctx ends (Run)
//	state-sidecar version            print the version (also -version)
//	state-sidecar healthcheck        ask the local sidecar's /readyz (container probes)
//	state-sidecar help [command]     show the help
//	state-sidecar <command> ...      one of commands
//
// The exit status is 0 after a clean stop or help, 2 for a usage or
// configuration error or a protected-mode refusal, 1 otherwise. Errors are
// printed to env.Stderr.
func Main(ctx context.Context, args []string, env Env, commands ...Command) int {
	err := dispatch(ctx, args, env, commands)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, ErrConfig), errors.Is(err, ErrProtectedMode):
		fmt.Fprintln(env.Stderr, Name+":", err)
		return 2
	default:
		fmt.Fprintln(env.Stderr, Name+":", err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, env Env, commands []Command) error {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return serve(ctx, args, env, commands)
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], env, commands)
	case "healthcheck":
		return healthcheck(ctx, args[1:], env)
	case "version":
		if len(args) > 1 {
			return fmt.Errorf("%w: version takes no arguments", ErrConfig)
		}
		fmt.Fprintln(env.Stdout, versionLine())
		return nil
	case "help":
		if len(args) > 1 && args[1] == "healthcheck" {
			return healthcheck(ctx, []string{"-h"}, env)
		}
		if len(args) > 1 && args[1] != "serve" {
			if i := slices.IndexFunc(commands, func(c Command) bool { return c.Name == args[1] }); i >= 0 {
				return commands[i].Run(ctx, []string{"-h"}, env)
			}
			return unknownCommand(args[1], commands)
		}
		writeUsage(env.Stdout, Name, commands)
		return nil
	}
	if i := slices.IndexFunc(commands, func(c Command) bool { return c.Name == args[0] }); i >= 0 {
		return commands[i].Run(ctx, args[1:], env)
	}
	return unknownCommand(args[0], commands)
}

func unknownCommand(name string, commands []Command) error {
	names := []string{"serve", "version", "help", "healthcheck"}
	for _, c := range commands {
		names = append(names, c.Name)
	}
	return fmt.Errorf("%w: unknown command %q: the commands are %s (flags go after the command; -h lists them)",
		ErrConfig, name, strings.Join(names, ", "))
}

// serve is the serve command: Run, or the version for -version.
func serve(ctx context.Context, args []string, env Env, commands []Command) error {
	l := newLoader(Name, env.LookupEnv, env.Stdout, commands)
	version := l.fs.Bool("version", false, "print the version and exit")
	if err := l.parse(args); err != nil {
		return err
	}
	if *version {
		fmt.Fprintln(env.Stdout, versionLine())
		return nil
	}
	if l.fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (flags go before it? -h lists them)", ErrConfig, l.fs.Arg(0))
	}
	cfg, err := l.finish()
	if err != nil {
		return err
	}
	return run(ctx, cfg, env)
}

// versionLine is what -version prints: the library's version, then the
// module version and VCS revision the binary was built from, when known.
func versionLine() string {
	s := Name + " " + state.Version
	var build []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			build = append(build, "module "+v)
		}
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" && len(kv.Value) >= 12 {
				build = append(build, "revision "+kv.Value[:12])
			}
		}
	}
	build = append(build, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH)
	return s + " (" + strings.Join(build, ", ") + ")"
}
