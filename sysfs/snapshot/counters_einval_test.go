package snapshot_test

import (
	"context"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// A counter that read EINVAL on the captured host (a ConnectX-7's
// VL15_dropped) replays as EINVAL, not as an empty, malformed value: the
// capture records the errno in the facts file and keeps an empty
// placeholder, and counter reads honour the recorded errno. The source here
// is such a capture; capturing it again and replaying must judge alike.
func TestCaptureReplaysEINVALCounter(t *testing.T) {
	tr := sysfstest.Build(sysfstest.CX6IB())
	p := path.Join(sysfstest.PortDir(tr, "mlx5_0", 1), "counters", "VL15_dropped")
	tr.File(p, "")
	tr.Facts.ReadErrors = map[string]string{p: "EINVAL"}
	src := filepath.Join(t.TempDir(), "host")
	if err := tr.Write(src); err != nil {
		t.Fatal(err)
	}
	counters := func(dir string) report.CheckResult {
		rep := level1(context.Background(), openHost(t, dir))
		for _, c := range rep.Checks {
			if c.ID == "counters.errors" {
				return c
			}
		}
		t.Fatalf("no counters.errors in %s", dir)
		return report.CheckResult{}
	}
	judged := func(where string, c report.CheckResult) {
		text := c.Summary + "\n" + strings.Join(c.Details, "\n")
		if c.Status != report.Pass || !strings.Contains(text, "1 counters unreadable (EINVAL: the driver refused the read)") ||
			strings.Contains(text, "not a counter value") {
			t.Errorf("%s: %s\n%s", where, c.Status, text)
		}
	}
	judged("source", counters(src))

	s := capture(t, src, false)
	if got := s.Facts.ReadErrors[p]; got != "EINVAL" {
		t.Fatalf("snapshot facts read_errors[%s] = %q, want EINVAL", p, got)
	}
	file := filepath.Join(t.TempDir(), "snap.tar.gz")
	if _, err := s.WriteTarGzFile(file); err != nil {
		t.Fatal(err)
	}
	root, cleanup, err := snapshot.UnpackFile(context.Background(), file, snapshot.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	judged("replay", counters(root))
	if want, got := reportJSON(t, src), reportJSON(t, root); want != got {
		t.Errorf("replay differs from the source:\n%s", diffLines(want, got))
	}
}
