package report

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestTextFooterVerdict: the last line says each verdict in its own words —
// a check that could not look is "could not judge", never a root cause of a
// fault; a fault that was seen outranks an earlier check in error.
func TestTextFooterVerdict(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []Status
		exit     int // -1: as Finish set it
		want     string
	}{
		{"healthy", []Status{Pass, Pass, Skip}, -1, "2 pass, 0 warn, 0 fail, 1 skip, 0 error — healthy — exit 0"},
		{"problem", []Status{Pass, Fail, Skip}, -1, "1 pass, 0 warn, 1 fail, 1 skip, 0 error — root cause: c1 — exit 11"},
		{"problem past an error", []Status{Error, Fail, Skip}, -1, "0 pass, 0 warn, 1 fail, 1 skip, 1 error — root cause: c1 — exit 11"},
		{"unknown", []Status{Pass, Error, Skip}, -1, "1 pass, 0 warn, 0 fail, 1 skip, 1 error — could not judge: c1 could not look — exit 4"},
		{"partial", []Status{Pass, Pass, Skip}, ExitInternal, "2 pass, 0 warn, 0 fail, 1 skip, 0 error — partial report: the run ended before every check finished — exit 1"},
	} {
		r := &Report{Started: time.Unix(1700000000, 0)}
		r.Host.Hostname = "n"
		for i, s := range tc.statuses {
			r.Checks = append(r.Checks, CheckResult{ID: "c" + string(rune('0'+i)), Code: 10 + i, Status: s, Summary: "s"})
		}
		r.Finish(false)
		if tc.exit >= 0 {
			r.ExitCode = tc.exit
		}
		var b bytes.Buffer
		if err := WriteText(&b, r, TextOptions{Width: 200}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
		if got := lines[len(lines)-1]; got != tc.want {
			t.Errorf("%s: last line\n%q\nwant\n%q", tc.name, got, tc.want)
		}
	}
}
