package sysfs_test

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func TestParsePCIConfigSwitchPort(t *testing.T) {
	b := sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 0x1000, Device: 0xc030, Class: 0x060400, Bridge: true, PortType: 6,
		MaxReadReq: 512, MaxPayload: 256, HasACS: true, ACSCap: 0x005f, ACSCtl: 0x001d})
	c, err := sysfs.ParsePCIConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Extended() || c.Header != 1 || c.Vendor != 0x1000 || c.Device != 0xc030 {
		t.Fatalf("header: %+v", c)
	}
	if c.PCIe == nil || c.PCIe.PortType != 6 || c.PCIe.MaxReadRequest() != 512 || c.PCIe.MaxPayload() != 256 || c.PCIe.RelaxedOrdering() {
		t.Fatalf("PCIe cap: %+v", c.PCIe)
	}
	if c.ACS == nil || c.ACS.Cap != 0x005f || c.ACS.Ctl != 0x001d {
		t.Fatalf("ACS: %+v", c.ACS)
	}
	if got := strings.Join(sysfs.ACSNames(c.ACS.Ctl), " "); got != "SrcValid ReqRedir CmpltRedir UpstreamFwd" {
		t.Fatalf("ACS names %q", got)
	}
	if c.ATS != nil || len(c.Problems) > 0 {
		t.Fatalf("ATS %+v problems %v", c.ATS, c.Problems)
	}
}

func TestParsePCIConfigNICWithATS(t *testing.T) {
	b := sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 0x15b3, Device: 0x1021, Class: 0x020700, MaxReadReq: 4096, RelaxedOrder: true,
		HasATS: true, ATSEnabled: true})
	c, err := sysfs.ParsePCIConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.PCIe.MaxReadRequest() != 4096 || !c.PCIe.RelaxedOrdering() || c.ATS == nil || !c.ATS.Enabled() || c.ACS != nil {
		t.Fatalf("%+v %+v %+v", c.PCIe, c.ATS, c.ACS)
	}
}

// An unprivileged read returns the 64-byte header only: the capabilities
// are unknown (nil with Standard false), never guessed absent.
func TestParsePCIConfigUnprivileged(t *testing.T) {
	b := sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 0x10de, Device: 0x2330, Class: 0x030200, Unprivileged: true})
	c, err := sysfs.ParsePCIConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	if c.Standard() || c.Extended() || c.PCIe != nil || c.Size != 64 {
		t.Fatalf("%+v", c)
	}
	if _, err := sysfs.ParsePCIConfig(b[:63]); err == nil {
		t.Fatal("63 bytes parsed without error")
	}
}

func TestParsePCIConfigHostileLists(t *testing.T) {
	le := binary.LittleEndian
	loopStd := sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 1, Device: 2})
	loopStd[0x61] = 0x40 // the PCIe cap points back to the first
	loopExt := sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 1, Device: 2, HasACS: true})
	le.PutUint32(loopExt[0x148:], 0x100<<20|1<<16|0x000d) // ACS → AER → ACS …
	header := sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 1, Device: 2})
	header[0x34] = 0x10 // into the header
	for name, tc := range map[string]struct {
		b    []byte
		want string
	}{
		"standard loop": {loopStd, "loops at 0x40"},
		"extended loop": {loopExt, "extended capability list loops at 0x100"},
		"into header":   {header, "outside 0x40"},
	} {
		c, err := sysfs.ParsePCIConfig(tc.b)
		if err != nil || len(c.Problems) == 0 || !strings.Contains(c.Problems[0], tc.want) {
			t.Errorf("%s: err %v problems %v", name, err, c.Problems)
		}
	}
}

func TestRelation(t *testing.T) {
	fn := func(p string, numa int) sysfs.PCIFunction {
		return sysfs.PCIFunction{SysPath: p, NUMANode: numa, HasNUMA: numa >= 0}
	}
	gpu := fn("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0", 0)
	for _, tc := range []struct {
		name string
		nic  sysfs.PCIFunction
		want sysfs.PCIRelation
	}{
		{"same switch", fn("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", 0), sysfs.RelPIX},
		{"nested switch", fn("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0/0000:19:00.0/0000:1a:00.0", 0), sysfs.RelPXB},
		{"other root port", fn("/sys/devices/pci0000:15/0000:15:02.0/0000:30:00.0", 0), sysfs.RelPHB},
		{"other host bridge, same node", fn("/sys/devices/pci0000:3d/0000:3d:01.0/0000:40:00.0", 0), sysfs.RelNODE},
		{"other socket", fn("/sys/devices/pci0000:97/0000:97:01.0/0000:9a:00.0", 1), sysfs.RelSYS},
		{"no NUMA", fn("/sys/devices/pci0000:97/0000:97:01.0/0000:9a:00.0", -1), sysfs.RelNODE},
		{"not PCI", fn("/sys/devices/virtual/net/lo", 0), sysfs.RelUnknown},
	} {
		if got, why := sysfs.Relation(gpu, tc.nic); got != tc.want {
			t.Errorf("%s: %s (%s), want %s", tc.name, got, why, tc.want)
		}
	}
	br, err := sysfs.BridgesBetween(gpu, fn("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0", 0))
	if err != nil || strings.Join(br, " ") != "0000:17:01.0 0000:16:00.0 0000:17:00.0" {
		t.Fatalf("bridges %v %v", br, err)
	}
}

func TestParseNVIDIAVersion(t *testing.T) {
	open := sysfs.ParseNVIDIAVersion([]byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build  (dvs-builder@U16-I3-B03-4-3)  Fri May 31 09:30:47 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n"))
	if !open.Open || open.Major != 550 || open.Version != "550.90.07" {
		t.Fatalf("%+v", open)
	}
	prop := sysfs.ParseNVIDIAVersion([]byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 15:37:48 UTC 2023\n"))
	if prop.Open || prop.Major != 535 {
		t.Fatalf("%+v", prop)
	}
	if d := sysfs.ParseNVIDIAVersion([]byte("garbage\x00")); d.Major != 0 {
		t.Fatalf("%+v", d)
	}
}

// FuzzParsePCIConfig: any bytes parse without panicking and without
// walking forever; what is found lies inside what was read.
func FuzzParsePCIConfig(f *testing.F) {
	f.Add(sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 0x1000, Device: 0xc030, Bridge: true, PortType: 6, HasACS: true, ACSCtl: 0x1d}))
	f.Add(sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 0x15b3, Device: 0x1021, HasATS: true, ATSEnabled: true}))
	f.Add(sysfstest.EncodeConfig(sysfstest.ConfigSpace{Vendor: 0x10de, Device: 0x2330, Unprivileged: true}))
	f.Add(make([]byte, 256))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := sysfs.ParsePCIConfig(b)
		if err != nil {
			return
		}
		if c.PCIe != nil && (c.PCIe.Offset < 0x40 || c.PCIe.Offset >= 0x100) {
			t.Fatalf("PCIe cap at 0x%x", c.PCIe.Offset)
		}
		for _, off := range []int{offsetOf(c.ACS), offsetOfATS(c.ATS)} {
			if off != 0 && (off < 0x100 || off+8 > 4096 || off+8 > len(b)) {
				t.Fatalf("extended cap at 0x%x of %d bytes", off, len(b))
			}
		}
	})
}

func offsetOf(a *sysfs.ACSCap) int {
	if a == nil {
		return 0
	}
	return a.Offset
}

func offsetOfATS(a *sysfs.ATSCap) int {
	if a == nil {
		return 0
	}
	return a.Offset
}

// FuzzParseNVIDIAVersion: any version file parses without panicking; a
// version found is the digits-and-dots field it came from.
func FuzzParseNVIDIAVersion(f *testing.F) {
	f.Add([]byte("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.90.07  Release Build\n"))
	f.Add([]byte("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.154.05  Thu Dec 28 15:37:48 UTC 2023\n"))
	f.Add([]byte("NVRM version: 99999.1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := sysfs.ParseNVIDIAVersion(b)
		if d.Major != 0 && !strings.HasPrefix(d.Version, fmt.Sprint(d.Major)+".") {
			t.Fatalf("major %d from version %q", d.Major, d.Version)
		}
	})
}

// FuzzRelation: any two sysfs paths give a relation and a reason, never a
// panic; a function is PIX to itself when it has a PCI path.
func FuzzRelation(f *testing.F) {
	f.Add("/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:01.0/0000:1b:00.0", "/sys/devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0")
	f.Add("/sys/devices/pci0000:97/0000:97:01.0/0000:9a:00.0", "/sys/devices/virtual/net/lo")
	f.Fuzz(func(t *testing.T, a, b string) {
		fa, fb := sysfs.PCIFunction{SysPath: a, NUMANode: 0, HasNUMA: true}, sysfs.PCIFunction{SysPath: b, NUMANode: 1, HasNUMA: true}
		rel, why := sysfs.Relation(fa, fb)
		if why == "" || rel < sysfs.RelPIX || rel > sysfs.RelUnknown {
			t.Fatalf("%v %q", rel, why)
		}
		if _, err := sysfs.BridgesBetween(fa, fb); (err != nil) != (rel == sysfs.RelUnknown) {
			t.Fatalf("BridgesBetween error %v for relation %s", err, rel)
		}
	})
}
