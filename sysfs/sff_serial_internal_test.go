package sysfs

import "testing"

// The checksum that covers the serial holds after the serial is replaced
// where it held before; one the module wrote wrong stays wrong.
func TestReplaceSerialKeepsTheChecksum(t *testing.T) {
	lower := make([]byte, ModuleHalfPage)
	lower[0] = idQSFP28
	upper := make([]byte, ModuleHalfPage)
	copy(upper[sff8636VendorSN:], "MT1626VS04529   ")
	for _, right := range []bool{true, false} {
		up := append([]byte(nil), upper...)
		up[95] = checksum(up[64:95])
		if !right {
			up[95]++
		}
		m := ModuleEEPROM{Pages: []ModulePage{NewModulePage(ModuleI2CA0, 0, 0, 0, lower), NewModulePage(ModuleI2CA0, 0, 0, ModuleHalfPage, up)}}
		if !m.ReplaceSerial(func(string) string { return "SN0001" }) {
			t.Fatal("no serial replaced")
		}
		b, err := m.halfPage(ModuleI2CA0, 0, 0, ModuleHalfPage)
		if err != nil {
			t.Fatal(err)
		}
		if got := checksum(b[64:95]) == b[95]; got != right {
			t.Errorf("checksum right before: %v, after: %v", right, got)
		}
		if text(b, sff8636VendorSN, sff8636VendorSN+15) != "SN0001" {
			t.Errorf("serial %q", text(b, sff8636VendorSN, sff8636VendorSN+15))
		}
	}
}
