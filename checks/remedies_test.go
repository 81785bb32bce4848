package checks

import (
	"regexp"
	"strings"
	"testing"
)

// inOrder fails unless every word appears in s, each after the one before.
func inOrder(t *testing.T, what, s string, words ...string) {
	t.Helper()
	at := -1
	for _, w := range words {
		i := strings.Index(s, w)
		if i < 0 {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
			return
		}
		if i < at {
			t.Errorf("%s: %q comes before the step it must follow:\n%s", what, w, s)
			return
		}
		at = i
	}
}

func TestSubnetManagerFixLooksBeforeItStartsOne(t *testing.T) {
	s := subnetManagerFix("0x0c42a103002b3c4e")
	// Look for the SM (sminfo, sm_lid, P_Keys) first; opensm only last.
	inOrder(t, "subnet-manager remedy", s, "sminfo", "from a host whose port on this fabric is ACTIVE", "its silence here proves nothing", "sm_lid",
		"Polling", "pkeys/*", "Never start a second SM", "Only when no SM answers",
		"install opensm on ONE host", "opensm -g 0x0c42a103002b3c4e", "systemctl cat opensm", "guid 0x0c42a103002b3c4e", "systemctl enable --now opensm")
	for _, w := range []string{"UFM", "a managed switch's SM", "higher priority, or equal priority and lower GUID", "0xffff/0x7fff"} {
		if !strings.Contains(s, w) {
			t.Errorf("subnet-manager remedy lacks %q", w)
		}
	}
	if g := subnetManagerFix(""); !strings.Contains(g, "opensm -g <port GUID>` (the Port GUID that `ibstat <dev> <n>` shows)") {
		t.Errorf("without a GUID the remedy must leave a placeholder: %s", g)
	}
	f := subnetManagerFixFor("mlx5_2", "1", "")
	for _, w := range []string{"/sys/class/infiniband/mlx5_2/ports/1/sm_lid", "/sys/class/infiniband/mlx5_2/ports/1/pkeys/*", "-C mlx5_2 -P 1", "ibstat mlx5_2 1"} {
		if !strings.Contains(f, w) {
			t.Errorf("device and port not filled in (%q): %s", w, f)
		}
	}
	if regexp.MustCompile(`<dev>|<n>`).MatchString(f) {
		t.Errorf("placeholders left: %s", f)
	}
}

func TestReloadInterruptsSaysWhatIsLost(t *testing.T) {
	cases := []struct {
		module      string
		has, hasNot []string
	}{
		{"mlx5_core", []string{"Reloading mlx5_core", "registered memory", "Ethernet netdevs", "NFS", "mlx5_bond_N", "Drain the node first", "scontrol update"}, []string{"IPoIB"}},
		{"mlx5_ib", []string{"Reloading mlx5_ib", "RDMA connection", "IPoIB", "mlx5_bond_N", "Drain the node first"}, []string{"Ethernet netdevs"}},
		{"bnxt_re", []string{"Reloading bnxt_re", "RDMA connection", "Drain the node first"}, []string{"mlx5_bond_N", "Ethernet netdevs"}},
		{"ice", []string{"Ethernet netdevs", "Drain the node first"}, []string{"mlx5_bond_N"}},
		{"ib_uverbs", []string{"every RDMA device", "registered memory", "refuses while a driver's RDMA module", "Drain the node first"}, []string{"mlx5_bond_N", "Ethernet netdevs"}},
		{"", []string{"Reloading the driver's modules", "IPoIB", "reloading the NIC driver itself (mlx5_core, bnxt_en, ice, …) also removes its Ethernet netdevs", "mlx5_bond_N", "Drain the node first"}, nil},
	}
	for _, c := range cases {
		s := reloadInterrupts(c.module)
		for _, w := range c.has {
			if !strings.Contains(s, w) {
				t.Errorf("reloadInterrupts(%q) lacks %q: %s", c.module, w, s)
			}
		}
		for _, w := range c.hasNot {
			if strings.Contains(s, w) {
				t.Errorf("reloadInterrupts(%q) must not say %q: %s", c.module, w, s)
			}
		}
	}
}

// reloadRE finds advice that reloads or removes a module.
var reloadRE = regexp.MustCompile("modprobe -r|rmmod|devlink dev reload|[Rr]eload(ing)? (the |its |ib_|mlx|with)")

// TestEveryReloadIsGuarded reads the remedies of this package's checks
// that reload something: each carries the reload sentence, and a harmless
// step (udev) comes before it where there is one.
func TestEveryReloadIsGuarded(t *testing.T) {
	mine := map[string]bool{"kernel.modules": true, "uverbs.nodes": true, "libibverbs.install": true, "libibverbs.devices": true,
		"kernel.version": true, "limits.memlock": true, "verbs.qp_state": true}
	for _, c := range Catalog() {
		if !mine[c.ID] {
			continue
		}
		for _, f := range c.Explain.Failures {
			if !reloadRE.MatchString(f.Fix) {
				continue
			}
			if !strings.Contains(f.Fix, "Drain the node first") {
				t.Errorf("%s: %q reloads without saying what it interrupts: %s", c.ID, f.Finding, f.Fix)
			}
			if strings.Contains(f.Fix, "udevadm trigger") {
				inOrder(t, c.ID+" "+f.Finding, f.Fix, "udevadm trigger", reloadRE.FindString(f.Fix))
			}
		}
	}
}
