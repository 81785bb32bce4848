package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// widthFixtures are rendered at 80 and 120 columns too: a healthy host of
// each link layer, and the failures with the longest details and fixes.
var widthFixtures = []string{"cx5-roce-healthy", "cx6-ib-healthy", "port-down", "pfc-off", "memlock-64k", "mlx5-vfio-passthrough"}

func goldenText(t *testing.T, name string, args ...string) string {
	t.Helper()
	_, text, _ := runAtRepoRoot(t, append([]string{"--root", "testdata/hosts/" + name, "--level", "1", "--no-color"}, args...)...)
	return strings.Replace(text, "rdmadoctor "+version, "rdmadoctor golden", 1)
}

// TestGoldenReportsAtWidths keeps the text reports at 80 and 120 columns
// equal to the golden files (testdata/golden/NAME.wN.txt).
func TestGoldenReportsAtWidths(t *testing.T) {
	for _, w := range []int{80, 120} {
		t.Setenv("COLUMNS", fmt.Sprint(w))
		for _, name := range widthFixtures {
			checkGolden(t, fmt.Sprintf("%s.w%d.txt", name, w), []byte(goldenText(t, name)))
		}
	}
}

// TestTextFitsTheWidth: on every fixture, at 80, 100 and 120 columns, with
// and without -v, no line of the text report is longer than the width —
// but for a line that is one word (a path) that cannot be broken. The
// healthy hosts' reports fit without exception (-v may show a long path),
// and their ok lines are one line each, without the expected value.
func TestTextFitsTheWidth(t *testing.T) {
	healthy := map[string]bool{"cx5-roce-healthy": true, "cx6-ib-healthy": true}
	for _, w := range []int{80, 100, 120} {
		t.Setenv("COLUMNS", fmt.Sprint(w))
		for _, name := range allFixtures(t) {
			for _, v := range []string{"--verbose=false", "-v"} {
				sc := bufio.NewScanner(strings.NewReader(goldenText(t, name, v)))
				for sc.Scan() {
					l := sc.Text()
					if len(l) <= w {
						continue
					}
					if (healthy[name] && v != "-v") || len(strings.Fields(l)) > 1 {
						t.Errorf("%s %s at %d columns: a line of %d bytes: %q", name, v, w, len(l), l)
					}
				}
			}
		}
	}
	t.Setenv("COLUMNS", "100")
	for name := range healthy {
		lines := strings.Split(goldenText(t, name), "\n")
		for i, l := range lines {
			if !strings.HasPrefix(l, "ok ") {
				continue
			}
			if strings.Contains(l, "(expected:") || strings.Contains(l, "expected: ") {
				t.Errorf("%s: an ok line shows the expected value: %q", name, l)
			}
			if strings.HasPrefix(lines[i+1], " ") {
				t.Errorf("%s: an ok line continues: %q", name, lines[i+1])
			}
		}
	}
}

// TestCheckSelectionSaysSelected: --check on a host whose port is down
// runs roce.lossless (healthy) but must not call the host healthy.
func TestCheckSelectionSaysSelected(t *testing.T) {
	t.Setenv("COLUMNS", "100")
	code, out, _ := runCLI(t, "--root", filepath.Join(hostsDir, "port-down"), "--level", "1", "--no-color", "--check", "roce.lossless")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	// The five selected by --check and their prerequisites ran; the rest of
	// the catalog, however many it holds, did not.
	m := regexp.MustCompile(`(\d+) of (\d+) checks not run \(--check\)`).FindStringSubmatch(out)
	if !strings.Contains(out, "— selected checks healthy — exit 0") || m == nil || atoi(t, m[2])-atoi(t, m[1]) != 5 {
		t.Errorf("the verdict does not say it is the selected checks':\n%s", out)
	}
	if strings.Contains(out, "— healthy") {
		t.Errorf("says plainly healthy:\n%s", out)
	}
}

// runAtRepoRoot runs the command line from the repository root, as the
// documentation's examples do, so that a text report names its root (and the files under
// it) the way an operator sees them: testdata/hosts/NAME, not ../../….
// The tests of this package are not parallel: the working directory is the
// process's.
func runAtRepoRoot(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := os.Chdir(wd); err != nil {
			panic(err) // every later test would read the wrong files
		}
	}()
	return runCLI(t, args...)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
