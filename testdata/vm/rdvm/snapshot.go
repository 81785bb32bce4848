package main

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// manifestName is the file at the top of a snapshot that says how it was
// taken (sysfs/snapshot.ManifestFile; this harness imports nothing of
// rdmadoctor's, so that it judges the program from outside).
const manifestName = "rdmadoctor.manifest.json"

// snapshotManifest is the part of the manifest the round trip checks.
type snapshotManifest struct {
	Redacted bool `json:"redacted"`
	Complete bool `json:"complete"`
	Checks   []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"checks"`
	ExitCode int `json:"exit_code"`
	Counts   struct {
		Files int `json:"files"`
	} `json:"counts"`
}

// snapshotRoundTrip judges a snapshot record: the live run (live.json,
// live.exit), `rdmadoctor snapshot` (snapshot.exit, snap.tar.gz) and the
// replay of that snapshot (stdout, exit) in the same guest, on the same
// host state. The replay must say what the live run said: the same JSON
// except the run's time, durations and root — or, for a redacted snapshot,
// whose values are replaced on purpose, the same statuses, exit code and
// root cause. The scenario's --exit applies to both runs.
func (v *verifier) snapshotRoundTrip(o *outcome, dir string, m meta, active bool) {
	if !active {
		return
	}
	redacted := firstOf(m, "redact") == "1"
	if e := readTrim(filepath.Join(dir, "snapshot.exit")); e != "0" {
		o.fail("rdmadoctor snapshot exited %q: %s", e, firstLines(readTrim(filepath.Join(dir, "snapshot.stderr")), 3))
	} else {
		o.ok("snapshot written")
	}
	liveExit, replayExit := readTrim(filepath.Join(dir, "live.exit")), readTrim(filepath.Join(dir, "exit"))
	if exp, ok := m.get("exit"); ok && !slices.Contains(splitList(exp), liveExit) {
		o.fail("live run: exit code expected %s, observed %s", exp, liveExit)
	}
	if liveExit != replayExit {
		o.fail("exit code: live %s, replayed %s", liveExit, replayExit)
	}

	liveRaw, _ := os.ReadFile(filepath.Join(dir, "live.json"))
	replayRaw, _ := os.ReadFile(filepath.Join(dir, "stdout"))
	var live, replay any
	if err := json.Unmarshal(liveRaw, &live); err != nil {
		o.fail("live run: stdout is not a JSON report: %v (stderr: %s)", err, firstLines(readTrim(filepath.Join(dir, "live.stderr")), 3))
		return
	}
	if err := json.Unmarshal(replayRaw, &replay); err != nil {
		return // the generic report check has said so
	}
	var liveRep jsonReport
	if json.Unmarshal(liveRaw, &liveRep) == nil {
		args, _ := m.get("args")
		lo := &outcome{}
		v.reportInvariants(lo, &liveRep, liveExit, !strings.Contains(args, "--check"))
		for _, f := range lo.Failures {
			o.fail("live run: %s", f)
		}
	}

	var diffs []string
	compared := 0
	if redacted {
		diffs, compared = verdictDiffs(live, replay)
	} else {
		diffs, compared = reportDiffs(live, replay)
	}
	const show = 12
	for i, d := range diffs {
		if i == show {
			o.fail("… and %d more difference(s)", len(diffs)-show)
			break
		}
		o.fail("replay differs from the live run: %s", d)
	}
	what := "the JSON reports agree except started, duration_ms, host.root"
	if redacted {
		what = "statuses, exit code and root cause agree (redacted values differ on purpose)"
	}
	if len(diffs) == 0 {
		o.ok("replay equals live")
	} else {
		what = fmt.Sprintf("%d difference(s) between the live and the replayed report", len(diffs))
	}

	man, size, err := readSnapshotManifest(filepath.Join(dir, "snap.tar.gz"))
	switch {
	case err != nil:
		o.fail("snap.tar.gz: %v", err)
	default:
		o.Extra = append(o.Extra, fmt.Sprintf("live exit %s, replayed exit %s; snapshot %d files, %.1f KiB; %s (%d values compared)",
			liveExit, replayExit, man.Counts.Files, float64(size)/1024, what, compared))
		if !man.Complete {
			o.fail("the manifest says the snapshot is incomplete")
		}
		if man.Redacted != redacted {
			o.fail("the manifest says redacted=%v, the scenario asked for %v", man.Redacted, redacted)
		}
		// The manifest records the capture's own level-1 verdicts: they are
		// the live run's, check for check.
		for _, c := range man.Checks {
			if lc := liveRep.check(c.ID); lc != nil && lc.Status != c.Status {
				o.fail("manifest: %s was %s at capture, %s in the live run", c.ID, c.Status, lc.Status)
			}
		}
	}
	if words := m.all("kernel-log"); len(words) > 0 {
		kernelLogHolds(o, filepath.Join(dir, "snap.tar.gz"), words)
	}
}

// reportDiffs compares two JSON reports, leaving out what differs by nature
// between two runs: started, every duration_ms, host.root. It returns the
// differences by path and how many values it compared.
func reportDiffs(live, replay any) ([]string, int) {
	live, replay = stripRunFields(live), stripRunFields(replay)
	var diffs []string
	n := 0
	diffJSON("", live, replay, &diffs, &n)
	return diffs, n
}

func stripRunFields(r any) any {
	r = dropKey(r, "duration_ms")
	if m, ok := r.(map[string]any); ok {
		delete(m, "started")
		if h, ok := m["host"].(map[string]any); ok {
			delete(h, "root")
		}
	}
	return r
}

// dropKey removes key k from every object in v, at any depth.
func dropKey(v any, k string) any {
	switch x := v.(type) {
	case map[string]any:
		delete(x, k)
		for kk, vv := range x {
			x[kk] = dropKey(vv, k)
		}
	case []any:
		for i := range x {
			x[i] = dropKey(x[i], k)
		}
	}
	return v
}

// diffJSON appends a line per differing value, by path; checks[] entries are
// named by their id.
func diffJSON(p string, a, b any, out *[]string, n *int) {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: live %s, replayed %s", p, short(a), short(b)))
			return
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			av, aok := x[k]
			bv, bok := y[k]
			switch {
			case !aok:
				*out = append(*out, fmt.Sprintf("%s: only the replay has it: %s", join(p, k), short(bv)))
			case !bok:
				*out = append(*out, fmt.Sprintf("%s: only the live run has it: %s", join(p, k), short(av)))
			default:
				diffJSON(join(p, k), av, bv, out, n)
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			*out = append(*out, fmt.Sprintf("%s: live %s, replayed %s", p, short(a), short(b)))
			return
		}
		for i := range x {
			diffJSON(fmt.Sprintf("%s[%s]", p, elemName(x[i], i)), x[i], y[i], out, n)
		}
	default:
		*n++
		if !reflect.DeepEqual(a, b) {
			*out = append(*out, fmt.Sprintf("%s: live %s, replayed %s", p, short(a), short(b)))
		}
	}
}

func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

// elemName names an array element by its "id" (a check) or its index.
func elemName(v any, i int) string {
	if m, ok := v.(map[string]any); ok {
		if id, ok := m["id"].(string); ok && id != "" {
			return id
		}
	}
	return fmt.Sprint(i)
}

func short(v any) string {
	b, _ := json.Marshal(v)
	s := string(b)
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// verdictDiffs compares what a redacted snapshot must keep: each check's
// status, the exit code and the root cause.
func verdictDiffs(live, replay any) ([]string, int) {
	pick := func(r any) map[string]any {
		out := map[string]any{}
		m, _ := r.(map[string]any)
		out["exit_code"] = m["exit_code"]
		out["root_cause"] = m["root_cause"]
		st := map[string]any{}
		cs, _ := m["checks"].([]any)
		for _, c := range cs {
			if cm, ok := c.(map[string]any); ok {
				if id, ok := cm["id"].(string); ok {
					st[id] = cm["status"]
				}
			}
		}
		out["status"] = st
		return out
	}
	var diffs []string
	n := 0
	diffJSON("", pick(live), pick(replay), &diffs, &n)
	return diffs, n
}

// readSnapshotManifest reads the manifest from a snapshot archive (one top
// directory holding rdmadoctor.manifest.json) and returns the archive's size.
func readSnapshotManifest(file string) (*snapshotManifest, int64, error) {
	data, size, err := readSnapshotTop(file, manifestName)
	if err != nil {
		return nil, 0, err
	}
	var m snapshotManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", manifestName, err)
	}
	return &m, size, nil
}

// readSnapshotTop reads one file at the top of a snapshot archive (under its
// one top directory) and returns it with the archive's size.
func readSnapshotTop(file, name string) ([]byte, int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, 0, fmt.Errorf("gzip: %w", err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, 0, fmt.Errorf("no %s in the archive", name)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("tar: %w", err)
		}
		if path.Base(h.Name) != name || strings.Count(strings.Trim(path.Clean(h.Name), "/"), "/") > 1 {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, 16<<20))
		if err != nil {
			return nil, 0, fmt.Errorf("read %s: %w", h.Name, err)
		}
		return data, fi.Size(), nil
	}
}

// kernelLogHolds asserts that the snapshot's kernel.log holds each of the
// words, in this order: a message provoked before the capture, then what
// the driver logged after it.
func kernelLogHolds(o *outcome, archive string, words []string) {
	data, _, err := readSnapshotTop(archive, "kernel.log")
	if err != nil {
		o.fail("kernel log: %v", err)
		return
	}
	rest := string(data)
	for _, w := range words {
		i := strings.Index(rest, w)
		if i < 0 {
			o.fail("kernel.log does not hold %q (in this order); its last lines:\n%s", w, lastLines(string(data), 8))
			return
		}
		rest = rest[i+len(w):]
	}
	o.ok("kernel.log holds %s", strings.Join(words, " … "))
	o.Extra = append(o.Extra, fmt.Sprintf("kernel.log: %d RDMA line(s), holding %q", strings.Count(string(data), "\n"), words))
}

func lastLines(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
