package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// nonroot is the distroless image's non-root user, the Dockerfile's USER.
const nonroot = 65532

// dockerBuild returns the go build command of the Dockerfile's build stage
// as a shell command run from the repository root, writing the binary to
// out: the RUN line's own words, its cache mounts dropped and the target
// platform set to this machine's.
func dockerBuild(t *testing.T, out string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var line strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			line.WriteString(s + " ")
			continue
		}
		line.WriteString(l)
		if s := line.String(); strings.HasPrefix(s, "RUN ") && strings.Contains(s, "go build") {
			s = strings.TrimPrefix(s, "RUN ")
			s = regexp.MustCompile(`--mount=\S+\s*`).ReplaceAllString(s, "")
			s = strings.NewReplacer("${TARGETOS}", runtime.GOOS, "${TARGETARCH}", runtime.GOARCH).Replace(s)
			s = regexp.MustCompile(`-o \S+`).ReplaceAllString(s, "-o "+out)
			return s
		}
		line.Reset()
	}
	t.Fatal("the Dockerfile has no RUN line with go build")
	return ""
}

// startIn runs bin chrooted into root as the non-root user, with only env.
func startIn(t *testing.T, root string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command("/usr/local/bin/state-sidecar", args...)
	cmd.Path = "/usr/local/bin/state-sidecar" // resolved inside the chroot
	cmd.Dir = "/"
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: nonroot, Gid: nonroot}}
	return run(t, cmd)
}

// TestStaticBinaryInEmptyRoot builds the binary exactly as the Dockerfile's
// build stage does and runs it where nothing but the binary exists: a root
// directory holding /usr/local/bin/state-sidecar and the empty volume /data
// (no /etc, no /tmp, no libc, no CA certificates), as the image's non-root
// user. It prints its version, serves on memory and on SQLite (a key
// written survives a restart), answers /healthz and tool calls, and its
// healthcheck command (the image's HEALTHCHECK) succeeds inside the same
// root. It needs root (chroot) on Linux, and STATE_TEST_STATIC_BUILD=1:
// the build compiles every dependency again without the race detector and
// with -trimpath, minutes on a cold cache, so it runs only where asked for
// (.ci/run runs it alone, with a timeout of its own).
func TestStaticBinaryInEmptyRoot(t *testing.T) {
	if os.Getenv("STATE_TEST_STATIC_BUILD") != "1" {
		t.Skip("set STATE_TEST_STATIC_BUILD=1 to build the Dockerfile's static binary (a cold build: minutes)")
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs root on Linux to chroot")
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "usr", "local", "bin", "state-sidecar")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	build := dockerBuild(t, bin)
	cmd := exec.Command("sh", "-c", build)
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", build, err, out)
	}
	t.Logf("built with the Dockerfile's command: %s", build)

	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	libs, _ := ef.ImportedLibraries()
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the binary is dynamically linked (program header %v, libraries %v)", p.Type, libs)
		}
	}
	ef.Close()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(data, nonroot, nonroot); err != nil {
		t.Fatal(err)
	}

	v := startIn(t, root, nil, "-version")
	out, _ := io.ReadAll(v.stdout)
	if code := v.exitCode(t); code != 0 || !strings.HasPrefix(string(out), "state-sidecar 0.") {
		t.Fatalf("-version: exit %d, output %q", code, out)
	}

	serve := func(env ...string) (*proc, string, string) {
		p := startIn(t, root, append([]string{"SIDECAR_PORT=0", "SIDECAR_LOG_FORMAT=json"}, env...))
		addr, _ := p.logLine(t, "listening")["addr"].(string)
		_, port, _ := strings.Cut(addr, ":")
		return p, "http://" + addr, port
	}
	healthz := func(url string) {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/healthz: %d", resp.StatusCode)
		}
	}
	stop := func(p *proc) {
		p.signal(t, syscall.SIGTERM)
		if code := p.exitCode(t); code != 0 {
			t.Fatalf("exit status %d after SIGTERM", code)
		}
	}

	// Memory, and the HEALTHCHECK command beside it in the same root.
	p, url, port := serve("STATE_BACKEND=memory")
	healthz(url)
	call(t, url, "state_set", `{"key":"k","value":{"in":"chroot"}}`)
	hc := startIn(t, root, []string{"SIDECAR_PORT=" + port}, "healthcheck")
	if code := hc.exitCode(t); code != 0 {
		t.Fatalf("healthcheck inside the root: exit %d: %s", code, hc.stderr.String())
	}
	stop(p)

	// SQLite on the volume: written, stopped, started again, read back.
	p, url, _ = serve("STATE_BACKEND=sqlite", "DB_PATH=/data/state.db")
	healthz(url)
	call(t, url, "state_set", `{"key":"k","value":{"in":"chroot"}}`)
	stop(p)
	if fi, err := os.Stat(filepath.Join(data, "state.db")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != nonroot {
		t.Fatalf("the SQLite file on the volume: %v (owner %v), want it written by uid %d", err, fi, nonroot)
	}
	p, url, _ = serve("STATE_BACKEND=sqlite", "DB_PATH=/data/state.db")
	if got := call(t, url, "state_get", `{"key":"k"}`); !strings.Contains(got, `"value":{"in":"chroot"}`) {
		t.Fatalf("state_get after a restart: %s", got)
	}
	stop(p)
}

// call calls a tool over HTTP and returns its result's text.
func call(t *testing.T, url, tool, args string) string {
	t.Helper()
	res := rpc(t, url, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`}}`)
	b, _ := json.Marshal(res)
	text := string(b)
	if strings.Contains(text, `"isError":true`) {
		t.Fatalf("%s: %s", tool, text)
	}
	return text
}
