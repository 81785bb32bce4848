package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestRoCEConfigFindings: each host gives the findings named, port by
// port, whatever the words.
func TestRoCEConfigFindings(t *testing.T) {
	ok0, ok1 := findingRef{"roce.config/ok", "mlx5_0/1"}, findingRef{"roce.config/ok", "mlx5_1/1"}
	for _, tc := range []struct {
		name string
		dir  string
		opts checks.Options
		want []findingRef
	}{
		{"healthy", netFixture("cx5-roce-healthy"), checks.Options{}, []findingRef{ok0, ok1}},
		{"no IP", netFixture("roce-no-ip"), checks.Options{}, []findingRef{{"roce.config/no-ip", "mlx5_0/1"}, ok1}},
		{"default mode v1", netFixture("roce-v1-default"), checks.Options{}, []findingRef{{"roce.config/mode-v1", "mlx5_0/1"}, ok1}},
		{"one port down", netFixture("port-down"), checks.Options{}, []findingRef{ok0, {"roce.config/port-down", "mlx5_1/1"}}},
		{"InfiniBand", netFixture("cx6-ib-healthy"), checks.Options{}, []findingRef{{"roce.config/not-roce", ""}}},
		{"iWARP", netFixture("cxgb4-iwarp"), checks.Options{}, []findingRef{{"roce.config/iwarp", ""}}},
		{"EFA", netFixture("aws-efa"), checks.Options{}, []findingRef{{"roce.config/efa", ""}}},
		{"usNIC", netFixture("usnic-cisco-vic"), checks.Options{}, []findingRef{{"roce.config/usnic", ""}}},
		{"every port down", cx5Edited(t, func(h *sysfstest.Host) {
			for i := range h.NICs {
				p := &h.NICs[i].Ports[0]
				p.State, p.PhysState, p.OperUp = "1: DOWN", "2: Polling", false
			}
		}, nil), checks.Options{}, []findingRef{{"roce.config/none-active", ""}, {"roce.config/port-down", "mlx5_0/1"}, {"roce.config/port-down", "mlx5_1/1"}}},
		{"netdev down", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			tr.Facts.Netdevs[2].AdminUp, tr.Facts.Netdevs[2].OperState = false, "down"
		}), checks.Options{}, []findingRef{ok0, {"roce.config/netdev-down", "mlx5_1/1"}}},
		{"small MTU", cx5Edited(t, func(h *sysfstest.Host) { h.NICs[0].Ports[0].MTU = 1000 }, nil), checks.Options{},
			[]findingRef{{"roce.config/small-mtu", "mlx5_0/1"}, ok1}},
		{"MTU other than the class says", netFixture("cx5-roce-healthy"), classOf(t, "mlx5_0/1.mtu = 1500\n"),
			[]findingRef{{"roce.config/mtu-deviates", "mlx5_0/1"}, ok1}},
		{"only v1 GIDs", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			for p := range tr.Files {
				if strings.Contains(p, "mlx5_1/ports/1/gid_attrs/types/") {
					tr.Files[p] = "IB/RoCE v1\n"
				}
			}
		}), checks.Options{}, []findingRef{ok0, {"roce.config/only-v1", "mlx5_1/1"}}},
		{"empty GID table, netdev known from the PCI function", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			tr.Link(sysfstest.PortDir(tr, "mlx5_1", 1)+"/../../device", "../../../0000:3b:00.1")
			zeroGIDs(tr, "mlx5_1")
		}), checks.Options{}, []findingRef{ok0, {"roce.config/no-gid", "mlx5_1/1"}}},
		{"empty GID table, no netdev", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			tr.Link(sysfstest.PortDir(tr, "mlx5_1", 1)+"/../../device", "../../../0000:3b:00.1")
			zeroGIDs(tr, "mlx5_1")
			for p := range tr.Files {
				if strings.Contains(p, "0000:3b:00.1/net/") {
					delete(tr.Files, p)
				}
			}
			for p := range tr.Dirs {
				if strings.Contains(p, "0000:3b:00.1/net") {
					delete(tr.Dirs, p)
				}
			}
			for p := range tr.Links {
				if strings.Contains(p, "0000:3b:00.1/net") || strings.HasSuffix(p, "/ens1f1np1") {
					delete(tr.Links, p)
				}
			}
		}), checks.Options{},
			[]findingRef{ok0, {"roce.config/no-netdev", "mlx5_1/1"}}},
		{"an address without a GID", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			for i := range tr.Facts.Netdevs {
				if tr.Facts.Netdevs[i].Name == "ens1f1np1" {
					tr.Facts.Netdevs[i].Addresses = append(tr.Facts.Netdevs[i].Addresses, "198.51.100.7/24")
				}
			}
		}), checks.Options{}, []findingRef{ok0, {"roce.config/v2-missing", "mlx5_1/1"}}},
		{"netdev not listed", cx5Edited(t, nil, func(tr *sysfstest.Tree) {
			var keep []sysfs.Netdev
			for _, nd := range tr.Facts.Netdevs {
				if nd.Name != "ens1f1np1" {
					keep = append(keep, nd)
				}
			}
			tr.Facts.Netdevs = keep
		}), checks.Options{}, []findingRef{ok0, {"roce.config/netdev-missing", "mlx5_1/1"}}},
		{"netdevs unknown", cx5Edited(t, nil, func(tr *sysfstest.Tree) { tr.Facts.Netdevs = nil }), checks.Options{},
			[]findingRef{{"roce.config/netdev-unreadable", "mlx5_0/1"}, {"roce.config/netdev-unreadable", "mlx5_1/1"}}},
		{"no address on the netdev nor its VLAN", fixtureEdited(t, "roce-vlan-ip", func(tr *sysfstest.Tree) {
			for i := range tr.Facts.Netdevs {
				tr.Facts.Netdevs[i].Addresses = nil
			}
		}), checks.Options{}, []findingRef{{"roce.config/no-ip-uppers", "mlx5_0/1"}, {"roce.config/no-ip", "mlx5_1/1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hwResult(t, hwRun(t, tc.dir, tc.opts), "roce.config")
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, c.Summary)
			}
		})
	}
	r := hwRunOne(t, netFixture("no-rdma-nic"), "roce.config", checks.Options{})
	if diff := cmp.Diff([]findingRef{{"roce.config/no-rdma-port", ""}}, refs(r.Findings)); diff != "" {
		t.Errorf("no RDMA port: findings (-want +got):\n%s\n%s", diff, r.Summary)
	}
}

// zeroGIDs empties the GID table of a device's port 1.
func zeroGIDs(tr *sysfstest.Tree, dev string) {
	gids := sysfstest.PortDir(tr, dev, 1) + "/gids/"
	for p := range tr.Files {
		if strings.HasPrefix(p, gids) {
			tr.Files[p] = sysfs.ZeroGID + "\n"
		}
	}
}
