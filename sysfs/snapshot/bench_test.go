package snapshot_test

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// healthy is the dual-port ConnectX-5 RoCE host.
var healthy = filepath.Join(hostsDir, "cx5-roce-healthy")

// BenchmarkCapture: run the level-1 checks on a recording host and copy
// what they read (no packing). Target: under 100 ms.
func BenchmarkCapture(b *testing.B) {
	for b.Loop() {
		h, err := sysfs.Open(healthy)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := snapshot.Capture(context.Background(), h, snapshot.Options{Exercise: exercise}); err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}

// BenchmarkCaptureRedacted is the same with --redact.
func BenchmarkCaptureRedacted(b *testing.B) {
	for b.Loop() {
		h, _ := sysfs.Open(healthy)
		if _, err := snapshot.Capture(context.Background(), h, snapshot.Options{Exercise: exercise, Redact: true}); err != nil {
			b.Fatal(err)
		}
		h.Close()
	}
}

// BenchmarkPack writes the healthy host's snapshot as .tar.gz and reports
// its compressed size (target: under 1 MB).
func BenchmarkPack(b *testing.B) {
	s := capture(b, healthy, false)
	var n int
	for b.Loop() {
		var buf bytes.Buffer
		if err := s.WriteTarGz(&buf, "snap"); err != nil {
			b.Fatal(err)
		}
		n = buf.Len()
	}
	b.ReportMetric(float64(n), "archive-bytes")
	b.ReportMetric(float64(s.Tree.Len()), "entries")
}

// BenchmarkUnpack checks and unpacks the healthy host's archive into a
// fresh directory.
func BenchmarkUnpack(b *testing.B) {
	data := archiveOf(b, capture(b, healthy, false))
	open := func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	for b.Loop() {
		dest := b.TempDir()
		if _, err := snapshot.Unpack(context.Background(), open, "snap.tar.gz", dest, snapshot.DefaultLimits()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplayDir is a level-1 run on the fixture directory; replaying
// an archive costs this plus BenchmarkUnpack.
func BenchmarkReplayDir(b *testing.B) {
	for b.Loop() {
		h, _ := sysfs.Open(healthy)
		level1(context.Background(), h)
		h.Close()
	}
}

// BenchmarkReplayArchive unpacks the archive and runs level 1 on it, as
// `rdmadoctor --root snap.tar.gz --level 1` does.
func BenchmarkReplayArchive(b *testing.B) {
	s := capture(b, healthy, false)
	file := filepath.Join(b.TempDir(), "snap.tar.gz")
	if _, err := s.WriteTarGzFile(file); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		root, cleanup, err := snapshot.UnpackFile(context.Background(), file, snapshot.DefaultLimits())
		if err != nil {
			b.Fatal(err)
		}
		h, _ := sysfs.Open(root)
		level1(context.Background(), h)
		h.Close()
		cleanup()
	}
}

func archiveOf(t testing.TB, s *snapshot.Snapshot) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.WriteTarGz(&buf, "snap"); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
