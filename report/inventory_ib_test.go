package report

import (
	"strings"
	"testing"
)

// TestInventoryTextFabric: ports libibumad lists that sysfs does not are
// written under one title per device, with each part or its error; on the
// live host with InfiniBand ports the reason there is no fabric is said, in
// a root's text it is not.
func TestInventoryTextFabric(t *testing.T) {
	r := &InventoryReport{Version: "t", Host: HostInfo{Root: "/"}, IBFabric: []IBFabricPort{
		{CA: "ibsim0", Port: 1, State: "Active", PhysState: "LinkUp", LID: 4, SMLID: 1, PortGUID: "0000:0000:0010:0004", SubnetPrefix: "fe80::/64",
			SM:        &IBSMAnswer{Error: "SMInfo from LID 1: no answer"},
			Neighbour: &IBNeighbour{NodeType: "switch", NodeDesc: "Switch2", NodeGUID: "0000:0000:0020:0001", Port: 1, Width: "4X", Speed: "SDR", State: "Active", PhysState: "LinkUp"},
			PKeys:     &IBPKeyTable{Keys: []IBPKey{{PKey: "0xffff", FullMember: true}, {PKey: "0x0002"}}}},
		{CA: "ibsim0", Port: 2, State: "Down", PhysState: "Polling", PKeys: &IBPKeyTable{Error: "P_KeyTable: timeout"}},
	}}
	var b strings.Builder
	if err := WriteInventoryText(&b, r, 120); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"port 1 Active (LinkUp) LID 4 (0x4), SM LID 1 (0x1) port GUID 0000:0000:0010:0004, subnet prefix fe80::/64 SM SMInfo from LID 1: no answer",
		`neighbour switch "Switch2", GUID 0000:0000:0020:0001, port 1, 4X SDR, Active (LinkUp) P_Keys 0xffff full, 0x0002 limited port 2`,
		"P_Keys P_KeyTable: timeout"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	if n := strings.Count(b.String(), "ibsim0  InfiniBand device"); n != 1 {
		t.Errorf("%d titles for one device:\n%s", n, b.String())
	}

	ib := Inventory{RDMADevices: []RDMADevice{{Name: "mlx5_0", Ports: []Port{{Port: 1, LinkLayer: "InfiniBand"}}}}}
	for root, want := range map[string]bool{"/": true, "/tmp/snap": false} {
		r := &InventoryReport{Version: "t", Host: HostInfo{Root: root}, Inventory: ib, IBFabricUnavailable: "open libibumad: dlopen failed"}
		b.Reset()
		WriteInventoryText(&b, r, 120)
		if got := strings.Contains(b.String(), "InfiniBand fabric not asked: open libibumad: dlopen failed"); got != want {
			t.Errorf("root %s: the reason is said: %v, want %v\n%s", root, got, want, b.String())
		}
	}
}
