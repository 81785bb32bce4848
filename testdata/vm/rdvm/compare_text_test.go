package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/two-rxe-inventory holds one real guest's `rdmadoctor inventory`
// (two SoftRoCE devices, the two-rxe-devices scenario) and the ibv_devinfo -v
// of the same moment.
const twoRxe = "testdata/two-rxe-inventory"

func healthyInventoryText(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(twoRxe, "inventory.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCompareInventoryTextHealthyAgrees(t *testing.T) {
	c := compareInventoryText(healthyInventoryText(t), twoRxe)
	if len(c.failures) != 0 {
		t.Fatalf("healthy inventory text differs: %v", c.failures)
	}
	// names; per device: node GUID, port count, state, phys state, rate,
	// link layer, active MTU, 2 addresses × (GID, type).
	if c.agree < 23 {
		t.Fatalf("only %d fields compared", c.agree)
	}
}

// TestCompareInventoryTextCatchesEachLie: every value the text shows that
// ibv_devinfo also shows is compared — a wrong one is caught.
func TestCompareInventoryTextCatchesEachLie(t *testing.T) {
	good := healthyInventoryText(t)
	cases := map[string][2]string{
		"node GUID":   {"7478:cdff:fe5e:d230", "7478:cdff:fe5e:d231"},
		"state":       {"ACTIVE (LinkUp)", "DOWN (LinkUp)"},
		"phys_state":  {"ACTIVE (LinkUp)", "ACTIVE (Polling)"},
		"rate":        {"2.5 Gb/sec (1X SDR)", "10 Gb/sec (4X SDR)"},
		"link_layer":  {", Ethernet,", ", InfiniBand,"},
		"active_mtu":  {"active MTU 1024", "active MTU 4096"},
		"GID index":   {"192.0.2.1/24, RoCE v2 GID index 1", "192.0.2.1/24, RoCE v2 GID index 0"},
		"address":     {"198.51.100.1/24,", "198.51.100.9/24,"},
		"device name": {"rxe0  rdma_rxe", "rxe2  rdma_rxe"},
		"no GID":      {"GID index 0", "GID index 7"},
	}
	for name, edit := range cases {
		bad := strings.Replace(good, edit[0], edit[1], 1)
		if bad == good {
			t.Fatalf("%s: the edit %q is not in the text", name, edit[0])
		}
		if c := compareInventoryText(bad, twoRxe); len(c.failures) == 0 {
			t.Errorf("%s: a wrong value was not caught", name)
		}
	}
}

func TestParseInventoryTextLIDs(t *testing.T) {
	text := "rdmadoctor x  host h  kernel k\n\nmlx5_0  ConnectX-6, mlx5_core, hardware\n" +
		"  node GUID       b83f:d203:00a1:2c6e\n  port 1          ACTIVE (LinkUp), 200 Gb/sec (4X HDR), InfiniBand\n" +
		"    LID           26 (0x1a), SM LID 1 (0x1)\n    port GUID     0xb83fd20300a12c6e\n"
	devs := parseInventoryText(text)
	if len(devs) != 1 || len(devs[0].Ports) != 1 || devs[0].Ports[0].LID != "26 (0x1a), SM LID 1 (0x1)" {
		t.Fatalf("parsed %+v", devs)
	}
	ref := devinfoPort{Num: 1, Attrs: map[string]string{"state": "PORT_ACTIVE (4)", "phys_state": "LINK_UP (5)", "link_layer": "InfiniBand",
		"port_lid": "26", "sm_lid": "2", "active_width": "4X (2)", "active_speed": "50.0 Gbps (64)"}}
	var c comparison
	compareTextPort(&c, "mlx5_0 port 1", devs[0].Ports[0], ref)
	if len(c.failures) != 1 || !strings.Contains(c.failures[0], "sm_lid") {
		t.Errorf("want exactly the SM LID caught, got %v", c.failures)
	}
}

// FuzzCompareInventoryText: any text, read back and held against a real
// ibv_devinfo, never panics.
func FuzzCompareInventoryText(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(twoRxe, "inventory.txt"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("h\n\nd\n  port 1          , , ,\n    LID           , SM LID \n      address     x, RoCE v2 GID index 99999999999999999999\n")
	f.Fuzz(func(t *testing.T, text string) {
		compareInventoryText(text, twoRxe)
	})
}
