package fleettest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// repoRoot is the rdmadoctor checkout this module lives in.
const repoRoot = ".."

// missingTool skips a test that needs something absent, or fails it under
// CI, where every tool must be there and a skip would hide a gap.
func missingTool(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI: "+format, args...)
	}
	t.Skipf(format, args...)
}

var npdVersionRE = regexp.MustCompile(`(?m)^\s*k8s\.io/node-problem-detector (v\S+)`)

// npdBinary is the node-problem-detector `make fleet-test` built from the
// version go.mod pins (NPD_BIN overrides it).
func npdBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("NPD_BIN"); p != "" {
		return p
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatalf("read fleettest/go.mod: %v", err)
	}
	m := npdVersionRE.FindSubmatch(mod)
	if m == nil {
		t.Fatal("fleettest/go.mod requires no k8s.io/node-problem-detector")
	}
	p, err := filepath.Abs(filepath.Join(repoRoot, ".cache", "npd-"+string(m[1]), "node-problem-detector"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		missingTool(t, "node-problem-detector %s is not built (run make fleet-test): %v", m[1], err)
	}
	return p
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
	buildDir  string
)

// rdmadoctorBinary builds ../cmd/rdmadoctor once per test run, as
// `make build` does (static, CGO_ENABLED=0).
func rdmadoctorBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "rdmadoctor-fleettest-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "rdmadoctor")
		cmd := exec.Command("go", "build", "-trimpath", "-o", builtBin, "./cmd/rdmadoctor")
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = err
			builtBin = strings.TrimSpace(string(out))
		}
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/rdmadoctor: %v\n%s", buildErr, builtBin)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	// The host fixtures under testdata/hosts are made, not committed (this
	// module cannot import the generator, so it runs `make fixtures`' command).
	cmd := exec.Command("go", "run", "./sysfs/sysfstest/hosttree", "materialize", "testdata")
	cmd.Dir = repoRoot
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "make the host fixtures (go run ./sysfs/sysfstest/hosttree materialize testdata): %v\n", err)
		os.Exit(1)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}
