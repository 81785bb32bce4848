package checks

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Broadcom bnxt_re keeps RoCE congestion control (its DCQCN-like CC and
// the ECT bits of RoCE packets) in the firmware, not in MLNX_OFED's
// per-priority ecn files: upstream kernels show it in debugfs
// (sysfs.BnxtCCDir), readable by root only. roce.lossless judges it there
// when it can, and otherwise says where it lives.

// bnxtCCOf reads bnxt_re's congestion control for the netdev of t when
// its RDMA device is bnxt_re's and the netdev has no MLNX_OFED ecn files;
// a zero BnxtCC (Dir "") when it is not bnxt_re's.
func (lj *losslessJudge) bnxtCCOf(t *losslessPort, ecn sysfs.ECNState) sysfs.BnxtCC {
	if ecn.Present || len(t.ports) == 0 {
		return sysfs.BnxtCC{}
	}
	for _, pm := range lj.env.Model().Ports {
		d := pm.Device.Dev
		if d.Name == t.ports[0].dev && d.Driver == "bnxt_en" && d.PCIAddr != "" {
			return lj.h.BnxtCC(d.PCIAddr)
		}
	}
	return sysfs.BnxtCC{}
}

// judgeBnxtCC finds PFC priorities whose RoCE traffic runs without
// congestion control on a bnxt_re function (CC off, or RoCE packets
// without ECT), where debugfs is readable; it returns the ECN summary for
// the netdev's detail line.
func (lj *losslessJudge) judgeBnxtCC(nd string, v dcbView, cc sysfs.BnxtCC, head string, o *losslessOutcome) string {
	for _, pr := range cc.Probs {
		o.details = append(o.details, fmt.Sprintf("%s: ECN: %s", head, pr))
	}
	switch {
	case cc.UnreadableWhy != "":
		o.ev["ecn"] = "unknown"
		return fmt.Sprintf("unknown (bnxt_re congestion control in %s: %s; run as root)", cc.Dir, cc.UnreadableWhy)
	case !cc.Present:
		o.ev["ecn"] = "unknown"
		return "unknown (bnxt_re shows its congestion control in debugfs, " + cc.Dir + ", on kernels since early 2025; " +
			"Broadcom's own driver keeps it in a configfs tree that bnxt_setupcc.sh removes after use)"
	}
	o.ev["ecn"] = map[string]any{"source": cc.Dir, "enable_cc": boolOrUnknown(cc.Enabled, cc.EnabledKnown), "tos_ecn": boolOrUnknown(cc.ECT, cc.ECTKnown)}
	var off, fixes []string
	if cc.EnabledKnown && !cc.Enabled {
		off, fixes = append(off, "enable_cc 0"), append(fixes, fmt.Sprintf("`echo 1 > %s/enable_cc`", cc.Dir))
	}
	if cc.ECTKnown && !cc.ECT {
		off, fixes = append(off, "tos_ecn 0: RoCE packets carry no ECT, so no switch can mark them"), append(fixes, fmt.Sprintf("`echo 1 > %s/tos_ecn`", cc.Dir))
	}
	if len(off) == 0 {
		return "on (bnxt_re congestion control: enable_cc 1, tos_ecn 1)"
	}
	cmds := strings.Join(fixes, " and ") + " (as root; the firmware forgets it on reset, so set it from a boot unit — Broadcom's " +
		"`bnxt_setupcc.sh -m 3` sets PFC and CC together)"
	for _, p := range v.pfc {
		o.add(losslessECNOff, Slots{"prio": fmt.Sprint(p), "points": "bnxt_re congestion control: " + strings.Join(off, ", "), "ecn_commands": cmds})
	}
	return "off (bnxt_re congestion control: " + strings.Join(off, ", ") + ")"
}
