package fleettest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// node-problem-detector is built in this module, so the versions of its
// dependencies are this module's choice: a requirement added here for the
// tests must not raise one of them, or the binary tested is not NPD's own
// build of its release. Every module NPD's go.mod requires must be
// selected here at exactly that version.
func TestNPDBuiltWithItsOwnDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.GoMod}}", "k8s.io/node-problem-detector").Output()
	if err != nil {
		t.Fatalf("go list -m k8s.io/node-problem-detector: %v", err)
	}
	npdMod, err := os.ReadFile(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	want := requires(npdMod)
	if len(want) < 20 {
		t.Fatalf("read %d requirements from node-problem-detector's go.mod", len(want))
	}
	all, err := exec.Command("go", "list", "-m", "all").Output()
	if err != nil {
		t.Fatalf("go list -m all: %v", err)
	}
	selected := map[string]string{}
	for _, line := range strings.Split(string(all), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			selected[f[0]] = f[1]
		}
	}
	for mod, v := range want {
		if selected[mod] != v {
			t.Errorf("%s: node-problem-detector requires %s, this module selects %q", mod, v, selected[mod])
		}
	}
}

// requires reads the module requirements of a go.mod: `require x v` lines
// and the lines of `require ( … )` blocks.
func requires(gomod []byte) map[string]string {
	out := map[string]string{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "require" && f[1] == "(":
			in = true
		case in && len(f) == 1 && f[0] == ")":
			in = false
		case in && len(f) == 2:
			out[f[0]] = f[1]
		case len(f) == 3 && f[0] == "require":
			out[f[1]] = f[2]
		}
	}
	return out
}
