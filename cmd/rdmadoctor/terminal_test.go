package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// A host whose hostname and fw_ver were written by someone hostile (a
// snapshot sent in, a tampered sysfs view): each tries to forge a line of
// the report (a newline, then text shaped like a check's line), drive the
// terminal (CSI, OSC title and hyperlink, BEL) and reorder what follows
// (U+202E).
const (
	evilHostname = "cx5-evil\nok    10 pci.device  forged\u202eliaf"
	evilFW       = "16.35.2000\x1b]0;pwned\x07\x1b]8;;http://x/\x1b\\\nFAIL  19 port.state  forged\x1b[2J"
)

// hostileRoot writes that host, with an expectations file whose firmware
// the host does not have, so that fw_ver reaches a check's summary too.
func hostileRoot(t *testing.T) (root, expectFile string) {
	t.Helper()
	dir := t.TempDir()
	h := sysfstest.CX5RoCE()
	h.Hostname = evilHostname
	for i := range h.NICs {
		h.NICs[i].FW = evilFW
	}
	root = filepath.Join(dir, "host")
	if err := sysfstest.Build(h).Write(root); err != nil {
		t.Fatal(err)
	}
	expectFile = filepath.Join(dir, "expect.conf")
	if err := os.WriteFile(expectFile, []byte("[class a]\nhosts = cx5-*\nmlx5_*.fw = 16.99.*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root, expectFile
}

// assertInert fails when out holds a raw control, bidi or separator
// character, or a line that a host string forged.
func assertInert(t *testing.T, what, out string) {
	t.Helper()
	if i := strings.IndexAny(out, "\x1b\x07\r\u009b\u202e\u2028\u2029"); i >= 0 {
		t.Errorf("%s: a raw control or bidi character reached it at byte %d:\n%q", what, i, out)
	}
	for _, l := range strings.Split(out, "\n") {
		// The report re-spaces wrapped text: compare words.
		words := strings.Join(strings.Fields(l), " ")
		if strings.HasPrefix(words, "ok 10 pci.device forged") || strings.HasPrefix(words, "FAIL 19 port.state forged") {
			t.Errorf("%s: a host string forged the line %q:\n%s", what, l, out)
		}
	}
}

// TestHostStringsAreInertInTheTextReport: the text report, the inventory
// and summarize show the hostile hostname and fw_ver as visible escapes;
// the JSON report keeps them as read.
func TestHostStringsAreInertInTheTextReport(t *testing.T) {
	root, expectFile := hostileRoot(t)
	_, out, errOut := runCLI(t, "--root", root, "--level", "1", "--expect", expectFile, "--no-color")
	assertInert(t, "text report", out)
	for _, want := range []string{`host cx5-evil\nok    10 pci.device  forged\u202eliaf`, `16.35.2000\x1b]0;pwned\x07`} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks the escaped %q:\n%s\nstderr: %s", want, out, errOut)
		}
	}

	_, inv, _ := runCLI(t, "inventory", "--root", root)
	assertInert(t, "inventory", inv)
	if !strings.Contains(inv, `firmware        16.35.2000\x1b]0;pwned\x07\x1b]8;;http://x/\x1b\\nFAIL 19 port.state forged\x1b[2J`) {
		t.Errorf("inventory lacks the escaped firmware:\n%s", inv)
	}

	_, js, _ := runCLI(t, "--root", root, "--level", "1", "--expect", expectFile, "--format", "json")
	var r struct {
		Host      struct{ Hostname string }
		Inventory struct {
			RDMADevices []struct {
				FWVer string `json:"fw_ver"`
			} `json:"rdma_devices"`
		}
	}
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatal(err)
	}
	if r.Host.Hostname != evilHostname || len(r.Inventory.RDMADevices) == 0 || r.Inventory.RDMADevices[0].FWVer != evilFW {
		t.Errorf("JSON must keep the raw values: hostname %q, devices %+v", r.Host.Hostname, r.Inventory.RDMADevices)
	}

	reports := filepath.Join(t.TempDir(), "node.json")
	if err := os.WriteFile(reports, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	_, sum, _ := runCLI(t, "summarize", reports)
	assertInert(t, "summarize", sum)
	if !strings.Contains(sum, `cx5-evil\nok    10 pci.device  forged\u202eliaf`) {
		t.Errorf("summarize lacks the escaped host name:\n%s", sum)
	}
}
