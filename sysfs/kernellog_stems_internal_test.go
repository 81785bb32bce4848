package sysfs

import "testing"

// The literal tests in front of the two patterns only save time: a message
// is the RDMA stack's, or a link-health one, exactly when the pattern alone
// says so.
func FuzzKernelMessageStems(f *testing.F) {
	for _, s := range []string{
		"mlx5_core 0000:3b:00.0: mlx5_pcie_event:301: Detected insufficient power on the PCIe slot (27W).",
		"MLX5_CORE 0000:3B:00.0: E-Switch: Enable", "infiniband mlx5_0: Couldn't register device", "Infiniband: something",
		"rdma_rxe: loaded", "rxe0: set active", "pcieport 0000:00:01.0: AER: Corrected error received: 0000:01:00.0",
		"e1000e: eth0 NIC Link is Down", "IPv6: ADDRCONF(NETDEV_UP): eth0: link is not ready", "Link Down on port", "default route",
		"ib_srp: something", "hns_roce_hw_v2 0000:7d:00.0: ok", "efa 0000:00:06.0: setup", "usb 1-1: new device", "",
		"ROCE enabled", "siw0 up", "i40iw_0 ok", "cxgb4_0: ok", "IPOIB ib0: mtu", "tx_timeout recovery level 1, txqueue 3",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := IsRDMAKernelMessage(s), rdmaKernelLog().MatchString(s); got != want {
			t.Errorf("IsRDMAKernelMessage(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := IsLinkHealthMessage(s), linkHealthLog().MatchString(s); got != want {
			t.Errorf("IsLinkHealthMessage(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}

func TestKernelMessageStemsFoldedLetters(t *testing.T) {
	// U+017F (long s) folds to s, U+212A (Kelvin) to k: the patterns match.
	for _, s := range []string{"\u017fiw0 up", "mlx5_core: lin\u212A down"} {
		if !IsRDMAKernelMessage(s) && rdmaKernelLog().MatchString(s) {
			t.Errorf("%q: the literal test hides a match", s)
		}
		if !IsLinkHealthMessage(s) && linkHealthLog().MatchString(s) {
			t.Errorf("%q: the literal test hides a match", s)
		}
	}
}
