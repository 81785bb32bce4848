package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// cannedSrun stands in for srun: it prints what srun --label brings back
// from two nodes — each task naming its node first — and a message of
// its own, without running anything.
const cannedSrun = `#!/bin/sh
echo '0: rdmadoctor-sweep node node01'
echo '0: {"schema":"rdmadoctor.report/v1","host":{"hostname":"node01"}}'
echo '1: rdmadoctor-sweep node node02'
echo '1: {"schema":"rdmadoctor.report/v1","host":{"hostname":"node02"}}'
echo '0: rdmadoctor-sweep node node01' >&2
echo '1: rdmadoctor-sweep node node02' >&2
echo '1: a warning of node02' >&2
echo 'srun: error: node02: task 1: Exited with exit code 19' >&2
exit 19
`

// runSweep runs deploy/slurm/rdmadoctor-sweep on out with the canned srun
// and a summarize that only says it ran.
func runSweep(t *testing.T, out string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	for name, body := range map[string]string{"srun": cannedSrun, "summarize": "#!/bin/sh\necho summarized \"$2\"\n"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweep, _ := filepath.Abs("../../deploy/slurm/rdmadoctor-sweep")
	cmd := exec.Command(sweep, out, "-N", "2")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SUMMARIZE="+filepath.Join(bin, "summarize"))
	got, err := cmd.CombinedOutput()
	return string(got), err
}

// victim is a file outside the sweep's directory that a planted link
// points at; it must never change.
func victim(t *testing.T) (path string, untouched func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "victim")
	const content = "root:x:0:0:root:/root:/bin/sh\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		t.Helper()
		if b, err := os.ReadFile(path); err != nil || string(b) != content {
			t.Errorf("the file outside was written through a link: %q, %v", b, err)
		}
	}
}

// TestSweepNeverWritesThroughALink: links planted in OUTDIR under the
// names the sweep writes (a node's report and .err, srun's messages) are
// replaced, not followed; the file they point at is untouched.
func TestSweepNeverWritesThroughALink(t *testing.T) {
	target, untouched := victim(t)
	out := filepath.Join(t.TempDir(), "sweep")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"node01.json", "node02.err", "srun.err", "srun.out"} {
		if err := os.Symlink(target, filepath.Join(out, name)); err != nil {
			t.Fatal(err)
		}
	}
	// A directory under a report's name must not swallow the report.
	if err := os.Mkdir(filepath.Join(out, "node02.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := runSweep(t, out)
	untouched()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(got, "could not write node02.json in "+out) || !strings.Contains(got, "summarized "+out) {
		t.Errorf("err %v: want the summary, then exit 1 naming node02.json, which a directory took:\n%s", err, got)
	}
	if left, _ := os.ReadDir(filepath.Join(out, "node02.json")); len(left) != 0 {
		t.Errorf("the report went into the directory planted under its name: %v", left)
	}
	for name, want := range map[string]string{"node01.json": `"hostname":"node01"`, "node02.err": "a warning of node02", "srun.err": "srun: error: node02"} {
		b, _ := os.ReadFile(filepath.Join(out, name))
		if fi, err := os.Lstat(filepath.Join(out, name)); err != nil || !fi.Mode().IsRegular() || !strings.Contains(string(b), want) {
			t.Errorf("%s: %v, %q; want a regular file with %q\n%s", name, err, b, want, got)
		}
	}
	if _, err := os.Lstat(filepath.Join(out, "srun.out")); err == nil {
		t.Error("srun.out, a link planted there, is kept: srun wrote nothing on stdout of its own")
	}
	if left, _ := filepath.Glob(filepath.Join(out, ".sweep*")); len(left) != 0 {
		t.Errorf("the sweep left %q", left)
	}
}

// TestSweepRefusesADirectoryOthersControl: OUTDIR that is a link, that
// others may write, that sits in a directory others may write without the
// sticky bit, or (as root) that another user owns is refused with the
// reason, exit 2, before srun runs; the planted link's target is untouched.
func TestSweepRefusesADirectoryOthersControl(t *testing.T) {
	target, untouched := victim(t)
	cases := map[string]struct {
		setup func(t *testing.T, out string)
		why   string
	}{
		"symlink": {func(t *testing.T, out string) {
			sweepMust(t, os.Symlink(filepath.Dir(target), out))
		}, "a symbolic link"},
		"world-writable": {func(t *testing.T, out string) {
			sweepMust(t, os.Mkdir(out, 0o755))
			sweepMust(t, os.Chmod(out, os.ModeSticky|0o777))
			sweepMust(t, os.Symlink(target, filepath.Join(out, "node01.json")))
		}, "mode 1777: writable by others"},
		"group-writable": {func(t *testing.T, out string) {
			sweepMust(t, os.Mkdir(out, 0o755))
			sweepMust(t, os.Chmod(out, 0o775))
		}, "mode 775: writable by others"},
		"parent without sticky bit": {func(t *testing.T, out string) {
			sweepMust(t, os.Chmod(filepath.Dir(out), 0o777))
		}, "is writable by others without the sticky bit"},
	}
	if os.Geteuid() == 0 {
		cases["owned by another user"] = struct {
			setup func(t *testing.T, out string)
			why   string
		}{func(t *testing.T, out string) {
			sweepMust(t, os.Mkdir(out, 0o755))
			sweepMust(t, os.Chown(out, 65534, 65534))
			sweepMust(t, os.Symlink(target, filepath.Join(out, "node01.json")))
		}, "owned by uid 65534"}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "sweep")
			tc.setup(t, out)
			got, err := runSweep(t, out)
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(got, tc.why) || strings.Contains(got, "summarized") {
				t.Errorf("err %v, output %q; want exit 2 naming %q", err, got, tc.why)
			}
			untouched()
		})
	}
}

func sweepMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
