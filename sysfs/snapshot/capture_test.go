package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

const hostsDir = "../../testdata/hosts"

var fixedNow = func() time.Time { return time.Date(2025, 3, 1, 3, 0, 0, 0, time.UTC) }

// level1 runs what a level-1 diagnosis runs and returns the report.
func level1(ctx context.Context, h *sysfs.Host) *report.Report {
	all, _ := checks.Select(nil)
	var sel []*checks.Check
	for _, c := range all {
		if c.Level <= 1 {
			sel = append(sel, c)
		}
	}
	env := checks.NewEnv(h, checks.Options{Level: 1, MinMemlock: 64 << 20})
	rep := &report.Report{Schema: report.Schema, Level: 1}
	rep.Host.Hostname = h.Hostname()
	rep.Host.Kernel, _ = h.KernelRelease()
	rep.Checks = checks.Run(ctx, env, sel)
	rep.Inventory = checks.Inventory(env)
	rep.Finish(false)
	return rep
}

func exercise(ctx context.Context, h *sysfs.Host) ([]snapshot.CheckStatus, int) {
	rep := level1(ctx, h)
	var out []snapshot.CheckStatus
	for _, c := range rep.Checks {
		out = append(out, snapshot.CheckStatus{ID: c.ID, Status: string(c.Status)})
	}
	return out, rep.ExitCode
}

func openHost(t testing.TB, dir string) *sysfs.Host {
	t.Helper()
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func capture(t testing.TB, dir string, redact bool) *snapshot.Snapshot {
	t.Helper()
	s, err := snapshot.Capture(context.Background(), openHost(t, dir), snapshot.Options{
		Exercise: exercise, Redact: redact, Version: "test", Now: fixedNow,
	})
	if err != nil {
		t.Fatalf("capture %s: %v", dir, err)
	}
	return s
}

// reportJSON is the level-1 report of a root with the fields that differ
// between a host and its snapshot by nature blanked: times, durations and
// the root's own path.
func reportJSON(t testing.TB, dir string) string {
	t.Helper()
	rep := level1(context.Background(), openHost(t, dir))
	var b bytes.Buffer
	if err := report.WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, c := range m["checks"].([]any) {
		delete(c.(map[string]any), "duration_ms")
	}
	delete(m, "duration_ms")
	delete(m, "started")
	out, _ := json.MarshalIndent(m, "", " ")
	abs, _ := filepath.Abs(dir)
	s := strings.ReplaceAll(string(out), abs, "ROOT")
	return strings.ReplaceAll(s, dir, "ROOT")
}

func fixtures(t testing.TB) []string {
	ents, err := os.ReadDir(hostsDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	if len(out) < 3 {
		t.Fatalf("only %d host fixtures in %s", len(out), hostsDir)
	}
	return out
}

// TestRoundTripArchive captures every fixture host, packs it, unpacks it
// the way --root does, and asks for the same level-1 report.
func TestRoundTripArchive(t *testing.T) {
	for _, name := range fixtures(t) {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(hostsDir, name)
			s := capture(t, src, false)
			file := filepath.Join(t.TempDir(), "snap.tar.gz")
			if _, err := s.WriteTarGzFile(file); err != nil {
				t.Fatal(err)
			}
			root, cleanup, err := snapshot.UnpackFile(context.Background(), file, snapshot.DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			if filepath.Base(root) != "snap" {
				t.Errorf("host root %s, want the archive's top directory snap", root)
			}
			want, got := reportJSON(t, src), reportJSON(t, root)
			if want != got {
				t.Errorf("report of the snapshot differs from the source's:\n%s", diffLines(want, got))
			}
			if len(s.Manifest.Unreadable) > 0 {
				t.Errorf("unreadable paths in a fixture capture: %+v", s.Manifest.Unreadable)
			}
			if s.Manifest.Counts.Recorded == 0 || s.Manifest.Counts.Files == 0 {
				t.Errorf("counts %+v: nothing recorded", s.Manifest.Counts)
			}
		})
	}
}

// TestRoundTripDir does the same through -o DIR.
func TestRoundTripDir(t *testing.T) {
	src := filepath.Join(hostsDir, "cx5-roce-healthy")
	s := capture(t, src, false)
	dir := filepath.Join(t.TempDir(), "out")
	if err := s.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	if want, got := reportJSON(t, src), reportJSON(t, dir); want != got {
		t.Errorf("report of the snapshot directory differs:\n%s", diffLines(want, got))
	}
	if err := s.WriteDir(dir); err == nil {
		t.Error("writing into a non-empty directory was not refused")
	}
}

// TestCaptureCopiesOnlyWhatWasRead: the snapshot holds fewer paths than
// the fixture (the fixture has files no check reads), keeps sysfs links
// relative and as they were, and keeps the manifest's statuses equal to a
// direct run.
func TestCaptureCopiesOnlyWhatWasRead(t *testing.T) {
	src := filepath.Join(hostsDir, "cx5-roce-healthy")
	s := capture(t, src, false)
	for _, e := range s.Tree.Entries() {
		disk := filepath.Join(src, e.Path)
		fi, err := os.Lstat(disk)
		if err != nil {
			t.Errorf("%s: in the snapshot but not in the source: %v", e.Path, err)
			continue
		}
		switch e.Kind {
		case snapshot.Symlink:
			target, _ := os.Readlink(disk)
			if target != e.Target {
				t.Errorf("%s: link %q stored as %q", e.Path, target, e.Target)
			}
		case snapshot.File:
			if !fi.Mode().IsRegular() {
				t.Errorf("%s: stored as a file, is %v", e.Path, fi.Mode())
			}
			data, _ := os.ReadFile(disk)
			if !e.Placeholder && !bytes.Equal(data, e.Data) {
				t.Errorf("%s: content differs", e.Path)
			}
		case snapshot.Dir:
			if !fi.IsDir() {
				t.Errorf("%s: stored as a directory, is %v", e.Path, fi.Mode())
			}
		}
	}
	if e := s.Tree.Lookup("sys/class/infiniband/mlx5_0"); e == nil || e.Kind != snapshot.Symlink || strings.HasPrefix(e.Target, "/") {
		t.Errorf("sys/class/infiniband/mlx5_0 = %+v, want a relative symlink", e)
	}
	rep := level1(context.Background(), openHost(t, src))
	if len(s.Manifest.Checks) != len(rep.Checks) || s.Manifest.ExitCode != rep.ExitCode {
		t.Errorf("manifest has %d checks, exit %d; a direct run %d checks, exit %d",
			len(s.Manifest.Checks), s.Manifest.ExitCode, len(rep.Checks), rep.ExitCode)
	}
	if s.Manifest.CapturedAt != fixedNow() || s.Manifest.Version != "test" || s.Manifest.Live {
		t.Errorf("manifest header %+v", s.Manifest)
	}
	if !reflect.DeepEqual(s.Facts.Netdevs, openHost(t, src).Facts().Netdevs) {
		t.Error("facts not copied from the source root")
	}
}

// TestCaptureSymlinkWalk: intermediate links are reproduced as links, an
// absolute link is stored relative (and said so), a link that climbs above
// "/" is clamped, a FIFO is skipped with its reason, an unreadable file is
// listed with its errno (when not root).
func TestCaptureSymlinkWalk(t *testing.T) {
	src := t.TempDir()
	mk := func(p, content string) {
		full := filepath.Join(src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln := func(p, target string) {
		full := filepath.Join(src, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	mk("sys/devices/pci0000:00/0000:00:01.0/net/eth0/mtu", "1500\n")
	mk("sys/devices/pci0000:00/0000:00:01.0/net/eth0/address", "52:54:00:12:34:56\n")
	ln("sys/class/net/eth0", "../../devices/pci0000:00/0000:00:01.0/net/eth0")
	ln("etc/abs", "/sys/class/net")
	ln("etc/climb", "../../../../../sys/class")
	mk("usr/lib/libx.so.1.2", "ELF")
	ln("usr/lib/libx.so.1", "libx.so.1.2")
	mk("usr/lib/other.so", "ELF")
	os.MkdirAll(filepath.Join(src, "usr/lib/sub"), 0o755)
	mk("secret", "s")
	os.Chmod(filepath.Join(src, "secret"), 0)
	if err := mkfifo(filepath.Join(src, "fifo")); err != nil {
		t.Skip("no mkfifo:", err)
	}

	h := openHost(t, src)
	ex := func(ctx context.Context, h *sysfs.Host) ([]snapshot.CheckStatus, int) {
		h.ReadAttr("/sys/class/net/eth0/mtu")
		h.ReadAttr("/etc/abs/eth0/address")
		h.ReadDir("/etc/climb")
		h.ReadDir("/usr/lib")
		h.ReadAttr("/usr/lib/libx.so.1")
		h.ReadAttr("/secret")
		h.Stat("/fifo")
		h.Stat("/missing/file")
		return nil, 0
	}
	s, err := snapshot.Capture(context.Background(), h, snapshot.Options{Exercise: ex, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"sys/class/net/eth0":                                   "link ../../devices/pci0000:00/0000:00:01.0/net/eth0",
		"sys/devices/pci0000:00/0000:00:01.0/net/eth0":         "dir",
		"sys/devices/pci0000:00/0000:00:01.0/net/eth0/mtu":     "file 1500\n",
		"sys/devices/pci0000:00/0000:00:01.0/net/eth0/address": "file 52:54:00:12:34:56\n",
		"etc/abs":             "link ../sys/class/net",
		"etc/climb":           "link ../sys/class",
		"usr/lib/libx.so.1":   "link libx.so.1.2",
		"usr/lib/libx.so.1.2": "file ELF",
		"usr/lib/other.so":    "placeholder 0",
		"usr/lib/sub":         "dir",
	}
	for p, w := range want {
		e := s.Tree.Lookup(p)
		if e == nil {
			t.Errorf("%s: missing", p)
			continue
		}
		var got string
		switch {
		case e.Kind == snapshot.Symlink:
			got = "link " + e.Target
		case e.Kind == snapshot.Dir:
			got = "dir"
		case e.Placeholder:
			got = "placeholder " + string(rune('0'+len(e.Data)))
		default:
			got = "file " + string(e.Data)
		}
		if got != w {
			t.Errorf("%s = %q, want %q", p, got, w)
		}
	}
	if s.Tree.Lookup("fifo") != nil || s.Tree.Lookup("missing") != nil {
		t.Error("a FIFO or a missing path made it into the snapshot")
	}
	reasons := map[string]string{}
	for _, p := range append(s.Manifest.Skipped, s.Manifest.Unreadable...) {
		reasons[p.Path] = p.Reason + " " + p.Errno
	}
	if !strings.Contains(reasons["/fifo"], "FIFO") {
		t.Errorf("FIFO not reported as skipped: %v", reasons)
	}
	if os.Geteuid() != 0 && !strings.Contains(reasons["/secret"], "EACCES") {
		t.Errorf("unreadable file not reported: %v", reasons)
	}
	if len(s.Manifest.Rewritten) != 2 {
		t.Errorf("rewritten links %+v, want etc/abs and etc/climb", s.Manifest.Rewritten)
	}
}

// TestCaptureDeadline: a capture whose deadline has passed says so and
// marks the manifest incomplete, and never hangs.
func TestCaptureDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, err := snapshot.Capture(ctx, openHost(t, filepath.Join(hostsDir, "cx5-roce-healthy")), snapshot.Options{Exercise: exercise})
	if err == nil || s == nil || s.Manifest.Complete {
		t.Fatalf("capture after the deadline: err %v, complete %v", err, s != nil && s.Manifest.Complete)
	}
}

func TestCaptureBudget(t *testing.T) {
	full := capture(t, filepath.Join(hostsDir, "cx5-roce-healthy"), false)
	lim := snapshot.DefaultLimits()
	lim.MaxTotalBytes = full.Tree.Bytes() / 2
	s, err := snapshot.Capture(context.Background(), openHost(t, filepath.Join(hostsDir, "cx5-roce-healthy")),
		snapshot.Options{Exercise: exercise, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	if s.Tree.Bytes() > lim.MaxTotalBytes {
		t.Errorf("%d bytes copied, budget %d", s.Tree.Bytes(), lim.MaxTotalBytes)
	}
	found := false
	for _, p := range s.Manifest.Skipped {
		found = found || strings.Contains(p.Reason, "budget")
	}
	if !found {
		t.Error("no skipped path names the spent budget")
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
		if len(out) > 40 {
			break
		}
	}
	return strings.Join(out, "\n")
}
