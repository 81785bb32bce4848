package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ibNode is a host with InfiniBand ports: each "CA/PORT LID GUID PREFIX".
func ibNode(host string, ports ...string) *Report {
	r := node(host, "20.1", "200 Gb/sec (4X HDR)", 4092, 0, map[string]Status{})
	r.Inventory.RDMADevices = nil
	for _, p := range ports {
		f := strings.Fields(p)
		ca, num, _ := strings.Cut(f[0], "/")
		lid := 0
		for _, c := range f[1] {
			lid = lid*10 + int(c-'0')
		}
		r.Inventory.RDMADevices = append(r.Inventory.RDMADevices, RDMADevice{Name: ca, Function: "PF", Ports: []Port{{
			Port: int(num[0] - '0'), LinkLayer: "InfiniBand", Transport: "InfiniBand", LID: &lid, PortGUID: f[2], SubnetPrefix: f[3]}}})
	}
	return r
}

type fabricRef struct{ ID, Value, Nodes, Ports string }

func fabricRefs(fs []FabricFinding) []fabricRef {
	var out []fabricRef
	for _, f := range fs {
		out = append(out, fabricRef{f.ID, f.Value, strings.Join(f.Nodes, " "), strings.Join(f.Ports, ", ")})
	}
	return out
}

// TestSummarizeFabric: a LID twice in one subnet across hosts, a port GUID
// on two hosts and a host off the fleet's subnet prefix are named; the
// same LID in two subnets, or twice on one host (VFs share their PF's), is
// not.
func TestSummarizeFabric(t *testing.T) {
	const fe80, fec0 = "fe80::/64", "fec0:0:0:1::/64"
	s := Summarize(fleet(
		ibNode("n1", "mlx5_0/1 7 0000:0000:0000:0101 "+fe80, "mlx5_1/1 8 0000:0000:0000:0102 "+fe80),
		ibNode("n2", "mlx5_0/1 7 0000:0000:0000:0201 "+fe80, "mlx5_1/1 9 0000:0000:0000:0101 "+fe80),
		ibNode("n3", "mlx5_0/1 10 0000:0000:0000:0301 "+fe80, "mlx5_1/1 10 0000:0000:0000:0302 "+fe80),
		ibNode("n4", "mlx5_0/1 8 0000:0000:0000:0401 "+fec0),
		ibNode("n5", "mlx5_0/1 0 0000:0000:0000:0501 "+fe80),
		ibNode("n6", "mlx5_0/1 0 0000:0000:0000:0601 "+fe80),
	), nil, SummaryOptions{})
	want := []fabricRef{
		{FabricDuplicateLID, "7", "n1 n2", "n1 mlx5_0/1, n2 mlx5_0/1"},
		{FabricDuplicateGUID, "0000:0000:0000:0101", "n1 n2", "n1 mlx5_0/1, n2 mlx5_1/1"},
		{FabricPrefixDiffers, fec0, "n4", ""},
	}
	if diff := cmp.Diff(want, fabricRefs(s.Fabric)); diff != "" {
		t.Errorf("fabric findings (-want +got):\n%s", diff)
	}
	if len(s.Fabric) == 3 && (s.Fabric[0].SubnetPrefix != fe80 || s.Fabric[2].Majority != fe80) {
		t.Errorf("subnet of the duplicate LID %q, majority %q", s.Fabric[0].SubnetPrefix, s.Fabric[2].Majority)
	}
	var b bytes.Buffer
	if err := WriteSummaryText(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"INFINIBAND FABRIC (identities the reports disagree on)",
		"  LID 7 is on ports of 2 hosts in subnet fe80::/64: n1 mlx5_0/1, n2 mlx5_0/1",
		"  port GUID 0000:0000:0000:0101 is on ports of 2 hosts: n1 mlx5_0/1, n2 mlx5_1/1",
		"  subnet prefix fec0:0:0:1::/64, not the fleet's fe80::/64 (5 of 6 hosts): n4"} {
		if !strings.Contains(b.String(), line+"\n") {
			t.Errorf("text lacks %q:\n%s", line, b.String())
		}
	}

	// One host's report and its state file are one host, not two.
	one := ibNode("n1", "mlx5_0/1 7 0000:0000:0000:0101 "+fe80)
	twice := Summarize([]FleetReport{{Path: "/x/a.json", Report: one}, {Path: "/x/b.json", Report: one}}, nil, SummaryOptions{})
	if len(twice.Fabric) != 0 {
		t.Errorf("one host read twice clashes with itself: %+v", twice.Fabric)
	}
	// RoCE ports have no LID or subnet to clash.
	if s := Summarize(fleet(node("r1", "1", "1", 1500, 0, nil), node("r2", "1", "1", 1500, 0, nil)), nil, SummaryOptions{}); len(s.Fabric) != 0 {
		t.Errorf("RoCE fleet: %+v", s.Fabric)
	}
}
