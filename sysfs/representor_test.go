package sysfs

import "testing"

// A representor is told by its switch-port name: VF and SF ports, and a
// PCI PF port (a DPU's representor of its host's PF, "c1pf0"); an uplink
// ("p0") or a driver without switch ports ("") is none.
func TestRepresentorNames(t *testing.T) {
	for name, want := range map[string]bool{
		"": false, "p0": false, "p1": false, "pf0vf3": true, "c1pf0vf0": true, "pf0sf1": true,
		"pf0": true, "c1pf0": true, "c12pf1": true, "pf": false, "cxpf0": false, "pf0x": false,
	} {
		if got := (NetdevTopology{PhysPortName: name}).Representor(); got != want {
			t.Errorf("Representor(%q) = %v, want %v", name, got, want)
		}
	}
}
