package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// unwrap joins wrapped lines back into text: indentation dropped, and a
// shell continuation (" \" at a line's end) removed as a shell would.
func unwrap(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		l = strings.TrimLeft(l, " ")
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.TrimSuffix(l, " \\"))
	}
	return b.String()
}

func TestWrapFoldsAtWordsWithAHangingIndent(t *testing.T) {
	s := "mlx5_1 port 1 has no link (Polling): check the cable and transceiver are seated and the switch port is up"
	got := Wrap(s, 50, 14, 16)
	want := []string{
		"mlx5_1 port 1 has no link (Polling):",
		"                check the cable and transceiver",
		"                are seated and the switch port is",
		"                up",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWrapNeverBreaksInsideACommand: a command in backticks stays on one
// line with the punctuation glued to it; the next one moves to a new line.
func TestWrapNeverBreaksInsideACommand(t *testing.T) {
	s := "No subnet manager answered: install and start opensm on one host of the fabric (`apt install opensm` / `dnf install opensm`; `systemctl enable --now opensm`), or enable the switch's SM."
	// From 46 columns on, the longest command fits on a line at column 13.
	for width := 46; width <= 120; width++ {
		lines := Wrap(s, width, 13, 13)
		for _, cmd := range []string{"`apt install opensm`", "`dnf install opensm`;", "`systemctl enable --now opensm`),"} {
			found := false
			for _, l := range lines {
				found = found || strings.Contains(l, cmd)
			}
			if !found {
				t.Fatalf("width %d: %s broken across lines:\n%s", width, cmd, strings.Join(lines, "\n"))
			}
		}
		if unwrap(lines) != s {
			t.Fatalf("width %d: text changed:\n%s", width, strings.Join(lines, "\n"))
		}
		for i, l := range lines {
			if n := len(l) + map[bool]int{true: 13}[i == 0]; n > width {
				t.Fatalf("width %d: line %d is %d bytes: %q", width, i, n, l)
			}
		}
	}
}

// TestWrapContinuesALongCommand: a command longer than a line goes on lines
// of its own, broken after a shell operator when it can, with " \"
// continuations — what a shell reads back as the same command.
func TestWrapContinuesALongCommand(t *testing.T) {
	cmd := "mkdir -p /sys/kernel/config/rdma_cm/mlx5_0 && echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
	s := "rdma_cm users with `" + cmd + "`, NCCL with NCCL_IB_TC=106."
	lines := Wrap(s, 100, 14, 14)
	want := []string{
		"rdma_cm users with",
		"              `mkdir -p /sys/kernel/config/rdma_cm/mlx5_0 && \\",
		"                echo 106 > /sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos`,",
		"              NCCL with NCCL_IB_TC=106.",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if unwrap(lines) != s {
		t.Errorf("text changed: %q", unwrap(lines))
	}
}

// TestWrapKeepsQuotedWordsWhole: a continuation is never put inside quotes.
func TestWrapKeepsQuotedWordsWhole(t *testing.T) {
	s := "`dmesg | grep -i -e 'PCIe bandwidth is limited' -e 'AER: Corrected error received' -e mlx5_core`"
	for width := 40; width <= 100; width++ {
		lines := Wrap(s, width, 0, 0)
		for _, l := range lines {
			if strings.Count(l, "'")%2 != 0 {
				t.Fatalf("width %d: a line break inside quotes:\n%s", width, strings.Join(lines, "\n"))
			}
		}
		if unwrap(lines) != s {
			t.Fatalf("width %d: text changed: %q", width, unwrap(lines))
		}
	}
}

func TestFitLine(t *testing.T) {
	cases := []struct {
		s     string
		width int
		want  string
	}{
		{"all 2 ports ACTIVE and LinkUp", 40, "all 2 ports ACTIVE and LinkUp"},
		{"all 2 ports ACTIVE and LinkUp", 20, "all 2 ports …"},
		{"/usr/lib/x86_64-linux-gnu/libibverbs.so.1 → /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0", 30, "/usr/lib/x86_64-linux-gnu/ …"},
		{"→→→→→→→→→→", 9, "→ …"}, // never a cut inside a character
	}
	for _, c := range cases {
		got := fitLine(c.s, c.width)
		if got != c.want || len(got) > c.width || !utf8.ValidString(got) {
			t.Errorf("fitLine(%q, %d) = %q (%d bytes), want %q", c.s, c.width, got, len(got), c.want)
		}
	}
}

// TestTextReportFitsTheWidth renders a report with long summaries, details
// and a remedy with commands at several widths: no line is longer.
func TestTextReportFitsTheWidth(t *testing.T) {
	long := strings.Repeat("a finding with many words that goes on ", 6)
	r := &Report{Version: "t", Level: 1, Host: HostInfo{Hostname: "node17", Kernel: "6.1.0-18-amd64", Root: "testdata/hosts/x"},
		Checks: []CheckResult{
			{ID: "pci.device", Code: 10, Status: Pass, Summary: long, Expected: long},
			{ID: "roce.lossless", Code: 21, Status: Warn, Summary: long, Expected: long, Details: []string{long, long},
				Remedy: "turn PFC on: `mlnx_qos -i ens1f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0` (MLNX_OFED/DOCA), or `dcb pfc set dev ens1f0np0 prio-pfc 3:on`.\n- a list item " + long},
			{ID: "verbs.resources", Code: 30, Status: Skip, Summary: "level 2 check; run with --level 2"},
			{ID: "verbs.qp_state", Code: 31, Status: Skip, Summary: "level 2 check; run with --level 2"},
			{ID: "probe.send_poll", Code: 32, Status: Skip, Summary: "level 2 check; run with --level 2"},
		}}
	r.Finish(false)
	for _, width := range []int{40, 60, 80, 100, 120, 200} {
		for _, verbose := range []bool{false, true} {
			var b bytes.Buffer
			if err := WriteText(&b, r, TextOptions{Width: width, Verbose: verbose, NotRun: 3}); err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(b.String(), "\n") {
				if len(l) > width {
					t.Errorf("width %d verbose %v: %d bytes: %q", width, verbose, len(l), l)
				}
			}
			if !strings.Contains(b.String(), "3 of 8 checks not run") {
				t.Errorf("width %d: the checks not run are not named:\n%s", width, b.String())
			}
		}
	}
}

// TestOkLineIsOneLine: an ok line is one line, without the expected value;
// -v prints both whole.
func TestOkLineIsOneLine(t *testing.T) {
	r := &Report{Version: "t", Level: 1, Checks: []CheckResult{{ID: "pci.device", Code: 10, Status: Pass,
		Summary: strings.Repeat("word ", 40) + "END", Expected: "the expectation", Details: []string{"a detail"}}}}
	r.Finish(false)
	var short, long bytes.Buffer
	WriteText(&short, r, TextOptions{Width: 80})
	WriteText(&long, r, TextOptions{Width: 80, Verbose: true})
	if strings.Contains(short.String(), "expected") || strings.Contains(short.String(), "END") || strings.Contains(short.String(), "a detail") {
		t.Errorf("ok line not one shortened line:\n%s", short.String())
	}
	if !strings.Contains(short.String(), "-v prints them whole") {
		t.Errorf("a shortened line is not said to be shortened:\n%s", short.String())
	}
	for _, want := range []string{"expected: the expectation", "END", "a detail"} {
		if !strings.Contains(long.String(), want) {
			t.Errorf("-v lacks %q:\n%s", want, long.String())
		}
	}
}

// TestSelectedChecksVerdict: a run restricted with --check never says
// plainly "healthy".
func TestSelectedChecksVerdict(t *testing.T) {
	r := &Report{Version: "t", Level: 1, Checks: []CheckResult{{ID: "roce.lossless", Code: 21, Status: Pass, Summary: "ok"}}}
	r.Finish(false)
	for _, c := range []struct {
		notRun int
		want   string
	}{{0, "— healthy — exit 0"}, {17, "— selected checks healthy — exit 0\n17 of 18 checks not run (--check)"}} {
		var b bytes.Buffer
		WriteText(&b, r, TextOptions{NotRun: c.notRun})
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("notRun %d: want %q in\n%s", c.notRun, c.want, b.String())
		}
	}
}

// FuzzWrap: any text at any width wraps without panicking, loses no word,
// and a line is longer than the width only when it holds one word (or one
// word of a continued command) that cannot be broken.
func FuzzWrap(f *testing.F) {
	f.Add("fix: `ip link show eth0`, `ethtool eth0`.", 40, 5)
	f.Add("`mkdir -p /sys/kernel/config/rdma_cm/mlx5_0 && echo 106 > /sys/x`", 40, 13)
	f.Add("unclosed `backtick and 'quote", 41, 0)
	f.Add("→ wide … text — with ≥ symbols ×2\nsecond line", 45, 9)
	f.Fuzz(func(t *testing.T, s string, width, indent int) {
		if width < 0 || width > 400 || indent < 0 || indent > 30 || len(s) > 2000 || strings.Contains(s, "\\") {
			return
		}
		lines := Wrap(s, width, indent, indent)
		w := normWidth(width)
		for i, l := range lines {
			n := len(l)
			if i == 0 {
				n += indent
			}
			body := strings.TrimSuffix(strings.TrimLeft(l, " "), " \\")
			if n > w && len(units(body)) > 1 && len(shellWords(body)) > 1 {
				t.Fatalf("line %d of %d bytes at width %d breaks possible: %q", i, n, w, l)
			}
		}
		if got, want := strings.Fields(unwrap(lines)), strings.Fields(s); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("words changed:\n got %q\nwant %q", got, want)
		}
		if fl := fitLine(s, w); len(fl) > w || (utf8.ValidString(s) && !utf8.ValidString(fl)) {
			t.Fatalf("fitLine %q: %d bytes at width %d", fl, len(fl), w)
		}
	})
}

// TestWrapLeavesATooShortFirstLineEmpty: when the first word does not fit
// after a long prefix but fits at the hanging indent, the first line stays
// empty instead of passing the width.
func TestWrapLeavesATooShortFirstLineEmpty(t *testing.T) {
	got := Wrap("/sys/class/infiniband/mlx5_0/ports/1/state is unreadable", 56, 31, 9)
	want := []string{"", "         /sys/class/infiniband/mlx5_0/ports/1/state is", "         unreadable"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got %q, want %q", got, want)
	}
}
