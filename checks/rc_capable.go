package checks

import "strings"

// Why a device's probes of one QP type are skipped.
const (
	efaNoRC   = "EFA has no RC queue pairs (UD and SRD only); probe.ud probes it"
	usnicNoRC = "usNIC has no RC queue pairs (UD only); probe.ud probes it"
	iwarpNoUD = "iWARP has no UD queue pairs (RC over TCP only)"
	qedrNoUD  = "qedr offers applications RC queue pairs only (UD is the kernel's own QP1)"
	manaNoUD  = "mana offers applications RC and raw-packet queue pairs only"
)

// nodeTypeCode is the number of a node_type attribute ("7: UNSPECIFIED").
func nodeTypeCode(nodeType string) string {
	code, _, _ := strings.Cut(strings.TrimSpace(nodeType), ":")
	return code
}

// rcCapable decides whether a device has RC queue pairs, from its bound
// driver and its node_type attribute; when it has none it says why. EFA
// (driver efa, node type 7) accepts UD and SRD QPs only: ibv_create_qp with
// RC fails there with EOPNOTSUPP. usNIC (node types 5, 6) has UD only.
// Every other node type (CA, RNIC, switch, router) has RC. This is the one
// place that decides it; the probes follow its word.
func rcCapable(driver, nodeType string) (bool, string) {
	switch code := nodeTypeCode(nodeType); {
	case driver == "efa" || code == "7":
		return false, efaNoRC
	case code == "5" || code == "6":
		return false, usnicNoRC
	}
	return true, ""
}

// udCapable decides whether applications can create UD queue pairs on a
// device, and says why not: iWARP (node type 4, RNIC) is RC over TCP; the
// qedr kernel driver accepts RC, XRC and its own QP1 only (other types fail
// with EOPNOTSUPP, EINVAL before Linux 5.x); the mana provider creates RC
// and raw-packet QPs only. The one place that decides it, as rcCapable.
func udCapable(driver, nodeType string) (bool, string) {
	switch {
	case nodeTypeCode(nodeType) == "4":
		return false, iwarpNoUD
	case driver == "qede" || driver == "qedr":
		return false, qedrNoUD
	case driver == "mana":
		return false, manaNoUD
	}
	return true, ""
}
