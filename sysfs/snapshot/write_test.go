package snapshot_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

func TestOutputFormat(t *testing.T) {
	for name, want := range map[string]snapshot.Format{
		"node.tar.gz": snapshot.FormatTarGz, "node.tgz": snapshot.FormatTarGz, "NODE.TGZ": snapshot.FormatTarGz,
		"node.tar": snapshot.FormatTar, "dir/node.Tar": snapshot.FormatTar,
		"node": snapshot.FormatDir, "node.d": snapshot.FormatDir, "snap-2024.01": snapshot.FormatDir,
	} {
		if got, err := snapshot.OutputFormat(name); err != nil || got != want {
			t.Errorf("OutputFormat(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"node.zip", "node.tar.bz2", "node.tar.xz", "node.tar.zst", "node.7z", "NODE.ZIP", "node.tbz2", "node.gz"} {
		_, err := snapshot.OutputFormat(name)
		if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "FILE.tar.gz") {
			t.Errorf("OutputFormat(%q): %v, want an error naming it and what to give", name, err)
		}
	}
}

func TestArchivePrefix(t *testing.T) {
	for file, want := range map[string]string{
		"/tmp/node17.tar.gz": "node17", "node17.tgz": "node17", "node17.tar": "node17", "NODE.TAR.GZ": "NODE", ".tar": "rdmadoctor-snapshot",
	} {
		if got := snapshot.ArchivePrefix(file); got != want {
			t.Errorf("ArchivePrefix(%q) = %q, want %q", file, got, want)
		}
	}
}

// TestWriteTarFile: -o FILE.tar is a plain tar, which unpacks and replays
// as the .tar.gz does.
func TestWriteTarFile(t *testing.T) {
	s := capture(t, healthy, false)
	file := filepath.Join(t.TempDir(), "node17.tar")
	size, err := s.WriteTarFile(file)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(file)
	if int64(len(data)) != size || len(data) < 512 || string(data[257:262]) != "ustar" {
		t.Fatalf("not a plain tar of %d bytes: %d bytes, % x", size, len(data), data[:min(len(data), 4)])
	}
	root, cleanup, err := snapshot.UnpackFile(context.Background(), file, snapshot.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if filepath.Base(root) != "node17" {
		t.Errorf("host root %s, want node17", root)
	}
	if want, got := reportJSON(t, healthy), reportJSON(t, root); want != got {
		t.Errorf("report of the .tar differs from the source's:\n%s", diffLines(want, got))
	}
}

// TestCaptureCountsAsUnpackDoes: a capture is refused exactly when its
// archive would be, so what is written can always be replayed.
func TestCaptureCountsAsUnpackDoes(t *testing.T) {
	var buf bytes.Buffer
	if err := capture(t, healthy, false).WriteTar(&buf, "snap"); err != nil {
		t.Fatal(err)
	}
	n := 0
	for tr := tar.NewReader(bytes.NewReader(buf.Bytes())); ; n++ {
		if _, err := tr.Next(); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	lim := snapshot.DefaultLimits()
	lim.MaxEntries = n
	s, err := snapshot.Capture(context.Background(), openHost(t, healthy), snapshot.Options{Exercise: exercise, Now: fixedNow, Limits: lim})
	if err != nil {
		t.Fatalf("capture within %d entries: %v", n, err)
	}
	var again bytes.Buffer
	s.WriteTarGz(&again, "snap")
	if _, err := snapshot.Unpack(context.Background(), opener(again.Bytes()), "x.tar.gz", t.TempDir(), lim); err != nil {
		t.Errorf("unpack within %d entries: %v", n, err)
	}
	lim.MaxEntries = n - 1
	if _, err := snapshot.Capture(context.Background(), openHost(t, healthy), snapshot.Options{Exercise: exercise, Now: fixedNow, Limits: lim}); err == nil {
		t.Errorf("capture of %d archive entries accepted under a limit of %d", n, n-1)
	}
}
