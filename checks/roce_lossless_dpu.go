package checks

import (
	"sort"
	"strings"
)

// A BlueField DPU's function seen from its host: in DPU mode the Arm OS
// owns the physical port, so PFC, trust and ECN of the wire are set there,
// on the uplink (p0/p1), not on the host's PF. roce.lossless adds that to
// its fix for such netdevs: the commands it prints with the host's netdev
// cannot be carried out on the host in DPU mode.

// dpuQoSNote is the line added to roce.lossless's fix when a netdev it
// judged belongs to a BlueField function.
const dpuQoSNote = "{netdevs} belong to a BlueField DPU: in DPU mode (the default) the port's QoS belongs to the DPU's Arm OS — " +
	"run the same settings there on the uplink (p0/p1, e.g. `mlnx_qos -i p0 …`), not on this host; in NIC mode they apply here as printed."

// blueFieldNetdevs are the judged netdevs whose port is a BlueField
// function's, sorted.
func blueFieldNetdevs(env *Env, outs []losslessOutcome) []string {
	judged := map[string]bool{}
	for _, o := range outs {
		judged[o.netdev] = true
	}
	bf := map[string]bool{}
	for _, fn := range env.Survey().PCI {
		if fn.Vendor == 0x15b3 && strings.HasPrefix(mellanoxProducts[fn.Device], "BlueField") {
			bf[fn.Address] = true
		}
	}
	var out []string
	for _, pm := range env.Model().Ports {
		if !bf[pm.Device.Dev.PCIAddr] {
			continue
		}
		for _, nd := range pm.DCBNetdevs {
			if judged[nd] {
				out = appendUnique(out, nd)
			}
		}
	}
	sort.Strings(out)
	return out
}
