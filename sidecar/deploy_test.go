package sidecar

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The deployment files (the Dockerfile, deploy/compose.yaml, deploy/k8s/*)
// are checked against the sidecar itself, so that they cannot drift from
// it: every variable they set is a setting of the settings table (or one of
// the OTEL_* variables tracing reads) and its value loads; every flag
// parses; the ports agree with SIDECAR_PORT; every HTTP probe path answers
// 200 from the real handler and every exec probe is the healthcheck
// command, run here against a real server; the grace periods outlast the
// shutdown timeout.

// secretSamples stand in for values the files take from secrets or the
// shell; a variable set that way without a sample here fails the test.
var secretSamples = map[string]string{
	"SIDECAR_AUTH_TOKENS":         "tok-a:team-a,tok-b:team-b",
	"REDIS_URL":                   "redis://redis:6379/0",
	"POSTGRES_PASSWORD":           "secret",
	"OTEL_EXPORTER_OTLP_ENDPOINT": "",
}

// sidecarContainer is a container of the sidecar image found in a file.
type sidecarContainer struct {
	where   string // file and container, for messages
	env     map[string]string
	args    []string
	ports   map[string]int // name (or "") → container port
	probes  []probe
	grace   time.Duration // the time the container gets between SIGTERM and SIGKILL, after preStop
	graceOK bool          // whether a grace period applies (not for a Dockerfile)
}

type probe struct {
	kind string // "http" or "exec"
	path string
	port string // http: a name or a number
	cmd  []string
}

func (c *sidecarContainer) lookup(k string) (string, bool) {
	v, ok := c.env[k]
	return v, ok
}

// knownVariable reports whether the sidecar reads variable k.
func knownVariable(k string) bool {
	for i := range settings {
		if settings[i].env == k {
			return true
		}
	}
	return slices.Contains(TracingVariables, k)
}

func readYAML(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// dig walks maps and lists by keys and indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func list(v any) []any { l, _ := v.([]any); return l }

func strs(v any) []string {
	var out []string
	for _, x := range list(v) {
		out = append(out, fmt.Sprint(x))
	}
	return out
}

func isSidecarImage(image string) bool { return strings.Contains(image, "state-sidecar") }

// kubeContainers returns the sidecar containers of the Kubernetes files,
// checking on the way that Services and PodDisruptionBudgets select the
// pods and that every sidecar container runs non-root.
func kubeContainers(t *testing.T) []sidecarContainer {
	files, err := filepath.Glob(filepath.Join("..", "deploy", "k8s", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Kubernetes manifests under deploy/k8s (%v)", err)
	}
	var out []sidecarContainer
	podLabels := map[string]map[string]any{} // workload name → pod labels
	var selectors []struct {
		where string
		sel   map[string]any
		port  string
	}
	for _, file := range files {
		for _, doc := range readYAML(t, file) {
			kind, _ := doc["kind"].(string)
			name, _ := dig(doc, "metadata", "name").(string)
			switch kind {
			case "Service":
				sel, _ := dig(doc, "spec", "selector").(map[string]any)
				for _, p := range list(dig(doc, "spec", "ports")) {
					selectors = append(selectors, struct {
						where string
						sel   map[string]any
						port  string
					}{file + " Service " + name, sel, fmt.Sprint(dig(p, "targetPort"))})
				}
			case "PodDisruptionBudget":
				sel, _ := dig(doc, "spec", "selector", "matchLabels").(map[string]any)
				selectors = append(selectors, struct {
					where string
					sel   map[string]any
					port  string
				}{file + " PodDisruptionBudget " + name, sel, ""})
			case "Deployment", "StatefulSet":
				pod, _ := dig(doc, "spec", "template").(map[string]any)
				labels, _ := dig(pod, "metadata", "labels").(map[string]any)
				podLabels[name] = labels
				if m, _ := dig(doc, "spec", "selector", "matchLabels").(map[string]any); !subset(m, labels) {
					t.Errorf("%s %s: selector %v does not match its pod labels %v", file, name, m, labels)
				}
				grace := 30 * time.Second // Kubernetes' default
				if g, ok := dig(pod, "spec", "terminationGracePeriodSeconds").(int); ok {
					grace = time.Duration(g) * time.Second
				}
				inits := len(list(dig(pod, "spec", "initContainers")))
				var containers []any
				containers = append(containers, list(dig(pod, "spec", "initContainers"))...)
				containers = append(containers, list(dig(pod, "spec", "containers"))...)
				for i, c := range containers {
					image, _ := dig(c, "image").(string)
					if !isSidecarImage(image) {
						continue
					}
					where := fmt.Sprintf("%s %s %s, container %v", file, kind, name, dig(c, "name"))
					if dig(pod, "spec", "securityContext", "runAsNonRoot") != true {
						t.Errorf("%s: the pod does not require runAsNonRoot", where)
					}
					sc := sidecarContainer{where: where, env: imageEnv(t), ports: map[string]int{}, grace: grace, graceOK: true}
					for _, e := range list(dig(c, "env")) {
						k := fmt.Sprint(dig(e, "name"))
						if v, ok := dig(e, "value").(string); ok {
							sc.env[k] = v
						} else if s, ok := secretSamples[k]; ok && dig(e, "valueFrom") != nil {
							sc.env[k] = s
						} else {
							t.Errorf("%s: %s has neither a string value nor a sample in secretSamples", where, k)
						}
					}
					sc.args = append(strs(dig(c, "command")), strs(dig(c, "args"))...)
					for _, p := range list(dig(c, "ports")) {
						n, _ := dig(p, "containerPort").(int)
						sc.ports[fmt.Sprint(dig(p, "name"))] = n
						sc.ports[strconv.Itoa(n)] = n
					}
					for _, kind := range []string{"startupProbe", "readinessProbe", "livenessProbe"} {
						p := dig(c, kind)
						if p == nil {
							continue
						}
						if h := dig(p, "httpGet"); h != nil {
							sc.probes = append(sc.probes, probe{kind: "http", path: fmt.Sprint(dig(h, "path")), port: fmt.Sprint(dig(h, "port"))})
						}
						if e := dig(p, "exec"); e != nil {
							sc.probes = append(sc.probes, probe{kind: "exec", cmd: strs(dig(e, "command"))})
						}
					}
					if s, ok := dig(c, "lifecycle", "preStop", "sleep", "seconds").(int); ok {
						sc.grace -= time.Duration(s) * time.Second
					}
					if dig(c, "securityContext", "readOnlyRootFilesystem") != true || dig(c, "securityContext", "allowPrivilegeEscalation") != false {
						t.Errorf("%s: want readOnlyRootFilesystem true and allowPrivilegeEscalation false", where)
					}
					if i < inits && dig(c, "restartPolicy") != "Always" {
						t.Errorf("%s: an init container without restartPolicy Always is not a sidecar: it would block the agent", where)
					}
					out = append(out, sc)
				}
			}
		}
	}
	for _, s := range selectors {
		matched := false
		for _, labels := range podLabels {
			matched = matched || (len(s.sel) > 0 && subset(s.sel, labels))
		}
		if !matched {
			t.Errorf("%s: selector %v matches no pod", s.where, s.sel)
		}
		if s.port != "" && s.port != "<nil>" {
			found := false
			for _, c := range out {
				_, ok := c.ports[s.port]
				found = found || ok
			}
			if _, err := strconv.Atoi(s.port); err != nil && !found && strings.Contains(s.where, "state-sidecar") {
				t.Errorf("%s: targetPort %s is no port of a sidecar container", s.where, s.port)
			}
		}
	}
	return out
}

func subset(sel, labels map[string]any) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

var interpolation = regexp.MustCompile(`\$\{([A-Z0-9_]+)(?::([-?])([^}]*))?\}`)

// interpolate expands compose's ${NAME}, ${NAME:-default} and ${NAME:?error}
// with the samples (for :? and plain) or the default.
func interpolate(t *testing.T, where, s string) string {
	return interpolation.ReplaceAllStringFunc(s, func(m string) string {
		p := interpolation.FindStringSubmatch(m)
		if p[2] == "-" {
			return p[3]
		}
		v, ok := secretSamples[p[1]]
		if !ok {
			t.Errorf("%s: ${%s} has no sample in secretSamples", where, p[1])
		}
		return v
	})
}

// composeContainers returns the sidecar services of deploy/compose.yaml.
func composeContainers(t *testing.T) []sidecarContainer {
	path := filepath.Join("..", "deploy", "compose.yaml")
	docs := readYAML(t, path)
	if len(docs) != 1 {
		t.Fatalf("%s: %d documents", path, len(docs))
	}
	var out []sidecarContainer
	services, _ := docs[0]["services"].(map[string]any)
	for name, svc := range services {
		image, _ := dig(svc, "image").(string)
		df, _ := dig(svc, "build", "dockerfile").(string)
		if !isSidecarImage(image) && df != "Dockerfile" {
			continue
		}
		where := path + " service " + name
		sc := sidecarContainer{where: where, env: imageEnv(t), ports: map[string]int{}, graceOK: true, grace: 10 * time.Second}
		for k, v := range dig(svc, "environment").(map[string]any) {
			sc.env[k] = interpolate(t, where, fmt.Sprint(v))
		}
		if g, ok := dig(svc, "stop_grace_period").(string); ok {
			d, err := time.ParseDuration(g)
			if err != nil {
				t.Errorf("%s: stop_grace_period %q: %v", where, g, err)
			}
			sc.grace = d
		}
		for _, p := range strs(dig(svc, "ports")) {
			parts := strings.Split(p, ":")
			n, err := strconv.Atoi(parts[len(parts)-1])
			if err != nil {
				t.Errorf("%s: port %q", where, p)
			}
			sc.ports[""] = n
		}
		if hc := strs(dig(svc, "healthcheck", "test")); len(hc) > 1 && hc[0] == "CMD" {
			sc.probes = append(sc.probes, probe{kind: "exec", cmd: hc[1:]})
		}
		out = append(out, sc)
	}
	if len(out) < 2 {
		t.Errorf("%s: %d sidecar services, want the Redis one and the PostgreSQL one", path, len(out))
	}
	return out
}

// dockerfile is what the Dockerfile says about the final image.
type dockerfile struct {
	buildCmd              string // the build stage's go build command line
	env                   map[string]string
	expose, user, volume  string
	entrypoint, health    []string
	runtimeBase, copyDest string
}

// parseDockerfile reads the Dockerfile at the repository root: lines with
// their continuations joined.
func parseDockerfile(t *testing.T) dockerfile {
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(l, "#") || (l == "" && cur.Len() == 0) {
			continue
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(l)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	d := dockerfile{env: map[string]string{}}
	jsonArray := regexp.MustCompile(`"([^"]*)"`)
	arr := func(s string) []string {
		var out []string
		for _, m := range jsonArray.FindAllStringSubmatch(s, -1) {
			out = append(out, m[1])
		}
		return out
	}
	for _, l := range lines {
		word, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			d.runtimeBase = strings.Fields(rest)[len(strings.Fields(rest))-1]
			if strings.Contains(rest, " AS ") {
				d.runtimeBase = ""
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.buildCmd = rest
			}
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				d.env[k] = v
			}
		case "EXPOSE":
			d.expose = rest
		case "USER":
			d.user = rest
		case "VOLUME":
			d.volume = strings.Join(arr(rest), " ")
		case "ENTRYPOINT":
			d.entrypoint = arr(rest)
		case "HEALTHCHECK":
			_, cmd, _ := strings.Cut(rest, "CMD ")
			d.health = arr(cmd)
		case "COPY":
			if f := strings.Fields(rest); strings.Contains(rest, "state-sidecar") {
				d.copyDest = f[len(f)-1]
			}
		}
	}
	return d
}

// imageEnv is the environment the image sets, under every container's own.
func imageEnv(t *testing.T) map[string]string {
	env := map[string]string{}
	for k, v := range parseDockerfile(t).env {
		env[k] = v
	}
	return env
}

func TestDockerfileMatchesTheSidecar(t *testing.T) {
	d := parseDockerfile(t)
	if !strings.Contains(d.buildCmd, "CGO_ENABLED=0") || !strings.Contains(d.buildCmd, "./cmd/state-sidecar") {
		t.Errorf("the build stage's go build %q: want CGO_ENABLED=0 and ./cmd/state-sidecar", d.buildCmd)
	}
	if !strings.Contains(d.runtimeBase, "distroless/static") && d.runtimeBase != "scratch" {
		t.Errorf("final image on %q, want distroless/static or scratch", d.runtimeBase)
	}
	if uid, err := strconv.Atoi(strings.Split(d.user, ":")[0]); err != nil || uid == 0 {
		t.Errorf("USER %q: want a numeric non-root user (Kubernetes' runAsNonRoot checks the number)", d.user)
	}
	c := sidecarContainer{where: "Dockerfile", env: d.env, ports: map[string]int{}}
	if n, err := strconv.Atoi(d.expose); err == nil {
		c.ports[""] = n
	} else {
		t.Errorf("EXPOSE %q: want one port", d.expose)
	}
	if len(d.entrypoint) == 0 || d.entrypoint[0] != d.copyDest {
		t.Errorf("ENTRYPOINT %q is not the binary the image copies (%s)", d.entrypoint, d.copyDest)
	}
	if filepath.Dir(d.env["DB_PATH"]) != d.volume {
		t.Errorf("DB_PATH %s is not in the VOLUME %s", d.env["DB_PATH"], d.volume)
	}
	c.probes = append(c.probes, probe{kind: "exec", cmd: d.health})
	// The image refuses to start without tokens (0.0.0.0): as run, with them.
	c.env["SIDECAR_AUTH_TOKENS"] = secretSamples["SIDECAR_AUTH_TOKENS"]
	checkContainer(t, c)
}

func TestComposeMatchesTheSidecar(t *testing.T) {
	for _, c := range composeContainers(t) {
		checkContainer(t, c)
	}
}

func TestKubernetesManifestsMatchTheSidecar(t *testing.T) {
	cs := kubeContainers(t)
	if len(cs) < 2 {
		t.Fatalf("%d sidecar containers in deploy/k8s, want the pod sidecar and the replicas", len(cs))
	}
	replicas := false
	for _, c := range cs {
		checkContainer(t, c)
		var kinds []string
		for _, p := range c.probes {
			kinds = append(kinds, p.kind)
		}
		if len(c.probes) < 2 {
			t.Errorf("%s: %d probes, want readiness and liveness", c.where, len(c.probes))
		}
		replicas = replicas || c.env["STATE_BACKEND"] == "redis"
	}
	if !replicas {
		t.Error("no sidecar over Redis in deploy/k8s")
	}
}

// checkContainer checks one sidecar container against the settings table,
// the flags, the handler and the healthcheck command.
func checkContainer(t *testing.T, c sidecarContainer) {
	t.Helper()
	for k := range c.env {
		if !knownVariable(k) {
			t.Errorf("%s: the sidecar has no setting %s", c.where, k)
		}
	}
	var args []string
	if len(c.args) > 0 && !strings.HasPrefix(c.args[0], "-") {
		args = c.args[1:] // the binary
	}
	cfg, err := Load(args, c.lookup, io.Discard)
	if err != nil {
		t.Errorf("%s: its settings do not load: %v", c.where, err)
		return
	}
	if len(cfg.warnings) > 0 {
		t.Errorf("%s: settings ignored: %v", c.where, cfg.warnings)
	}
	if err := cfg.CheckProtected(); err != nil {
		t.Errorf("%s: %v", c.where, err)
	}
	if _, _, err := tracingFromEnv(context.Background(), c.lookup); err != nil {
		t.Errorf("%s: tracing: %v", c.where, err)
	}
	for name, port := range c.ports {
		if port != cfg.Port {
			t.Errorf("%s: port %q is %d, but the sidecar listens on %d (SIDECAR_PORT)", c.where, name, port, cfg.Port)
		}
	}
	if c.graceOK && c.grace <= cfg.ShutdownTimeout {
		t.Errorf("%s: %v between SIGTERM and SIGKILL (after preStop), not more than the shutdown timeout %v",
			c.where, c.grace, cfg.ShutdownTimeout)
	}

	// Probes against the real thing: a sidecar with this configuration on
	// the memory backend, on a free loopback port.
	mem := cfg
	mem.Backend, mem.Port = BackendMemory, 0
	sc, err := New(context.Background(), mem, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("%s: %v", c.where, err)
	}
	defer sc.Close()
	for _, p := range c.probes {
		switch p.kind {
		case "http":
			if _, ok := c.ports[p.port]; !ok {
				t.Errorf("%s: probe port %s is none of the container's ports", c.where, p.port)
			}
			rec := httptest.NewRecorder()
			sc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p.path, nil))
			if rec.Code != http.StatusOK {
				t.Errorf("%s: probe GET %s answers %d, want 200", c.where, p.path, rec.Code)
			}
		case "exec":
			if len(p.cmd) < 2 || p.cmd[1] != "healthcheck" || filepath.Base(p.cmd[0]) != Name {
				t.Errorf("%s: exec probe %q is not `%s healthcheck`", c.where, p.cmd, Name)
				continue
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- sc.Serve(ctx, ln) }()
			// The probe runs with the container's environment, the port
			// moved to the test's.
			env := Env{Stdout: io.Discard, Stderr: &bytes.Buffer{}, LookupEnv: func(k string) (string, bool) {
				if k == "SIDECAR_PORT" {
					return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), true
				}
				return c.lookup(k)
			}}
			if code := Main(context.Background(), p.cmd[1:], env); code != 0 {
				t.Errorf("%s: exec probe %q exits %d against a ready sidecar: %s", c.where, p.cmd, code, env.Stderr)
			}
			cancel()
			<-served
			sc.draining.Store(false)
		}
	}
}
