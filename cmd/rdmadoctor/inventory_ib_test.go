package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// inventoryOf is `rdmadoctor inventory --root ROOT --format json`, decoded.
func inventoryOf(t *testing.T, root string) *report.InventoryReport {
	t.Helper()
	code, out, errOut := runCLI(t, "inventory", "--root", root, "--format", "json")
	if code != 0 {
		t.Fatalf("inventory --root %s: exit %d: %s", root, code, errOut)
	}
	var r report.InventoryReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// fabricOf is what a live capture records for one InfiniBand port.
func fabricOf(ca string, port int) *sysfs.IBFabricFacts {
	return &sysfs.IBFabricFacts{Ports: []sysfs.IBFabricPort{{
		CA: ca, Port: port, State: "Active", PhysState: "LinkUp", LID: 7, SMLID: 1,
		PortGUID: "b83f:d203:00a1:2c6e", SubnetPrefix: "fe80::/64",
		SM:  &sysfs.IBSMAnswer{LID: 1, GUID: "0002:c903:00a1:b2c3", Priority: 14, State: "MASTER", NodeDesc: "ufm-sm-01 HCA-1"},
		SMs: &sysfs.IBSMList{SMs: []sysfs.IBSM{{LID: 1, GUID: "0002:c903:00a1:b2c3", Priority: 14, State: "MASTER"}}},
		Neighbour: &sysfs.IBNeighbour{NodeType: "switch", NodeGUID: "0002:c903:00be:ef00", NodeDesc: "leaf-03 SX6036", Port: 17,
			State: "Active", PhysState: "LinkUp", Width: "4X", Speed: "HDR"},
		PKeys: &sysfs.IBPKeyTable{Keys: []sysfs.IBPKey{{PKey: "0xffff", FullMember: true}, {PKey: "0x0001"}}},
	}}}
}

// TestInventoryIBFabricSnapshotRoundTrip: a snapshot's ib_fabric is what
// inventory shows, in JSON and under the port in text; --redact replaces its
// node descriptions and GUIDs consistently.
func TestInventoryIBFabricSnapshotRoundTrip(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "snap")
	if code, out, errOut := runSnapshot(t, "--root", filepath.Join(hostsDir, "cx6-ib-healthy"), "-o", snap); code != 0 {
		t.Fatalf("snapshot: exit %d: %s%s", code, out, errOut)
	}
	before := inventoryOf(t, snap)
	if len(before.IBFabric) != 0 || before.IBFabricUnavailable == "" {
		t.Errorf("a capture of a root records no fabric: want none and the reason, got %+v %q", before.IBFabric, before.IBFabricUnavailable)
	}
	ca := before.Inventory.RDMADevices[0].Name
	factsPath := filepath.Join(snap, sysfs.FactsFile)
	data, err := os.ReadFile(factsPath)
	if err != nil {
		t.Fatal(err)
	}
	var facts sysfs.Facts
	if err := json.Unmarshal(data, &facts); err != nil {
		t.Fatal(err)
	}
	facts.IBFabric = fabricOf(ca, 1)
	data, _ = json.Marshal(facts)
	if err := os.WriteFile(factsPath, data, 0o644); err != nil {
		t.Fatal(err)
	}

	r := inventoryOf(t, snap)
	if len(r.IBFabric) != 1 || r.IBFabricUnavailable != "" {
		t.Fatalf("inventory of the snapshot: fabric %+v, unavailable %q", r.IBFabric, r.IBFabricUnavailable)
	}
	f := r.IBFabric[0]
	if f.CA != ca || f.SM.NodeDesc != "ufm-sm-01 HCA-1" || f.Neighbour.NodeDesc != "leaf-03 SX6036" || f.Neighbour.Port != 17 ||
		len(f.PKeys.Keys) != 2 || f.PKeys.Keys[1].FullMember || f.PortGUID != "b83f:d203:00a1:2c6e" {
		t.Errorf("inventory's fabric differs from the facts: %+v", f)
	}
	t.Setenv("COLUMNS", "200")
	_, text, _ := runCLI(t, "inventory", "--root", snap)
	text = strings.Join(strings.Fields(text), " ")
	port := strings.Index(text, "port 1")
	for _, want := range []string{`SM LID 1, GUID 0002:c903:00a1:b2c3, MASTER, priority 14, "ufm-sm-01 HCA-1"`,
		`neighbour switch "leaf-03 SX6036", GUID 0002:c903:00be:ef00, port 17, 4X HDR, Active (LinkUp)`,
		"P_Keys 0xffff full, 0x0001 limited"} {
		if i := strings.Index(text, want); i < 0 || i < port {
			t.Errorf("text inventory lacks %q under port 1:\n%s", want, text)
		}
	}

	red := filepath.Join(t.TempDir(), "red")
	if code, out, errOut := runSnapshot(t, "--root", snap, "--redact", "-o", red); code != 0 {
		t.Fatalf("snapshot --redact: exit %d: %s%s", code, out, errOut)
	}
	rf := inventoryOf(t, red).IBFabric
	if len(rf) != 1 {
		t.Fatalf("redacted snapshot lost the fabric: %+v", rf)
	}
	g := rf[0]
	if g.SM.NodeDesc != "redacted-node-1" || g.Neighbour.NodeDesc != "redacted-node-2" || g.SM.GUID == f.SM.GUID ||
		g.SM.GUID != g.SMs.SMs[0].GUID || g.PortGUID == f.PortGUID || g.Neighbour.NodeGUID == f.Neighbour.NodeGUID {
		t.Errorf("redacted fabric: %+v %+v %+v", g.SM, g.Neighbour, g.PortGUID)
	}
}

// TestInventoryNoFabricQuiet: a root with no InfiniBand fabric recorded
// says why in JSON and adds nothing to the text.
func TestInventoryNoFabricQuiet(t *testing.T) {
	for _, name := range []string{"cx5-roce-healthy", "cx6-ib-healthy"} {
		root := filepath.Join(hostsDir, name)
		if r := inventoryOf(t, root); r.IBFabric != nil || !strings.Contains(r.IBFabricUnavailable, "ib_fabric") {
			t.Errorf("%s: fabric %+v, unavailable %q", name, r.IBFabric, r.IBFabricUnavailable)
		}
		if _, text, _ := runCLI(t, "inventory", "--root", root); strings.Contains(text, "fabric") || strings.Contains(text, "neighbour") {
			t.Errorf("%s: the text speaks of a fabric it does not have:\n%s", name, text)
		}
	}
}
