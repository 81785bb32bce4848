package report

import (
	"bytes"
	"strings"
	"testing"
)

func TestRoCEv2IndexPerAddress(t *testing.T) {
	p := Port{Netdev: "ens1f0np0", LinkLayer: "Ethernet", GIDs: []GID{
		{0, "fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4c", "IB/RoCE v1", "ens1f0np0"},
		{1, "fe80:0000:0000:0000:0e42:a1ff:fe2b:3c4c", "RoCE v2", "ens1f0np0"},
		{2, "0000:0000:0000:0000:0000:ffff:c000:020a", "IB/RoCE v1", "ens1f0np0"},
		{3, "0000:0000:0000:0000:0000:ffff:c000:020a", "RoCE v2", "ens1f0np0"},
		{4, "0000:0000:0000:0000:0000:ffff:cb00:710a", "IB/RoCE v1", "ens1f0np0.100"},
		{5, "0000:0000:0000:0000:0000:ffff:cb00:710a", "RoCE v2", "ens1f0np0.100"},
	}}
	cases := []struct {
		netdev, addr string
		want         int
	}{
		{"ens1f0np0", "192.0.2.10/24", 3},
		{"ens1f0np0", "fe80::e42:a1ff:fe2b:3c4c/64", 1},
		{"ens1f0np0.100", "203.0.113.10/24", 5},
		{"ens1f0np0", "203.0.113.10/24", -1}, // the GID is the VLAN's
		{"ens1f0np0", "198.51.100.7/24", -1},
		{"ens1f0np0", "not an address", -1},
	}
	for _, c := range cases {
		if got := roceV2Index(p, c.netdev, c.addr); got != c.want {
			t.Errorf("%s %s: GID index %d, want %d", c.netdev, c.addr, got, c.want)
		}
	}
	if got := strings.Join(portNetdevs(p), ","); got != "ens1f0np0,ens1f0np0.100" {
		t.Errorf("port netdevs %s", got)
	}
}

func TestPortGUIDIsGID0sInterfaceID(t *testing.T) {
	if got := portGUID("fe80:0000:0000:0000:b83f:d203:00a1:2c6e"); got != "0xb83fd20300a12c6e" {
		t.Errorf("port GUID %s", got)
	}
	if got := portGUID("garbage"); got != "garbage" {
		t.Errorf("unparsable GID shown as %q", got)
	}
}

// TestInventoryTextOfAnEmptyOrHostileHost: nothing found is said, and
// strings from another host cannot drive the terminal.
func TestInventoryTextOfAnEmptyOrHostileHost(t *testing.T) {
	var b bytes.Buffer
	WriteInventoryText(&b, &InventoryReport{Version: "t"}, 80)
	if !strings.Contains(b.String(), "no RDMA device in") {
		t.Errorf("empty inventory:\n%s", b.String())
	}
	b.Reset()
	r := &InventoryReport{Version: "t", Inventory: Inventory{RDMADevices: []RDMADevice{{Name: "x\x1b[2J", FWVer: "1\x07", Ports: []Port{{Port: 1, State: "\x1b]0;t\x07"}}}}}}
	WriteInventoryText(&b, r, 80)
	if strings.ContainsAny(b.String(), "\x1b\x07") {
		t.Errorf("control characters reached the text:\n%q", b.String())
	}
}

func TestInventoryTextGPUs(t *testing.T) {
	node := 0
	r := &InventoryReport{Version: "t", Host: HostInfo{Hostname: "h", Kernel: "k", Root: "/"}, Inventory: Inventory{
		GPUs: []GPU{{Name: "GPU0", Address: "0000:1b:00.0", Product: "H100 SXM5 80GB", Driver: "nvidia", NUMANode: &node, PairedNIC: "mlx5_0"}},
		GPUNICMatrix: []GPUNICPair{
			{GPU: "0000:1b:00.0", NIC: "0000:18:00.0", RDMADevice: "mlx5_0", Relation: "PIX", Paired: true},
			{GPU: "0000:1b:00.0", NIC: "0000:9a:00.0", RDMADevice: "mlx5_4", Relation: "SYS"},
		}}}
	var b strings.Builder
	if err := WriteInventoryText(&b, r, 100); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"GPU0 0000:1b:00.0 H100 SXM5 80GB, driver nvidia", "  nic             mlx5_0", "      mlx5_0 mlx5_4\nGPU0  PIX*   SYS\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
}
