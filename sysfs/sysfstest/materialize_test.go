package sysfstest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// someGenerated are the generated fixtures these tests write (all of them
// are 22,000 files).
var someGenerated = []string{"port-down", "rxe-softroce"}

// TestMaterialize: a first run writes every fixture and the stamp; a second
// run rewrites nothing; a changed archive is rewritten, a removed one goes,
// and a directory Materialize did not make stays.
func TestMaterialize(t *testing.T) {
	testdata := t.TempDir()
	archives := filepath.Join(testdata, ArchiveDir)
	if err := os.Mkdir(archives, 0o755); err != nil {
		t.Fatal(err)
	}
	writeArchive := func(name, hostname string) {
		tr := NewTree()
		tr.File("/proc/sys/kernel/hostname", hostname+"\n")
		tr.Link("/lib", "usr/lib")
		data, err := FormatArchive("Sources: a test.", tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(archives, name+ArchiveExt), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeArchive("captured-a", "a")
	writeArchive("captured-b", "b")
	hosts := filepath.Join(testdata, HostsDir)
	if err := os.MkdirAll(filepath.Join(hosts, "my-own-snapshot"), 0o755); err != nil {
		t.Fatal(err)
	}

	// Several test processes materialise at once under go test ./...
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = materialize(testdata, someGenerated) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range append(someGenerated, "captured-a", "captured-b", "my-own-snapshot") {
		if _, err := os.Stat(filepath.Join(hosts, name)); err != nil {
			t.Errorf("after Materialize: %v", err)
		}
	}
	hostname := filepath.Join(hosts, "captured-a", "proc", "sys", "kernel", "hostname")
	assertFile(t, hostname, "a\n")

	// Unchanged sources: nothing is rewritten (a hand edit survives; TestFixtures
	// in checks is what catches one).
	if err := os.WriteFile(hostname, []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := materialize(testdata, someGenerated); err != nil {
		t.Fatal(err)
	}
	assertFile(t, hostname, "edited\n")

	writeArchive("captured-a", "a2")
	if err := os.Remove(filepath.Join(archives, "captured-b"+ArchiveExt)); err != nil {
		t.Fatal(err)
	}
	if err := materialize(testdata, someGenerated); err != nil {
		t.Fatal(err)
	}
	assertFile(t, hostname, "a2\n")
	if _, err := os.Lstat(filepath.Join(hosts, "captured-b")); !os.IsNotExist(err) {
		t.Errorf("captured-b has no archive any more but stays: %v", err)
	}
	if _, err := os.Stat(filepath.Join(hosts, "my-own-snapshot")); err != nil {
		t.Errorf("a directory Materialize did not make was removed: %v", err)
	}
	// A process that may not write testdata only checks.
	if err := checkCurrent(testdata, someGenerated); err != nil {
		t.Errorf("checkCurrent on current fixtures: %v", err)
	}
	writeArchive("captured-a", "a3")
	if err := checkCurrent(testdata, someGenerated); err == nil || !strings.Contains(err.Error(), "captured-a is not current") {
		t.Errorf("checkCurrent on a changed archive: %v", err)
	}
	assertFile(t, hostname, "a2\n")
	stamp, _ := os.ReadFile(filepath.Join(testdata, stampFile))
	if !strings.Contains(string(stamp), "captured-a ") || strings.Contains(string(stamp), "captured-b") {
		t.Errorf("stamp:\n%s", stamp)
	}
}

func TestMaterializeRefusesABadArchive(t *testing.T) {
	testdata := t.TempDir()
	archives := filepath.Join(testdata, ArchiveDir)
	os.Mkdir(archives, 0o755)
	os.WriteFile(filepath.Join(archives, "broken"+ArchiveExt), []byte(archiveMagic+"\n== file a lines=3\n"), 0o644)
	err := materialize(testdata, someGenerated)
	if err == nil || !strings.Contains(err.Error(), "broken") || !strings.Contains(err.Error(), "ends inside the file") {
		t.Fatalf("Materialize with a broken archive: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(testdata, HostsDir, "broken")); !os.IsNotExist(err) {
		t.Errorf("a broken archive left a tree: %v", err)
	}
}

func TestMaterializeRefusesANameGivenTwice(t *testing.T) {
	testdata := t.TempDir()
	archives := filepath.Join(testdata, ArchiveDir)
	os.Mkdir(archives, 0o755)
	os.WriteFile(filepath.Join(archives, "port-down"+ArchiveExt), []byte(archiveMagic+"\n"), 0o644)
	if err := Materialize(testdata); err == nil || !strings.Contains(err.Error(), "both generated and archived") {
		t.Fatalf("Materialize with port-down archived too: %v", err)
	}
}

func assertFile(t *testing.T, p, want string) {
	t.Helper()
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		t.Errorf("%s = %q, %v; want %q", p, got, err, want)
	}
}
