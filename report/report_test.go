package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFinishExitCodeRule(t *testing.T) {
	mk := func(sts ...Status) *Report {
		r := &Report{}
		for i, s := range sts {
			r.Checks = append(r.Checks, CheckResult{ID: string(rune('a' + i)), Code: 10 + i, Status: s})
		}
		return r
	}
	cases := []struct {
		sts        []Status
		failOnWarn bool
		code       int
		root       string
		verdict    Verdict
	}{
		{[]Status{Pass, Pass}, false, 0, "", Healthy},
		{[]Status{Pass, Warn, Skip}, false, 0, "", Healthy},
		{[]Status{Pass, Warn, Fail}, true, 11, "b", Problem},
		{[]Status{Pass, Warn, Fail}, false, 12, "c", Problem},
		// A fault seen outranks an earlier check that could not look.
		{[]Status{Error, Fail}, false, 11, "b", Problem},
		{[]Status{Skip, Pass, Error}, false, ExitUnknown, "c", Unknown},
		{[]Status{Error, Warn}, true, 11, "b", Problem},
		{[]Status{Skip, Skip}, false, 0, "", Healthy},
	}
	for _, c := range cases {
		r := mk(c.sts...)
		r.Finish(c.failOnWarn)
		root := ""
		if r.RootCause != nil {
			root = *r.RootCause
		}
		if r.ExitCode != c.code || root != c.root || r.Verdict != c.verdict {
			t.Errorf("%v warn=%v: exit %d root %q %s, want %d %q %s", c.sts, c.failOnWarn, r.ExitCode, root, r.Verdict, c.code, c.root, c.verdict)
		}
	}
	// A deviation from the expectations ranks after a fault of the
	// hardware, however early it comes.
	dev := mk(Pass, Fail, Fail, Error)
	dev.Checks[1].Deviation = true
	dev.Finish(false)
	if dev.ExitCode != 12 || *dev.RootCause != "c" || dev.Verdict != Problem {
		t.Errorf("deviation first: exit %d root %s %s, want 12 c problem", dev.ExitCode, *dev.RootCause, dev.Verdict)
	}
	dev = mk(Pass, Fail, Error)
	dev.Checks[1].Deviation = true
	dev.Finish(false)
	if dev.ExitCode != 11 || *dev.RootCause != "b" || dev.Verdict != Problem {
		t.Errorf("only a deviation: exit %d root %s %s, want 11 b problem", dev.ExitCode, *dev.RootCause, dev.Verdict)
	}
	r := mk(Pass, Warn, Fail, Skip, Error, Error)
	r.Finish(false)
	if r.Summary != (Summary{Pass: 1, Warn: 1, Fail: 1, Skip: 1, Error: 2}) {
		t.Errorf("summary %+v", r.Summary)
	}
}

func TestTextColourIsDecidedByTheCaller(t *testing.T) {
	r := &Report{Version: "t", Level: 1, Checks: []CheckResult{{ID: "x.y", Code: 10, Status: Fail, Summary: "broken", Expected: "fixed", Remedy: "do it"}}}
	r.Finish(false)
	var plain, col bytes.Buffer
	WriteText(&plain, r, TextOptions{})
	WriteText(&col, r, TextOptions{Color: true})
	if strings.Contains(plain.String(), "\x1b[") {
		t.Error("escape codes without colour")
	}
	if !strings.Contains(col.String(), "\x1b[") {
		t.Error("no escape codes with colour")
	}
	for _, want := range []string{"FAIL", "x.y", "broken", "expected: fixed", "fix: do it", "root cause: x.y", "exit 10"} {
		if !strings.Contains(plain.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, plain.String())
		}
	}
}

func TestPrometheusHasOneSeriesPerCheckAndStatus(t *testing.T) {
	r := &Report{Host: HostInfo{Hostname: `n"1`}, Checks: []CheckResult{{ID: "a.b", Code: 10, Status: Fail}, {ID: "c.d", Code: 11, Status: Pass}}}
	r.Finish(false)
	var b bytes.Buffer
	if err := WritePrometheus(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`rdmadoctor_check_status{host="n\"1",check="a.b",code="10",status="fail"} 1`,
		`rdmadoctor_check_status{host="n\"1",check="a.b",code="10",status="pass"} 0`,
		`rdmadoctor_check_status{host="n\"1",check="c.d",code="11",status="pass"} 1`,
		`rdmadoctor_exit_code{host="n\"1"} 10`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "rdmadoctor_check_status{"); n != 10 {
		t.Errorf("%d status series, want 10", n)
	}
}

func TestFinishAskedIgnoresWarningsOfPrerequisites(t *testing.T) {
	r := &Report{Checks: []CheckResult{{ID: "pre.req", Code: 10, Status: Warn}, {ID: "asked.one", Code: 13, Status: Warn}}}
	r.FinishAsked(true, func(id string) bool { return id == "asked.one" })
	if r.ExitCode != 13 || *r.RootCause != "asked.one" {
		t.Errorf("exit %d root %v, want 13 asked.one", r.ExitCode, *r.RootCause)
	}
	r.Checks[0].Status = Fail
	r.FinishAsked(true, func(id string) bool { return id == "asked.one" })
	if r.ExitCode != 10 {
		t.Errorf("a failed prerequisite is still the root cause: exit %d", r.ExitCode)
	}
}

func TestHostileStringsCannotDriveTheTerminal(t *testing.T) {
	r := &Report{Host: HostInfo{Hostname: "evil\x1b[31mred\x1b]0;title\x07\xff"}, Checks: []CheckResult{
		{ID: "a.b", Code: 10, Status: Fail, Summary: "x\x1b[2J", Details: []string{"d\x9b1m"}, Remedy: "line1\nline2\r"}}}
	r.Finish(false)
	var b bytes.Buffer
	if err := WriteText(&b, r, TextOptions{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, bad := range []string{"\x1b", "\x07", "\r", "\u009b", "\xff"} {
		if strings.Contains(out, bad) {
			t.Errorf("raw %q reached the text report:\n%q", bad, out)
		}
	}
	if !strings.Contains(out, `evil\x1b[31mred`) || !strings.Contains(out, "line2") {
		t.Errorf("escaped text missing:\n%s", out)
	}
	var p bytes.Buffer
	WritePrometheus(&p, r)
	if !utf8.Valid(p.Bytes()) {
		t.Error("prometheus output is not valid UTF-8")
	}
}
