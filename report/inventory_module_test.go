package report

import (
	"strings"
	"testing"
)

// A netdev's module is one line under the netdev: vendor, part, revision,
// serial, form, media and (CMIS) firmware; hostile bytes are escaped.
func TestWriteNetdevModule(t *testing.T) {
	nds := map[string]Netdev{"ens1f0np0": {Name: "ens1f0np0", State: "up", MTU: 9000, Addresses: []string{},
		Module: &Module{Form: "OSFP", Spec: "CMIS 5.0", Media: "optical", Vendor: "NVIDIA", Part: "MMA4Z00-NS", Revision: "A5",
			Serial: "MT2410FT09876", Firmware: "46.120"}}}
	var b strings.Builder
	writeNetdev(&b, Port{Netdev: "ens1f0np0"}, "ens1f0np0", nds, 120)
	if !strings.Contains(b.String(), "      module") || !strings.Contains(b.String(), "NVIDIA MMA4Z00-NS A5, SN MT2410FT09876 (OSFP optical), firmware 46.120") {
		t.Errorf("inventory text:\n%s", b.String())
	}
	nds["ens1f0np0"].Module.Vendor = "EVIL\x1b[2J"
	b.Reset()
	writeNetdev(&b, Port{Netdev: "ens1f0np0"}, "ens1f0np0", nds, 120)
	if strings.Contains(b.String(), "\x1b") {
		t.Errorf("an escape sequence from a module's EEPROM reached the text: %q", b.String())
	}
}
