package snapshot

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// TestRedactIBFabric: the fabric's GUIDs and subnet prefix are rewritten as
// the same values in the copied files are, and node descriptions are
// replaced: this host's by its host name's replacement, the others by one
// label each, the same description always the same label.
func TestRedactIBFabric(t *testing.T) {
	const gid = "fec0:0000:0000:0001:b83f:d203:00a1:2c6e" // prefix fec0:0:0:1::, port GUID b83f:d203:00a1:2c6e
	tree := newTree()
	tree.put(&Entry{Path: "sys/class/infiniband/mlx5_0/ports/1/gids/0", Kind: File, Data: []byte(gid + "\n")})
	sm := &sysfs.IBSMAnswer{LID: 1, GUID: "0002:c903:00a1:b2c3", State: "MASTER", NodeDesc: "ufm-sm-01 HCA-1"}
	facts := &sysfs.Facts{Schema: sysfs.FactsSchema, Hostname: "node01", IBFabric: &sysfs.IBFabricFacts{Ports: []sysfs.IBFabricPort{{
		CA: "mlx5_0", Port: 1, LID: 7, SMLID: 1, PortGUID: "b83f:d203:00a1:2c6e", SubnetPrefix: "fec0:0:0:1::/64", SM: sm,
		SMs:       &sysfs.IBSMList{SMs: []sysfs.IBSM{{LID: 1, GUID: "0002:c903:00a1:b2c3", State: "MASTER", NodeDesc: "ufm-sm-01 HCA-1"}, {LID: 9, GUID: "0002:c903:00a1:0009", State: "STANDBY", NodeDesc: "node01 mlx5_0"}}},
		Neighbour: &sysfs.IBNeighbour{NodeType: "switch", NodeGUID: "0002:c903:00be:ef00", NodeDesc: "leaf-03 SX6036", Port: 17},
		PKeys:     &sysfs.IBPKeyTable{Keys: []sysfs.IBPKey{{PKey: "0xffff", FullMember: true}}},
	}}}}
	s := &Snapshot{Tree: tree, Facts: facts, Manifest: &Manifest{Hostname: "node01"}}
	redactSnapshot(s)

	b, _ := json.Marshal(s.Facts)
	for _, secret := range []string{"b83f", "c903", "fec0", "ufm-sm-01", "leaf-03", "node01"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("redacted facts still hold %q: %s", secret, b)
		}
	}
	p := s.Facts.IBFabric.Ports[0]
	file := strings.TrimSpace(string(tree.Lookup("sys/class/infiniband/mlx5_0/ports/1/gids/0").Data))
	fileGUID := strings.Join(strings.Split(file, ":")[4:], ":")
	if p.PortGUID != fileGUID {
		t.Errorf("port GUID %s, the redacted GID file's %s (%s)", p.PortGUID, fileGUID, file)
	}
	if want := "2001:db8:0:1::/64"; p.SubnetPrefix != want || !strings.HasPrefix(file, "2001:0db8:0000:0001:") {
		t.Errorf("subnet prefix %s (want %s), GID file %s", p.SubnetPrefix, want, file)
	}
	if p.SM.NodeDesc != "redacted-node-1" || p.SMs.SMs[0].NodeDesc != "redacted-node-1" || p.Neighbour.NodeDesc != "redacted-node-2" {
		t.Errorf("node descriptions: SM %q, SA's SM %q, neighbour %q", p.SM.NodeDesc, p.SMs.SMs[0].NodeDesc, p.Neighbour.NodeDesc)
	}
	if got := p.SMs.SMs[1].NodeDesc; got != "redacted-host mlx5_0" {
		t.Errorf("this host's own node description → %q, want its host name replaced", got)
	}
	if p.SM.GUID != p.SMs.SMs[0].GUID || p.SM.GUID == "0002:c903:00a1:b2c3" {
		t.Errorf("SM GUID %s, the SA's %s: not one consistent replacement", p.SM.GUID, p.SMs.SMs[0].GUID)
	}
	if p.PKeys.Keys[0].PKey != "0xffff" || p.LID != 7 {
		t.Errorf("redaction changed what identifies nothing: %+v", p)
	}
}
