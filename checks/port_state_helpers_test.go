package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
)

// netCase is one expectation on one check of one host.
type netCase struct {
	name      string
	dir       string // a host directory
	opts      checks.Options
	status    report.Status
	exit      int          // exit code of the whole level-1 run (all checks)
	rootCause string       // "" = none
	findings  []findingRef // every finding of the check, in order; nil = not compared
	contains  []string     // words that are the point: a computed number, a command or path in a fix
	lacks     []string     // text the result must not hold
}

// netFixture is a bundled fixture's directory (made by sysfstest.Materialize).
func netFixture(name string) string { return filepath.Join(hostsDir, name) }

// runNetCases runs every case through the whole level-1 catalog and checks
// the named check's status and text, the run's exit code and root cause.
func runNetCases(t *testing.T, id string, cases []netCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRun(t, tc.dir, tc.opts)
			c := hwResult(t, r, id)
			text := c.Summary + "\n" + c.Observed + "\n" + c.Expected + "\n" + strings.Join(c.Details, "\n") + "\n" + c.Remedy
			if c.Status != tc.status {
				t.Fatalf("%s status %s, want %s\n%s", id, c.Status, tc.status, text)
			}
			if tc.findings != nil {
				if diff := cmp.Diff(tc.findings, refs(c.Findings)); diff != "" {
					t.Errorf("%s findings (-want +got):\n%s", id, diff)
				}
			}
			if r.ExitCode != tc.exit {
				t.Errorf("exit %d, want %d (root cause %v)", r.ExitCode, tc.exit, deref(r.RootCause))
			}
			if deref(r.RootCause) != tc.rootCause {
				t.Errorf("root cause %q, want %q", deref(r.RootCause), tc.rootCause)
			}
			for _, s := range tc.contains {
				if !strings.Contains(text, s) {
					t.Errorf("%s result lacks %q:\n%s", id, s, text)
				}
			}
			for _, s := range tc.lacks {
				if strings.Contains(text, s) {
					t.Errorf("%s result holds %q:\n%s", id, s, text)
				}
			}
			if c.Status != report.Skip && c.Expected == "" {
				t.Errorf("%s %s: no expected value", id, c.Status)
			}
			if c.Status != report.Skip && c.Status != report.Pass && c.Observed == "" {
				t.Errorf("%s %s: no observed value", id, c.Status)
			}
			if c.Status == report.Error && c.Remedy == "" {
				t.Errorf("%s error without a remedy: an error says how to look by hand", id)
			}
			if c.Status != report.Skip && c.Status != report.Error && c.Evidence == nil {
				t.Errorf("%s %s: no evidence", id, c.Status)
			}
			if (c.Status == report.Fail || c.Status == report.Warn) && c.Remedy == "" {
				t.Errorf("%s %s without a remedy", id, c.Status)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
