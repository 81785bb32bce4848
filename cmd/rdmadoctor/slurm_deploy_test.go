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
// srun that runs the command it is given (from $RDMADOCTOR on) once per node and writes each
// node's stdout where srun's %N pattern says: one report per node.
func TestSlurmDeploySweep(t *testing.T) {
	bin := buildRdmadoctor(t)
	dir := t.TempDir()
	fakeSrun := `#!/bin/sh
printf '%s\n' "$@" >"$FAKE_DIR/srun.argv"
while [ $# -gt 0 ]; do
  case "$1" in
    --output=*) outpat=${1#--output=} ;;
    --error=*) errpat=${1#--error=} ;;
    "$RDMADOCTOR") break ;;
  esac
  shift
done
for n in node01 node02; do
  out=$(printf '%s' "$outpat" | sed "s/%N/$n/"); err=$(printf '%s' "$errpat" | sed "s/%N/$n/")
  "$@" >"$out" 2>"$err"
done
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
	for _, want := range []string{"--ntasks-per-node=1", "-N\n2\n-p\ngpu", "--output=" + out + "/%N.json", bin + "\n--level\n1\n--root\n" + root + "\n--format\njson"} {
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
			t.Errorf("%s.err is empty and should have been removed", n)
		}
	}
}
