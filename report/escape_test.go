package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"mlx5_0 16.35.2000", "mlx5_0 16.35.2000"},
		// Ordinary text that is not ASCII is kept.
		{"ConnectX-7 — 2×200G µs 网卡 ネットワーク", "ConnectX-7 — 2×200G µs 网卡 ネットワーク"},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"\x1b]8;;http://x/\x1b\\link", `\x1b]8;;http://x/\x1b\link`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		// C1 controls as characters: U+009B is a one-byte CSI.
		{"\u009b2J\u0085", `\u009b2J\u0085`},
		// Bytes that are not UTF-8 are shown as bytes, apart from a real
		// U+FFFD, which is text.
		{"\xff\x9b\xc3", `\xff\x9b\xc3`},
		{"\uFFFD", "\uFFFD"},
		{"pass\u202eliaf", `pass\u202eliaf`},
		{"\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"zero\u200bwidth\u200c\u200d\u2060\ufeff\u200e\u200f\u00ad", `zero\u200bwidth\u200c\u200d\u2060\ufeff\u200e\u200f\u00ad`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		// Tag characters hide ASCII text from the eye.
		{"ok\U000E0041", `ok\U000e0041`},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEscapeLeavesNothingActive: whatever the input, the output is valid
// UTF-8 with no control, format or separator character in it.
func TestEscapeLeavesNothingActive(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x3000; r++ {
		all.WriteRune(r)
	}
	all.WriteString("\xff\xfe\xed\xa0\x80") // invalid bytes, an encoded surrogate
	out := Escape(all.String())
	if !utf8.ValidString(out) {
		t.Fatal("output is not valid UTF-8")
	}
	for _, r := range out {
		if hostile(r) {
			t.Fatalf("%U survived escaping", r)
		}
	}
}

func TestEscapeParagraphsKeepsOnlyItsOwnBreaks(t *testing.T) {
	got := EscapeParagraphs("step 1\x1b[2J\nstep 2\r\u202e")
	if got != "step 1\\x1b[2J\nstep 2\\r\\u202e" {
		t.Errorf("got %q", got)
	}
}

// TestTextReportEscapesHostStrings: a newline or a bidi override in the
// hostname, a check's summary, expected value or details cannot start a
// line of the report of its own; a remedy keeps its steps.
func TestTextReportEscapesHostStrings(t *testing.T) {
	forged := "\nok     10 pci.device  forged"
	r := &Report{Host: HostInfo{Hostname: "h" + forged + "\u202e", Kernel: "6.1" + forged},
		Checks: []CheckResult{{ID: "rdma.devices", Code: 12, Status: Fail,
			Summary:  "mlx5_0 firmware 16.35.2000" + forged + "\u2028x",
			Expected: "16.99.*" + forged, Details: []string{"fw_ver 1" + forged},
			Remedy: "Update the firmware of 网卡 × 2.\nThen reboot" + forged[1:] + "\x1b[2J"}}}
	r.Finish(false)
	var b bytes.Buffer
	if err := WriteText(&b, r, TextOptions{Width: 200}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "ok     10 pci.device") {
			t.Errorf("forged line %q:\n%s", l, out)
		}
	}
	if strings.ContainsAny(out, "\u202e\u2028\x1b") {
		t.Errorf("raw bidi, separator or ESC in the report:\n%q", out)
	}
	for _, want := range []string{`host h\nok     10 pci.device  forged\u202e`, `kernel 6.1\nok`,
		`16.35.2000\nok 10 pci.device forged\u2028x`, `expected: 16.99.*\nok`, `fw_ver 1\nok`,
		"fix: Update the firmware of 网卡 × 2.\n", `Then rebootok 10 pci.device forged\x1b[2J`} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestInventoryTextEscapesHostStrings: a product name in CJK stays as it
// is; a fw_ver, a product name or a netdev name with a newline, ESC or a
// bidi override is shown escaped, on its own line of the inventory.
func TestInventoryTextEscapesHostStrings(t *testing.T) {
	r := &InventoryReport{Version: "t", Host: HostInfo{Hostname: "n\u2066x"}, Inventory: Inventory{
		PCIFunctions: []PCIFunction{{Address: "0000:01:00.0", Product: "网卡 CX7\u202e", Driver: "mlx5_core", RDMADevices: []string{"mlx5_0"}},
			{Address: "0000:02:00.0", Product: "spare\nFAIL forged", Driver: "vfio-pci"}},
		RDMADevices: []RDMADevice{{Name: "mlx5_0", PCI: "0000:01:00.0", Driver: "mlx5_ib", Kind: "RoCE",
			FWVer: "28.1\n  port 1           ACTIVE forged\x1b]0;t\x07", Ports: []Port{{Port: 1, State: "ACTIVE", LinkLayer: "Ethernet", Netdev: "e\u2028th0"}}}},
		Netdevs: []Netdev{{Name: "e\u2028th0", State: "up", MTU: 9000}},
	}}
	var b bytes.Buffer
	if err := WriteInventoryText(&b, r, 100); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\u202e\u2066\u2028") {
		t.Errorf("raw control or bidi character:\n%q", out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "forged") && !strings.Contains(l, `\n`) {
			t.Errorf("forged line %q:\n%s", l, out)
		}
	}
	for _, want := range []string{"host n\\u2066x", "mlx5_0  网卡 CX7\\u202e, mlx5_ib, RoCE", `firmware        28.1\n port 1 ACTIVE forged\x1b]0;t\x07`,
		`spare\nFAIL forged`, `netdev        e\u2028th0, up`} {
		if !strings.Contains(out, want) {
			t.Errorf("inventory lacks %q:\n%s", want, out)
		}
	}
}
