package checks_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// Helpers every check's tests share: run checks on a host directory as the
// command does, find one result, write a generated tree.

// hwRun runs the named checks (all of level 1 when none) with their
// prerequisites on a host directory and finishes the report, as the command
// does.
func hwRun(tb testing.TB, dir string, opts checks.Options, ids ...string) *report.Report {
	tb.Helper()
	h, err := sysfs.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer h.Close()
	if opts.Level == 0 {
		opts.Level = 1
	}
	sel, err := checks.Select(ids)
	if err != nil {
		tb.Fatal(err)
	}
	env := checks.NewEnv(h, opts)
	r := &report.Report{Checks: checks.Run(context.Background(), env, sel)}
	r.Inventory = checks.Inventory(env)
	r.Finish(false)
	return r
}

// hwResult finds one check's result in a report.
func hwResult(tb testing.TB, r *report.Report, id string) report.CheckResult {
	tb.Helper()
	for _, c := range r.Checks {
		if c.ID == id {
			return c
		}
	}
	tb.Fatalf("no result for %s", id)
	return report.CheckResult{}
}

// hwRunOne runs one check's own judgement on a host directory, without its
// prerequisites: to test a finding that an earlier check would otherwise
// block (a module missing, say).
func hwRunOne(tb testing.TB, dir, id string, opts checks.Options) checks.Result {
	tb.Helper()
	h, err := sysfs.Open(dir)
	if err != nil {
		tb.Fatal(err)
	}
	defer h.Close()
	c, ok := checks.Lookup(id)
	if !ok {
		tb.Fatalf("no check %s", id)
	}
	if opts.Level == 0 {
		opts.Level = 1
	}
	r := c.Run(context.Background(), checks.NewEnv(h, opts))
	checks.RecordResult(id, r) // judged like a result the runner gets
	return r
}

// hwWrite writes a generated tree to a temporary directory.
func hwWrite(tb testing.TB, t *sysfstest.Tree) string {
	tb.Helper()
	dir := filepath.Join(tb.TempDir(), "host")
	if err := t.Write(dir); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// cx5Edited writes the CX-5 RoCE host with edit applied to its model and
// tree to its files (either may be nil): a fixture varied in one test.
func cx5Edited(tb testing.TB, edit func(h *sysfstest.Host), tree func(tr *sysfstest.Tree)) string {
	h := sysfstest.CX5RoCE()
	if edit != nil {
		edit(&h)
	}
	tr := sysfstest.Build(h)
	if tree != nil {
		tree(tr)
	}
	return hwWrite(tb, tr)
}

// cx5FileForDir writes the CX-5 RoCE host with a plain file where the
// directory dir belongs, so that listing it fails (ENOTDIR).
func cx5FileForDir(tb testing.TB, dir string) string {
	return cx5Edited(tb, nil, func(tr *sysfstest.Tree) {
		tr.Remove(dir)
		tr.File(dir, "not a directory\n")
	})
}

// fixtureEdited writes the bundled fixture name with edit applied to its
// files: a fixture varied in one test.
func fixtureEdited(tb testing.TB, name string, edit func(tr *sysfstest.Tree)) string {
	tr, err := sysfstest.Fixture(name)
	if err != nil {
		tb.Fatal(err)
	}
	edit(tr)
	return hwWrite(tb, tr)
}

// statedVerdict asserts what a fixture's comment states of a run: the
// check's status, a finding it carries ("" when none is named) and the
// run's exit code; on a wrong exit code it logs the checks that caused it.
func statedVerdict(t *testing.T, r *report.Report, check, status, finding string, exit int) report.CheckResult {
	t.Helper()
	c := hwResult(t, r, check)
	if string(c.Status) != status {
		t.Errorf("%s is %s, want %s: %s\n%s", check, c.Status, status, c.Summary, c.Remedy)
	}
	if finding != "" && !c.HasFinding(finding) {
		t.Errorf("%s findings %v lack %s", check, refs(c.Findings), finding)
	}
	if r.ExitCode != exit {
		for _, o := range r.Checks {
			if o.Status == report.Fail || o.Status == report.Error || o.Status == report.Warn {
				t.Logf("%s %s: %s", o.ID, o.Status, o.Summary)
			}
		}
		t.Errorf("exit %d, want %d (root cause %s)", r.ExitCode, exit, deref(r.RootCause))
	}
	return c
}
