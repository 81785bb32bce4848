package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// readmeBlocks returns the ```sh blocks of README's section that starts
// with heading, in order.
func readmeBlocks(t *testing.T, heading string) []string {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	start := strings.Index(s, "\n"+heading+"\n")
	if start < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	s = s[start+1:]
	if end := strings.Index(s[len(heading):], "\n## "); end >= 0 {
		s = s[:len(heading)+end]
	}
	var blocks []string
	for {
		i := strings.Index(s, "```sh\n")
		if i < 0 {
			return blocks
		}
		s = s[i+len("```sh\n"):]
		j := strings.Index(s, "```")
		if j < 0 {
			t.Fatal("README: an unclosed ```sh block")
		}
		blocks = append(blocks, s[:j])
		s = s[j+3:]
	}
}

var (
	shownExit  = regexp.MustCompile(`(?m)^exit code: (\d+)$`)
	reportExit = regexp.MustCompile(`(?m) — exit (\d+)$`)
)

// TestReadmeFreshMachine runs README's first two blocks of "On a fresh
// machine" as written, in the repository root: the first builds the
// portable binary and runs it on this host, the second on a bundled host.
// The exit code each prints must be the one its report ends with; the
// bundled host's must be port.state's 19.
func TestReadmeFreshMachine(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary: not in -short")
	}
	for _, tool := range []string{"bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH: %v", tool, err)
		}
	}
	blocks := readmeBlocks(t, "## On a fresh machine")
	if len(blocks) < 2 {
		t.Fatalf("want the build-and-run block and the bundled-host block, found %d blocks", len(blocks))
	}
	for i, want := range []string{"", "19"} {
		cmd := exec.Command("bash", "-c", blocks[i])
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("block %d exited with %v (its last command is the echo):\n%s", i+1, err, out)
		}
		shown, rep := shownExit.FindSubmatch(out), reportExit.FindSubmatch(out)
		if shown == nil || rep == nil {
			t.Fatalf("block %d: no exit code printed, or no report:\n%s", i+1, out)
		}
		if string(shown[1]) != string(rep[1]) {
			t.Errorf("block %d prints exit code %s, its report says exit %s", i+1, shown[1], rep[1])
		}
		if want != "" && string(shown[1]) != want {
			t.Errorf("block %d prints exit code %s, want %s:\n%s", i+1, shown[1], want, out)
		}
	}
	if !strings.Contains(blocks[0], "CGO_ENABLED=0") {
		t.Error("the fresh-machine block does not build with CGO_ENABLED=0")
	}
}
