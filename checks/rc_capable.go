package checks

import "strings"

// efaNoRC is why the RC probes skip an EFA device.
const efaNoRC = "EFA has no RC queue pairs (UD and SRD only); probe.ud probes it"

// usnicNoRC is why they skip a Cisco usNIC (node types 5 and 6).
const usnicNoRC = "usNIC has no RC queue pairs (UD only); probe.ud probes it"

// rcCapable decides whether a device has RC queue pairs, from its bound
// driver and its node_type attribute ("7: UNSPECIFIED"); when it has none
// it says why. EFA (driver efa, node type 7) accepts UD and SRD QPs only:
// ibv_create_qp with RC fails there with EOPNOTSUPP. usNIC (node types 5,
// 6) has UD only. Every other node type (CA, RNIC, switch, router) has RC.
// This is the one place that decides it; the probes follow its word.
func rcCapable(driver, nodeType string) (bool, string) {
	code, _, _ := strings.Cut(strings.TrimSpace(nodeType), ":")
	switch {
	case driver == "efa" || code == "7":
		return false, efaNoRC
	case code == "5" || code == "6":
		return false, usnicNoRC
	}
	return true, ""
}
