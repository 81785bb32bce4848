package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// buildRdmadoctor builds the command into a temporary directory.
func buildRdmadoctor(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary: not in -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go is not on PATH: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "rdmadoctor")
	cmd := exec.Command(goTool, "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestSlurmDeployWrappers runs deploy/slurm's HealthCheckProgram and Prolog
// wrappers as slurmd does: no arguments of its own, an environment holding
// SLURMD_NODENAME and nothing else — no PATH.
func TestSlurmDeployWrappers(t *testing.T) {
	bin := buildRdmadoctor(t)
	root, _ := filepath.Abs("../../testdata/hosts")
	for _, c := range []struct {
		wrapper, host string
		code          int
		drain         bool
	}{
		{"slurm-healthcheck", "port-down", 0, true},
		{"slurm-healthcheck", "cx6-ib-healthy", 0, false},
		{"slurm-prolog", "port-down", 1, true},
		{"slurm-prolog", "cx6-ib-healthy", 0, false},
	} {
		t.Run(c.wrapper+"/"+c.host, func(t *testing.T) {
			f := newFakeScontrol(t, "node17", "IDLE", "")
			wrapper, _ := filepath.Abs("../../deploy/slurm/" + c.wrapper)
			cmd := exec.Command(wrapper, "--root", filepath.Join(root, c.host), "--scontrol", f.path,
				"--lock-file", filepath.Join(t.TempDir(), "lock"))
			cmd.Env = []string{"SLURMD_NODENAME=node17", "RDMADOCTOR=" + bin}
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			u := f.updates(t)
			if code != c.code || c.drain != (len(u) == 1) {
				t.Fatalf("exit %d, updates %q; want %d, drain %v\n%s", code, u, c.code, c.drain, out)
			}
			if c.drain && !strings.HasPrefix(u[0][3], portDownReasonStart) {
				t.Fatalf("drain reason %q", u[0][3])
			}
		})
	}
}

// TestSlurmDeploySweep runs deploy/slurm/rdmadoctor-sweep with a stand-in
// srun that behaves as the real one with --label (make slurm-test runs the real
// one): it runs the command it is given on two "nodes" at once, each with its
// SLURMD_NODENAME, and writes their stdout and stderr back, each line whole
// and marked with its task, interleaved, plus a message of its own. The
// sweep must split them into one report per node.
func TestSlurmDeploySweep(t *testing.T) {
	bin := buildRdmadoctor(t)
	dir := t.TempDir()
	fakeSrun := `#!/bin/sh
printf '%s\n' "$@" >"$FAKE_DIR/srun.argv"
while [ $# -gt 0 ] && [ "$1" != /bin/sh ]; do shift; done
i=0
for n in node01 node02; do
  (
    SLURMD_NODENAME=$n "$@" 2>"$FAKE_DIR/err.$i" | awk -v i=$i '{ print i ": " $0; fflush() }'
    awk -v i=$i '{ print i ": " $0; fflush() }' "$FAKE_DIR/err.$i" >&2
  ) &
  i=$((i + 1))
done
wait
echo "srun: error: node02: task 1: Exited with exit code 19" >&2
exit 19
`
	if err := os.WriteFile(filepath.Join(dir, "srun"), []byte(fakeSrun), 0o755); err != nil {
		t.Fatal(err)
	}
	summarize := "#!/bin/sh\nprintf 'summarize %s\\n' \"$*\"\n"
	if err := os.WriteFile(filepath.Join(dir, "summarize"), []byte(summarize), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sweep")
	root, _ := filepath.Abs("../../testdata/hosts/port-down")
	sweep, _ := filepath.Abs("../../deploy/slurm/rdmadoctor-sweep")
	cmd := exec.Command(sweep, out, "-N", "2", "-p", "gpu")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "FAKE_DIR="+dir, "RDMADOCTOR="+bin,
		"SUMMARIZE="+filepath.Join(dir, "summarize"), "ARGS=--level 1 --root "+root)
	got, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sweep: %v\n%s", err, got)
	}
	if strings.TrimSpace(string(got)) != "summarize summarize "+out {
		t.Errorf("the sweep ends with %q, want the summary of %s", got, out)
	}
	argv, _ := os.ReadFile(filepath.Join(dir, "srun.argv"))
	for _, want := range []string{"--label", "--ntasks-per-node=1", "-N\n2\n-p\ngpu", bin + "\n--level\n1\n--root\n" + root + "\n--format\njson"} {
		if !strings.Contains(string(argv), want) {
			t.Errorf("srun argv %q lacks %q", argv, want)
		}
	}
	for _, n := range []string{"node01", "node02"} {
		data, err := os.ReadFile(filepath.Join(out, n+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep report.Report
		if err := json.Unmarshal(data, &rep); err != nil || rep.Schema != report.Schema || rep.ExitCode != 19 {
			t.Fatalf("%s.json: %v, schema %q, exit %d; want a report with exit 19", n, err, rep.Schema, rep.ExitCode)
		}
		if _, err := os.Stat(filepath.Join(out, n+".err")); err == nil {
			t.Errorf("%s.err exists: the node wrote nothing on stderr", n)
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "srun.err")); err != nil || string(b) != "srun: error: node02: task 1: Exited with exit code 19\n" {
		t.Errorf("srun.err: %q, %v; want srun's own message", b, err)
	}
	left, _ := filepath.Glob(filepath.Join(out, ".sweep*"))
	if len(left) != 0 {
		t.Errorf("the sweep left %q", left)
	}
}
