package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe/fakeverbs"
)

// TestMain lets this test binary be the verbs child the live checks and the
// live capture start (they re-execute os.Executable()); without it the
// child would run the whole test suite again.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == probe.ChildArg {
		os.Exit(probe.ChildMain(os.Args[2:]))
	}
	// The reports are UTF-8 where the locale is (the goldens are); a run
	// under LANG=C is tested on its own (TestASCIIUnderCLocale).
	os.Setenv("LC_ALL", "C.UTF-8")
	materializeFixtures()
	code := m.Run()
	fakeverbs.Cleanup()
	os.Exit(code)
}

func runSnapshot(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var o, e bytes.Buffer
	code := cmdSnapshot(args, &o, &e)
	return code, o.String(), e.String()
}

// level1JSON is `rdmadoctor --root DIR --level 1 --format json` with the
// fields that differ by nature (times, the root's path) blanked.
func level1JSON(t *testing.T, root string) (int, string) {
	t.Helper()
	code, out, errOut := runCLI(t, "--root", root, "--level", "1", "--format", "json")
	if code == 1 || code == 2 {
		t.Fatalf("rdmadoctor --root %s: exit %d: %s", root, code, errOut)
	}
	// Paths in messages are shown under the root directory: blank it.
	out = strings.ReplaceAll(out, root+"/", "ROOT/")
	var m map[string]any
	if err := json.Unmarshal(normalizeJSON(t, out, root), &m); err != nil {
		t.Fatal(err)
	}
	if h, ok := m["host"].(map[string]any); ok {
		h["root"] = "ROOT"
	}
	b, _ := json.MarshalIndent(m, "", "  ")
	return code, string(b)
}

// TestSnapshotCommandRoundTrip: `rdmadoctor snapshot --root FIXTURE -o
// FILE.tar.gz`, then openRoot(FILE) gives the report the fixture gives.
func TestSnapshotCommandRoundTrip(t *testing.T) {
	for _, name := range []string{"cx5-roce-healthy", "cx6-ib-healthy", "rxe-softroce", "mlx5-ib-module-missing"} {
		t.Run(name, func(t *testing.T) {
			src := filepath.Join(hostsDir, name)
			file := filepath.Join(t.TempDir(), "node.tar.gz")
			code, out, errOut := runSnapshot(t, "--root", src, "-o", file)
			if code != 0 {
				t.Fatalf("snapshot: exit %d: %s%s", code, out, errOut)
			}
			if !strings.Contains(out, "wrote "+file) || !strings.Contains(out, "rdmadoctor --root "+file) {
				t.Errorf("output does not say what was written and how to replay it:\n%s", out)
			}
			host, cleanup, err := openRoot(file)
			if err != nil {
				t.Fatal(err)
			}
			root := host.Root()
			wantCode, want := level1JSON(t, src)
			// The fixture names paths under its directory; the snapshot, as
			// the captured host knew them.
			want = strings.ReplaceAll(want, "ROOT/", "/")
			gotCode, got := level1JSON(t, root)
			cleanup()
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Errorf("cleanup left %s", root)
			}
			if wantCode != gotCode || want != got {
				t.Errorf("replay differs from the source (exit %d vs %d):\n%s\n----\n%s", wantCode, gotCode, want, got)
			}
		})
	}
}

// TestSnapshotCommandDirAndRedact: -o DIR writes a host directory, and
// --redact hides the fixture's host name and MACs there.
func TestSnapshotCommandDirAndRedact(t *testing.T) {
	src := filepath.Join(hostsDir, "cx5-roce-healthy")
	dir := filepath.Join(t.TempDir(), "snap")
	code, out, errOut := runSnapshot(t, "--root", src, "-o", dir, "--redact")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	var m snapshot.Manifest
	data, err := os.ReadFile(filepath.Join(dir, snapshot.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if !m.Redacted || m.Hostname != "redacted-host" || m.Version != version || m.Counts.Files == 0 {
		t.Errorf("manifest %+v", m)
	}
	facts, _ := os.ReadFile(filepath.Join(dir, sysfs.FactsFile))
	for _, s := range []string{"cx5-node01", "0c:42:a1:2b:3c:4c"} {
		if bytes.Contains(facts, []byte(s)) {
			t.Errorf("redacted facts still hold %s", s)
		}
	}
	wantCode, _ := level1JSON(t, src)
	if gotCode, _ := level1JSON(t, dir); gotCode != wantCode {
		t.Errorf("redacted snapshot exits %d, the source %d", gotCode, wantCode)
	}
}

// TestSnapshotCommandLive captures this machine, which has no RDMA at all:
// the capture still works (what it cannot read is recorded, not fatal) and
// the replay judges as the live run does.
func TestSnapshotCommandLive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "live")
	code, out, errOut := runSnapshot(t, "-o", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	data, err := os.ReadFile(filepath.Join(dir, snapshot.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m snapshot.Manifest
	json.Unmarshal(data, &m)
	if !m.Live || m.Source != "/" || len(m.Checks) == 0 {
		t.Errorf("manifest of a live capture: %+v", m)
	}
	h, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Facts() == nil || (h.Facts().Netdevs == nil && h.Facts().Unavailable["netdevs"] == "") {
		t.Errorf("no netdevs and no reason in the facts: %+v", h.Facts())
	}
	if _, err := os.Lstat(filepath.Join(dir, "proc/self")); err != nil {
		t.Errorf("proc/self not captured: %v", err)
	}

	// The replay judges as the live run does (same process, same boot).
	code, live, _ := runCLI(t, "--level", "1", "--format", "json")
	replayCode, replay := level1JSON(t, dir)
	live = string(normalizeJSON(t, live, "/"))
	var lm, rm map[string]any
	json.Unmarshal([]byte(live), &lm)
	// A live report shows host paths; a replay shows them under its root.
	json.Unmarshal([]byte(strings.ReplaceAll(replay, "ROOT/", "/")), &rm)
	delete(lm, "host")
	delete(rm, "host")
	lb, _ := json.MarshalIndent(lm, "", "  ")
	rb, _ := json.MarshalIndent(rm, "", "  ")
	if code != replayCode || string(lb) != string(rb) {
		t.Errorf("replay of the live snapshot differs from the live run (exit %d vs %d):\n%s\n----\n%s", code, replayCode, lb, rb)
	}
}

func TestSnapshotCommandUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing", "x.tar.gz")
	for _, args := range [][]string{{"--bogus"}, {"extra"}, {"--timeout", "0s"}, {"--root", "/nonexistent/dir"},
		{"--root", filepath.Join(hostsDir, "port-down"), "-o", missing}} {
		if code, _, errOut := runSnapshot(t, args...); code != 2 || !strings.HasPrefix(errOut, "rdmadoctor snapshot: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	_, _, errOut := runSnapshot(t, "-o", missing)
	if want := "-o " + missing + ": the directory " + filepath.Dir(missing) + " does not exist"; !strings.Contains(errOut, want) {
		t.Errorf("-o in a missing directory: stderr %q, want %q", errOut, want)
	}
	// A hostile archive as --root is refused with its reason.
	file := filepath.Join(t.TempDir(), "bad.tar.gz")
	os.WriteFile(file, []byte("not an archive"), 0o644)
	if _, _, err := openRoot(file); err == nil || !strings.Contains(err.Error(), "not a .tar.gz") {
		t.Errorf("openRoot(garbage) = %v", err)
	}
}

// countingVerbs answers the enumeration from memory and counts the children
// it would have started.
type countingVerbs struct {
	en    *probe.Enumeration
	calls int
}

func (c *countingVerbs) Enumerate(context.Context) (*probe.Enumeration, error) {
	c.calls++
	return c.en, nil
}

func (c *countingVerbs) Probe(context.Context, []probe.Target, []string) *probe.Results {
	return nil
}

// The capture records the enumeration libibverbs.devices judged — every
// part of it — and starts no second verbs child for it.
func TestCaptureRecordsJudgedVerbs(t *testing.T) {
	en := &probe.Enumeration{Library: "libibverbs.so.1", LoadedFrom: "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0",
		Devices:   []probe.EnumDevice{{Name: "rxe0", NodeGUID: "5054:00ff:fe12:3456", UverbsDev: "uverbs0"}},
		Providers: []string{"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"},
		Warnings:  []string{"libibverbs: Warning: couldn't load driver 'libfoo-rdmav34.so'"}}
	runner := &countingVerbs{en: en}
	c := &level1Capture{opts: checks.Options{Level: 1, Executable: "/nonexistent/rdmadoctor"}}
	c.env = checks.NewEnv(sysfs.OpenLive(), c.opts)
	checks.UseVerbs(c.env, runner)
	chk, _ := checks.Lookup("libibverbs.devices")
	checks.Run(context.Background(), c.env, []*checks.Check{chk})
	got, err := c.verbs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if runner.calls != 1 {
		t.Errorf("%d enumerations for one capture, want 1", runner.calls)
	}
	want := checks.VerbsFacts(en, nil)
	wj, _ := json.Marshal(want)
	gj, _ := json.Marshal(got)
	if string(wj) != string(gj) || got.Devices[0].Uverbs != "uverbs0" || len(got.Providers) != 1 || len(got.Warnings) != 1 {
		t.Errorf("recorded %s, want %s", gj, wj)
	}

	// When the check judged nothing and nothing was started, a child runs
	// (here it cannot start: the facts say why, not a silent gap).
	c2 := &level1Capture{opts: checks.Options{Level: 1, Executable: "/nonexistent/rdmadoctor"}}
	c2.env = checks.NewEnv(sysfs.OpenLive(), c2.opts)
	f, err := c2.verbs(context.Background())
	if err != nil || f == nil || f.ChildError == "" {
		t.Errorf("fallback child: %+v, %v", f, err)
	}
}

// TestSnapshotCommandOutputFormats: -o FILE.tar writes a plain tar that
// replays as the source does; an archive name of a format not written
// (.zip, .tar.xz, …) is a usage error before anything is captured.
func TestSnapshotCommandOutputFormats(t *testing.T) {
	src := filepath.Join(hostsDir, "cx5-roce-healthy")
	out := t.TempDir()
	for _, name := range []string{"node.zip", "node.tar.bz2", "node.tar.xz", "node.tar.zst", "node.7z"} {
		code, stdout, errOut := runSnapshot(t, "--root", src, "-o", filepath.Join(out, name))
		if code != 2 || !strings.HasPrefix(errOut, "rdmadoctor snapshot: -o ") || !strings.Contains(errOut, "FILE.tar.gz") || stdout != "" {
			t.Errorf("-o %s: exit %d, stdout %q, stderr %q", name, code, stdout, errOut)
		}
	}
	if ents, _ := os.ReadDir(out); len(ents) > 0 {
		t.Errorf("refused outputs wrote %d entries", len(ents))
	}

	file := filepath.Join(out, "node.tar")
	code, stdout, errOut := runSnapshot(t, "--root", src, "-o", file)
	if code != 0 || strings.Contains(stdout, "compressed") {
		t.Fatalf("-o node.tar: exit %d: %s%s", code, stdout, errOut)
	}
	data, err := os.ReadFile(file)
	if err != nil || len(data) < 512 || string(data[257:262]) != "ustar" {
		t.Fatalf("%s is not a plain tar (%v)", file, err)
	}
	host, cleanup, err := openRoot(file)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	_, want := level1JSON(t, src)
	_, got := level1JSON(t, host.Root())
	if strings.ReplaceAll(want, "ROOT/", "/") != got {
		t.Errorf("replay of the .tar differs from the source:\n%s\n----\n%s", want, got)
	}
}

// TestOpenRootStopsWithContext: the run's deadline or an interrupt stops
// unpacking an archive --root, which leaves nothing behind.
func TestOpenRootStopsWithContext(t *testing.T) {
	src := filepath.Join(hostsDir, "cx5-roce-healthy")
	file := filepath.Join(t.TempDir(), "node.tar.gz")
	if code, out, errOut := runSnapshot(t, "--root", src, "-o", file); code != 0 {
		t.Fatalf("snapshot: exit %d: %s%s", code, out, errOut)
	}
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := openRootCtx(ctx, file); !errors.Is(err, context.Canceled) {
		t.Errorf("openRootCtx(cancelled) = %v, want context.Canceled", err)
	}
	// A directory root has nothing to unpack: the context does not matter.
	host, cleanup, err := openRootCtx(ctx, src)
	if err != nil {
		t.Errorf("openRootCtx(cancelled, dir) = %v", err)
	} else {
		host.Close()
		cleanup()
	}

	dir := filepath.Join(t.TempDir(), "out")
	code, stdout, errOut := runSnapshot(t, "--root", file, "--timeout", "1ns", "-o", dir)
	if code != 1 || !strings.Contains(errOut, "unpacking stopped") || strings.Contains(stdout, "wrote") {
		t.Errorf("--timeout 1ns --root ARCHIVE: exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("a stopped snapshot wrote %s", dir)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) > 0 {
		t.Errorf("a stopped unpack left %d entries in the temporary directory", len(ents))
	}
}
