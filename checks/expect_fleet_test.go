package checks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// readmeExpectations is the expectations example of docs/expectations.md:
// the block that starts with the format's header, indented by four spaces.
func readmeExpectations(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../docs/expectations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "    "+expect.Header+"\n")
	if i < 0 {
		t.Fatal("docs/expectations.md has no expectations example")
	}
	var lines []string
	for _, l := range strings.Split(text[i:], "\n") {
		if !strings.HasPrefix(l, "    ") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "    "))
	}
	return strings.Join(lines, "\n") + "\n"
}

// The documented example judges README's own healthy host healthy: mlx5's
// fw_ver carries the PSID ("16.35.2000 (MT_0000000008)"), and the
// example's fw names the version.
func TestReadmeExampleOnHealthyHost(t *testing.T) {
	f, err := expect.Parse("expect.conf", strings.NewReader(readmeExpectations(t)))
	if err != nil {
		t.Fatalf("docs/expectations.md's example does not parse: %v", err)
	}
	c, err := checks.ExpectClassFor(f, "cx5-node01")
	if err != nil {
		t.Fatal(err)
	}
	r := hwRun(t, filepath.Join(hostsDir, "cx5-roce-healthy"), checks.Options{Expect: c})
	for _, res := range r.Checks {
		if res.Status == report.Fail || res.Status == report.Error || res.Status == report.Warn && strings.HasPrefix(res.ID, "rdma.") {
			t.Errorf("%s: %s: %s", res.ID, res.Status, res.Summary)
		}
	}
}

// A firmware deviation fails rdma.devices naming the key, and blocks
// nothing: the port, counter and probe checks still judge, and a fault they
// find is the root cause before it.
func TestFirmwareDeviationBlocksNothing(t *testing.T) {
	for _, tc := range []struct {
		name, fixture, class string
		devices, ports       report.Status
		exit                 int
	}{
		{"healthy host, other firmware", "cx5-roce-healthy", "mlx5_*.fw = 16.99.9999\n", report.Fail, report.Pass, 14},
		// The DOWN port is the root cause: a fault of the hardware ranks
		// before a deviation from the file.
		{"port down, other firmware", "port-down", "mlx5_*.fw = [\"16.99.*\", \"17.*\"]\n", report.Fail, report.Fail, 19},
		{"a rolling upgrade's list", "cx5-roce-healthy", "mlx5_*.fw = [\"16.34.*\", \"16.35.*\"]\n", report.Pass, report.Pass, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{Expect: expectClass(t, "[class c]\nhosts = *\n"+tc.class)})
			d, p := hwResult(t, r, "rdma.devices"), hwResult(t, r, "port.state")
			if d.Status != tc.devices || p.Status != tc.ports || r.ExitCode != tc.exit {
				t.Errorf("rdma.devices %s (%s), port.state %s (%s), exit %d; want %s %s %d", d.Status, d.Summary, p.Status, p.Summary, r.ExitCode, tc.devices, tc.ports, tc.exit)
			}
			if tc.devices == report.Fail && !strings.Contains(d.Summary, "firmware 16.35.2000 (MT_0000000008), expected ") {
				t.Errorf("summary does not name the firmware: %q", d.Summary)
			}
			for _, res := range r.Checks {
				if strings.HasPrefix(res.Summary, "blocked by rdma.devices") {
					t.Errorf("%s blocked by a firmware deviation", res.ID)
				}
			}
		})
	}
}

// A rule that matches nothing on the host is a warning naming its line,
// with the nearest device or port.
func TestUnmatchedRuleWarns(t *testing.T) {
	c := expectClass(t, "[class c]\nhosts = *\nmlx5-*.fw = 16.35.2000\nmlx5_0/2.rate = 100\n")
	r := hwRun(t, filepath.Join(hostsDir, "cx5-roce-healthy"), checks.Options{Expect: c}, "rdma.devices")
	d := hwResult(t, r, "rdma.devices")
	want := "2 expectations rule(s) match nothing on this host: e.conf:3 mlx5-*.fw: mlx5-* matches no RDMA device on this host (did you mean mlx5_0?); " +
		"e.conf:4 mlx5_0/2.rate: mlx5_0/2 matches no port: no device mlx5_0 matches has a port 2 (did you mean mlx5_0/1?)"
	if d.Status != report.Warn || d.Summary != want || r.ExitCode != 0 {
		t.Errorf("rdma.devices %s %q exit %d\nwant warn %q", d.Status, d.Summary, r.ExitCode, want)
	}
}

// The summary names the worst unit: a port that does not work before one
// that works slower than asked, both fail.
func TestHeadlineIsTheWorstPort(t *testing.T) {
	dir := filepath.Join(hostsDir, "multiport-one-down")
	res := hwResult(t, hwRun(t, dir, checks.Options{ExpectRate: 100}, "port.state"), "port.state")
	if res.Status != report.Fail || !strings.HasPrefix(res.Summary, "mlx4_0 port 2 DOWN (phys Polling): no link") {
		t.Errorf("port.state %s: %q; want the DOWN port 2 first", res.Status, res.Summary)
	}
	if !strings.Contains(res.Remedy, "`mlx4_0/2.unused = true`") || strings.Contains(res.Remedy, "`mlx4_0/1.unused = true`") {
		t.Errorf("remedy does not offer unused = true for the port without link (only):\n%s", res.Remedy)
	}
}

// Every port with no link partner is offered unused = true, not only a
// Disabled InfiniBand port; a port with its link up is not.
func TestUnusedOfferedWithoutLinkPartner(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		offer   bool
	}{
		{"port-down", true},                // RoCE, no carrier
		{"roce-disabled-no-carrier", true}, // RoCE, Disabled
		{"ib-port-disabled", true},         // InfiniBand, Disabled by management
		{"multiport-one-down", true},       // InfiniBand, Polling
		{"ib-no-sm", false},                // link up, no SM: the cable is there
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			res := hwResult(t, hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "port.state"), "port.state")
			if got := strings.Contains(res.Remedy, ".unused = true`"); got != tc.offer {
				t.Errorf("unused offered %v, want %v: %s %q\n%s", got, tc.offer, res.Status, res.Summary, res.Remedy)
			}
		})
	}
}
