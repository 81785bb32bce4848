package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fixtures under testdata/ are one real healthy guest's answers: the
// rdmadoctor JSON report and the reference tools' output from the same boot.
const healthy = "testdata/healthy-rxe"

func loadInventory(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(healthy, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep["inventory"].(map[string]any)
}

func compareWith(t *testing.T, inv map[string]any) comparison {
	t.Helper()
	raw, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	return compareInventory(raw, healthy)
}

func port1(inv map[string]any) map[string]any {
	dev := inv["rdma_devices"].([]any)[0].(map[string]any)
	return dev["ports"].([]any)[0].(map[string]any)
}

func TestCompareInventoryHealthyAgrees(t *testing.T) {
	c := compareWith(t, loadInventory(t))
	if len(c.failures) != 0 {
		t.Fatalf("healthy inventory differs: %v", c.failures)
	}
	// names ×2, node GUID ×3, sys GUID ×2, node type, port count, state ×2,
	// phys state ×2, link layer, active MTU, rate, 2 GIDs and their types,
	// port netdev, netdev state/mtu/mac/addresses.
	if c.agree < 20 {
		t.Fatalf("only %d fields compared", c.agree)
	}
}

// Each mutation is a wrong inventory the comparison must catch.
func TestCompareInventoryCatchesEachField(t *testing.T) {
	cases := map[string]struct {
		mutate func(inv map[string]any)
		want   string
	}{
		"node guid": {func(inv map[string]any) {
			inv["rdma_devices"].([]any)[0].(map[string]any)["node_guid"] = "0000:0000:0000:0001"
		}, "node GUID"},
		"device name": {func(inv map[string]any) {
			inv["rdma_devices"].([]any)[0].(map[string]any)["name"] = "rxe9"
		}, "device names"},
		"no device":  {func(inv map[string]any) { inv["rdma_devices"] = []any{} }, "device names"},
		"port state": {func(inv map[string]any) { port1(inv)["state"] = "DOWN" }, "state"},
		"phys state": {func(inv map[string]any) { port1(inv)["phys_state"] = "Disabled" }, "phys_state"},
		"link layer": {func(inv map[string]any) { port1(inv)["link_layer"] = "InfiniBand" }, "link_layer"},
		"active mtu": {func(inv map[string]any) { port1(inv)["active_mtu"] = 4096 }, "active_mtu"},
		"no mtu":     {func(inv map[string]any) { delete(port1(inv), "active_mtu") }, "active_mtu"},
		"rate":       {func(inv map[string]any) { port1(inv)["rate"] = "100 Gb/sec (4X EDR)" }, "rate"},
		"gid value": {func(inv map[string]any) {
			port1(inv)["gids"].([]any)[1].(map[string]any)["gid"] = "0000:0000:0000:0000:0000:ffff:c000:0202"
		}, "GID[1]"},
		"gid type": {func(inv map[string]any) {
			port1(inv)["gids"].([]any)[0].(map[string]any)["type"] = "IB/RoCE v1"
		}, "GID[0] type"},
		"gid missing": {func(inv map[string]any) {
			port1(inv)["gids"] = port1(inv)["gids"].([]any)[:1]
		}, "GID[1]"},
		"gid extra": {func(inv map[string]any) {
			g := port1(inv)["gids"].([]any)
			port1(inv)["gids"] = append(g, map[string]any{"index": 5, "gid": "fe80::1", "type": "RoCE v2"})
		}, "GID[5]"},
		"port netdev": {func(inv map[string]any) { port1(inv)["netdev"] = "eth0" }, "netdev"},
		"netdev mtu": {func(inv map[string]any) {
			inv["netdevs"].([]any)[0].(map[string]any)["mtu"] = 9000
		}, "mtu"},
		"netdev address": {func(inv map[string]any) {
			inv["netdevs"].([]any)[0].(map[string]any)["addresses"] = []any{"192.0.2.1/24"}
		}, "addresses"},
		"netdev missing": {func(inv map[string]any) { inv["netdevs"] = []any{} }, "inventory.netdevs"},
		"gid netdev": {func(inv map[string]any) {
			port1(inv)["gids"].([]any)[1].(map[string]any)["netdev"] = "lo"
		}, "GID[1] netdev"},
		"node type": {func(inv map[string]any) {
			inv["rdma_devices"].([]any)[0].(map[string]any)["node_type"] = "4: RNIC"
		}, "node_type"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inv := loadInventory(t)
			tc.mutate(inv)
			c := compareWith(t, inv)
			if len(c.failures) == 0 {
				t.Fatalf("a wrong %s went unnoticed", name)
			}
			if !strings.Contains(strings.Join(c.failures, "\n"), tc.want) {
				t.Fatalf("failures do not mention %q: %v", tc.want, c.failures)
			}
		})
	}
}

func TestParseDevinfo(t *testing.T) {
	text, err := os.ReadFile(filepath.Join(healthy, "ref.ibv_devinfo"))
	if err != nil {
		t.Fatal(err)
	}
	devs := parseDevinfo(string(text))
	if len(devs) != 1 || devs[0].Name != "rxe0" || len(devs[0].Ports) != 1 {
		t.Fatalf("got %+v", devs)
	}
	p := devs[0].Ports[0]
	if p.Num != 1 || normState(p.Attrs["state"]) != "active" || p.Attrs["link_layer"] != "Ethernet" {
		t.Fatalf("port %+v", p)
	}
	if len(p.GIDs) != 2 || p.GIDs[1].GID != "::ffff:192.0.2.1" || p.GIDs[1].Type != "RoCE v2" {
		t.Fatalf("gids %+v", p.GIDs)
	}
	if r, ok := devinfoRate(p); !ok || r != 2.5 {
		t.Fatalf("rate %v %v", r, ok)
	}
	// rdma-core before v29 printed no GID type.
	old := parseDevinfo("hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0000:0000:0000:0001\n")
	if g := old[0].Ports[0].GIDs[0]; g.Type != "" || normGID(g.GID) != "fe80::1" {
		t.Fatalf("old-style GID %+v", g)
	}
}

func TestNormalizers(t *testing.T) {
	for in, want := range map[string]string{
		"PORT_ACTIVE (4)": "active", "4: ACTIVE": "active", "ACTIVE": "active",
		"LINK_UP (5)": "linkup", "5: LinkUp": "linkup", "LinkUp": "linkup", "LINK_UP": "linkup",
	} {
		if got := normState(in); got != want {
			t.Errorf("normState(%q) = %q, want %q", in, got, want)
		}
	}
	if normGUID("F4C7:47ff:fe46:fc9f") != normGUID("f4c747fffe46fc9f") {
		t.Error("GUID forms differ")
	}
	if normNodeType("1: CA") != normNodeType("ca") {
		t.Error("node types differ")
	}
	if normGIDType("IB/RoCE v1") != "RoCE v1" {
		t.Error("GID type")
	}
}

func TestParseList(t *testing.T) {
	data, err := os.ReadFile("testdata/list.txt")
	if err != nil {
		t.Fatal(err)
	}
	cat := parseList(string(data))
	if e, ok := cat["kernel.modules"]; !ok || e.Code != 13 || e.Level != 1 {
		t.Fatalf("kernel.modules: %+v %v", e, ok)
	}
	if _, ok := cat["ID"]; ok || len(cat) < 3 {
		t.Fatalf("catalog %v", cat)
	}
	if len(parseList("rdmadoctor: unknown command \"list\"\n")) != 0 {
		t.Fatal("an error message parsed as checks")
	}
}

func TestParseResourceSummary(t *testing.T) {
	data, err := os.ReadFile("testdata/rdma_resource.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseResourceSummary(data)
	if err != nil {
		t.Fatal(err)
	}
	if got["pd"] != 1 || got["qp"] != 1 || got["mr"] != 0 {
		t.Fatalf("%v", got)
	}
	more := map[string]int64{"pd": 2, "qp": 1, "cq": 1}
	if !exceeds(more, got) || exceeds(got, got) || equalCounts(more, got) || !equalCounts(got, got) {
		t.Fatal("count comparison")
	}
	if _, err := parseResourceSummary([]byte("error: no netlink")); err == nil {
		t.Fatal("garbage parsed")
	}
}

func record(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	zw.Close()
	enc := base64.StdEncoding.EncodeToString(buf.Bytes())
	var lines []string
	for len(enc) > 76 {
		lines = append(lines, enc[:76])
		enc = enc[76:]
	}
	return strings.Join(append(lines, enc), "\r\n")
}

func TestCollect(t *testing.T) {
	dir := t.TempDir()
	console := "boot noise\r\n@@RDVM-BEGIN a@@\r\n" + record(t, map[string]string{"exit": "15\n", "meta": "exit 15\n"}) +
		"\r\n[   12.3] a stray kernel line: not base64\r\n@@RDVM-END a@@\r\n" +
		"@@RDVM-BEGIN broken@@\r\nnot*base64\r\n@@RDVM-END broken@@\r\n"
	in := filepath.Join(dir, "console.log")
	os.WriteFile(in, []byte(console), 0o644)
	out := filepath.Join(dir, "out")
	if err := cmdCollect([]string{in, out}); err != nil {
		t.Fatal(err)
	}
	if got := readTrim(filepath.Join(out, "a", "exit")); got != "15" {
		t.Fatalf("exit = %q", got)
	}
	if _, err := os.Stat(filepath.Join(out, ".done")); err == nil {
		t.Fatal(".done without the marker")
	}
	if got := readTrim(filepath.Join(out, "order")); got != "a" {
		t.Fatalf("order = %q", got)
	}
	os.WriteFile(in, []byte(console+"@@RDVM-DONE@@\r\n"), 0o644)
	if err := cmdCollect([]string{in, out}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, ".done")); err != nil {
		t.Fatal("no .done after the marker")
	}
}

// A scenario judged from a written record: the verdicts must follow the
// catalog (PENDING while the check is missing) and the observed values.
func TestScenarioVerdicts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, meta, exit, stdout string) {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "meta"), []byte(meta+"\nrepair_exit 0\n"), 0o644)
		os.WriteFile(filepath.Join(d, "exit"), []byte(exit+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "stdout"), []byte(stdout), 0o644)
	}
	rep := func(code int, root string) string {
		r := `null`
		if root != "" {
			r = `"` + root + `"`
		}
		return `{"level":1,"exit_code":` + strconv.Itoa(code) + `,"root_cause":` + r +
			`,"checks":[{"id":"pci.device","code":10,"status":"warn"},{"id":"uverbs.nodes","code":15,"status":"fail","summary":"no /dev/infiniband/uverbs0"}]}`
	}
	write("ok", "needs uverbs.nodes\nexit 15\nroot uverbs.nodes\nargs --level 1 --format json", "15", rep(15, "uverbs.nodes"))
	write("wrong", "needs uverbs.nodes\nexit 15\nroot uverbs.nodes\nargs --level 1 --format json", "0", rep(0, ""))
	write("pending", "needs port.state\nexit 19\nargs --level 1 --format json", "0", rep(0, ""))
	write("lying", "needs uverbs.nodes\nexit 15\nargs --level 1 --format json", "15", rep(0, ""))
	write("partly", "needs pci.device\nexit 15\nstatus uverbs.nodes=fail\nstatus port.state=pass\nargs --level 1 --format json", "15", rep(15, "uverbs.nodes"))
	v := &verifier{dir: dir, catalog: map[string]catalogEntry{"pci.device": {10, 1}, "uverbs.nodes": {15, 1}}}
	for name, want := range map[string]string{"ok": verdictPass, "wrong": verdictFail, "pending": verdictPending, "lying": verdictFail, "partly": verdictPending, "absent": verdictFail} {
		if got := v.scenario(name); got.Verdict != want {
			t.Errorf("%s: %s, want %s (%v)", name, got.Verdict, want, got.Failures)
		}
	}
	// A check of the catalog missing from a full report is a failure.
	v.catalog["port.state"] = catalogEntry{19, 1}
	if got := v.scenario("ok"); got.Verdict != verdictFail {
		t.Errorf("a report without port.state passed")
	}
}

func TestSummarize(t *testing.T) {
	s := summarize([]run{{3 * time.Millisecond, 0}, {1 * time.Millisecond, 0}, {2 * time.Millisecond, 1}, {10 * time.Millisecond, 0}})
	if s.Median != 2500*time.Microsecond || s.Min != time.Millisecond || s.Max != 10*time.Millisecond || s.NonZero != 1 {
		t.Fatalf("%+v", s)
	}
}

// snapshotArchive is a minimal snapshot: one top directory with a manifest.
func snapshotArchive(t *testing.T, manifest string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: "snap/", Mode: 0o755, Typeflag: tar.TypeDir})
	tw.WriteHeader(&tar.Header{Name: "snap/" + manifestName, Mode: 0o644, Size: int64(len(manifest)), Typeflag: tar.TypeReg})
	tw.Write([]byte(manifest))
	tw.Close()
	zw.Close()
	return buf.Bytes()
}

// A snapshot record passes only when the capture worked and the replay
// says what the live run said; each way of differing is caught.
func TestSnapshotRoundTripVerdicts(t *testing.T) {
	dir := t.TempDir()
	report := func(code int, root, status, summary, started string, dur float64, hostRoot string) string {
		r := `null`
		if root != "" {
			r = `"` + root + `"`
		}
		return `{"started":"` + started + `","duration_ms":` + strconv.FormatFloat(dur, 'f', 1, 64) +
			`,"host":{"hostname":"rdvm","root":"` + hostRoot + `"},"level":1,"exit_code":` + strconv.Itoa(code) + `,"root_cause":` + r +
			`,"checks":[{"id":"port.state","code":19,"status":"` + status + `","summary":"` + summary + `","duration_ms":` +
			strconv.FormatFloat(dur/2, 'f', 1, 64) + `}]}`
	}
	manifest := func(redacted bool, status string, complete bool) string {
		return `{"redacted":` + strconv.FormatBool(redacted) + `,"complete":` + strconv.FormatBool(complete) +
			`,"checks":[{"id":"port.state","status":"` + status + `"}],"exit_code":19,"counts":{"files":3}}`
	}
	type rec struct {
		meta, live, liveExit, replay, replayExit, snapExit, manifest string
	}
	write := func(name string, r rec) {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		files := map[string]string{"meta": r.meta + "\nkind snapshot\nexit 19\nroot port.state\nargs --level 1 --format json\nrepair_exit 0\n",
			"live.json": r.live, "live.exit": r.liveExit, "stdout": r.replay, "exit": r.replayExit, "snapshot.exit": r.snapExit}
		for f, body := range files {
			os.WriteFile(filepath.Join(d, f), []byte(body), 0o644)
		}
		if r.manifest != "" {
			os.WriteFile(filepath.Join(d, "snap.tar.gz"), snapshotArchive(t, r.manifest), 0o644)
		}
	}
	live := report(19, "port.state", "fail", "rxe0 port 1 DOWN", "2026-01-01T00:00:00Z", 12.5, "/")
	same := report(19, "port.state", "fail", "rxe0 port 1 DOWN", "2026-01-01T00:00:09Z", 3.25, "/tmp/x.tar.gz")
	good := rec{meta: "needs port.state", live: live, liveExit: "19", replay: same, replayExit: "19", snapExit: "0", manifest: manifest(false, "fail", true)}
	write("equal", good)
	r := good
	r.replay = report(19, "port.state", "fail", "rxe0 port 1 Down", "x", 1, "/tmp/x")
	write("summary-differs", r)
	r = good
	r.snapExit = "1"
	write("capture-failed", r)
	r = good
	r.replayExit = "0"
	r.replay = report(0, "", "pass", "ok", "x", 1, "/tmp/x")
	write("replay-healthy", r)
	r = good
	r.manifest = manifest(false, "pass", true)
	write("manifest-disagrees", r)
	r = good
	r.manifest = manifest(false, "fail", false)
	write("incomplete", r)
	r = good
	r.manifest = ""
	write("no-archive", r)
	r = good
	r.meta = "needs port.state\nredact 1"
	r.replay = report(19, "port.state", "fail", "redacted-host port 1 DOWN", "x", 1, "/tmp/x")
	r.manifest = manifest(true, "fail", true)
	write("redacted-values-differ", r)
	r.manifest = manifest(false, "fail", true)
	write("redacted-not-in-manifest", r)

	v := &verifier{dir: dir, catalog: map[string]catalogEntry{"port.state": {19, 1}}}
	for name, want := range map[string]string{
		"equal": verdictPass, "summary-differs": verdictFail, "capture-failed": verdictFail, "replay-healthy": verdictFail,
		"manifest-disagrees": verdictFail, "incomplete": verdictFail, "no-archive": verdictFail,
		"redacted-values-differ": verdictPass, "redacted-not-in-manifest": verdictFail,
	} {
		o := v.scenario(name)
		if o.Verdict != want {
			t.Errorf("%s: %s, want %s (%v)", name, o.Verdict, want, o.Failures)
		}
		if name == "summary-differs" && (len(o.Failures) != 1 || !strings.Contains(o.Failures[0], "checks[port.state].summary")) {
			t.Errorf("summary-differs: the difference is not named by its path: %v", o.Failures)
		}
	}
}

// kernelQuiet passes the allowed lines and fails on any other.
func TestKernelQuiet(t *testing.T) {
	dir := t.TempDir()
	allowed := "dummy0 speed is unknown, defaulting to 1000$"
	for _, tc := range []struct {
		log  string
		fail bool
	}{
		{"", false},
		{"[ 1.0] dummy0 speed is unknown, defaulting to 1000\n[ 1.1] dummy0 speed is unknown, defaulting to 1000\n", false},
		{"[ 1.0] dummy0 speed is unknown, defaulting to 1000\n[ 1.2] infiniband rxe0: cq#3 rxe_cq_post: queue full\n", true},
	} {
		os.WriteFile(filepath.Join(dir, "kmsg.during"), []byte(tc.log), 0o644)
		o := &outcome{}
		kernelQuiet(o, dir, allowed)
		if (len(o.Failures) > 0) != tc.fail {
			t.Errorf("log %q: failures %v, want failing %v", tc.log, o.Failures, tc.fail)
		}
	}
	o := &outcome{}
	kernelQuiet(o, t.TempDir(), allowed)
	if len(o.Failures) == 0 {
		t.Error("no kmsg.during recorded: want a failure")
	}
}

// A rerun record passes when the first run and the run after say what
// --prime-status, --after-status and --after-exit ask, beside the
// scenario's own run; each way of differing is caught.
func TestRerunVerdicts(t *testing.T) {
	dir := t.TempDir()
	report := func(code int, root, status string) string {
		r := `null`
		if root != "" {
			r = `"` + root + `"`
		}
		return `{"level":1,"exit_code":` + strconv.Itoa(code) + `,"root_cause":` + r +
			`,"checks":[{"id":"kernel.log","code":63,"status":"` + status + `","summary":"dummy0: NETDEV WATCHDOG"}]}`
	}
	type rec struct{ prime, run, runExit, after, afterExit, between string }
	write := func(name string, r rec) {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		meta := "needs kernel.log\nkind rerun\nexit 63\nroot kernel.log\nstatus kernel.log=fail\nprime-status kernel.log=pass\n" +
			"after-status kernel.log=pass\nafter-exit 0\nargs --level 1 --format json\nrepair_exit 0\n"
		if r.between != "" {
			meta += "between_exit " + r.between + "\n"
		}
		files := map[string]string{"meta": meta, "prime.json": r.prime, "prime.exit": "0", "stdout": r.run, "exit": r.runExit,
			"after.json": r.after, "after.exit": r.afterExit}
		for f, body := range files {
			os.WriteFile(filepath.Join(d, f), []byte(body), 0o644)
		}
	}
	healthy, found := report(0, "", "pass"), report(63, "kernel.log", "fail")
	good := rec{prime: healthy, run: found, runExit: "63", after: healthy, afterExit: "0", between: "0"}
	write("found-once", good)
	r := good
	r.after, r.afterExit = found, "63"
	write("found-again", r)
	r = good
	r.run, r.runExit = healthy, "0"
	write("not-found", r)
	r = good
	r.prime = found
	write("found-before-written", r)
	r = good
	r.between = "1"
	write("between-failed", r)
	r = good
	r.after = "not json"
	write("after-not-json", r)

	v := &verifier{dir: dir, catalog: map[string]catalogEntry{"kernel.log": {63, 1}}}
	for name, want := range map[string]string{
		"found-once": verdictPass, "found-again": verdictFail, "not-found": verdictFail, "found-before-written": verdictFail,
		"between-failed": verdictFail, "after-not-json": verdictFail,
	} {
		if o := v.scenario(name); o.Verdict != want {
			t.Errorf("%s: %s, want %s (%v)", name, o.Verdict, want, o.Failures)
		}
	}
}
