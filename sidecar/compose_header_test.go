package sidecar

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The commands in deploy/compose.yaml's header work as written: each sets
// every variable that a service it starts requires (${NAME:?...}), and
// every profile of the file is started by one of them.
func TestComposeHeaderCommands(t *testing.T) {
	path := filepath.Join("..", "deploy", "compose.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var commands []string
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "#") {
			break // the header is the leading comment
		}
		if strings.Contains(line, "docker compose ") {
			commands = append(commands, strings.TrimSpace(strings.TrimPrefix(line, "#")))
		}
	}
	if len(commands) == 0 {
		t.Fatalf("%s: no docker compose command in the header", path)
	}
	docs := readYAML(t, path)
	services, _ := docs[0]["services"].(map[string]any)
	required := regexp.MustCompile(`\$\{([A-Z0-9_]+):\?[^}]*\}`)
	started := map[string]bool{}
	for _, cmd := range commands {
		cmd, _, _ = strings.Cut(cmd, "#")
		words := strings.Fields(cmd)
		env := map[string]bool{}
		var profiles []string
		for i, w := range words {
			if k, _, ok := strings.Cut(w, "="); ok && i < slices.Index(words, "docker") {
				env[k] = true
			}
			if w == "--profile" && i+1 < len(words) {
				profiles = append(profiles, words[i+1])
			}
		}
		if !strings.Contains(cmd, "-f deploy/compose.yaml") || !slices.Contains(words, "up") {
			t.Errorf("%q: want docker compose -f deploy/compose.yaml ... up", cmd)
		}
		for name, svc := range services {
			ps := strs(dig(svc, "profiles"))
			if len(ps) > 0 && !slices.ContainsFunc(ps, func(p string) bool { return slices.Contains(profiles, p) }) {
				continue
			}
			for _, p := range ps {
				started[p] = true
			}
			envs, _ := dig(svc, "environment").(map[string]any)
			for k, v := range envs {
				s, _ := v.(string)
				for _, m := range required.FindAllStringSubmatch(s, -1) {
					if !env[m[1]] {
						t.Errorf("%q starts service %s, whose %s requires %s, which the command does not set", cmd, name, k, m[1])
					}
				}
			}
		}
	}
	for name, svc := range services {
		for _, p := range strs(dig(svc, "profiles")) {
			if !started[p] {
				t.Errorf("service %s's profile %q is in no command of the header", name, p)
			}
		}
	}
}
