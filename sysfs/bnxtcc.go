package sysfs

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// BnxtCCDir is upstream bnxt_re's congestion-control directory of one PCI
// function in debugfs: drivers/infiniband/hw/bnxt_re/debugfs.c makes
// bnxt_re/<PCI address>/cc_config/ with one file per parameter of the
// firmware's generation-0 congestion control (enable_cc, tos_ecn,
// tos_dscp, cc_mode, …), mode 0400; reading one queries the firmware and
// prints the value in decimal, writing one (as root) modifies it. Older
// kernels, and Broadcom's out-of-tree driver (a configfs tree that its
// bnxt_setupcc.sh creates and removes again), have no such files.
func BnxtCCDir(pciAddr string) string {
	return path.Join("/sys/kernel/debug/bnxt_re", pciAddr, "cc_config")
}

// BnxtCC is what bnxt_re's debugfs says of a function's congestion
// control: whether it is on and whether RoCE packets carry ECT in their
// ToS (without ECT a switch cannot mark them, and no CNP ever comes).
type BnxtCC struct {
	Dir           string // BnxtCCDir of the function
	Present       bool   // the directory could be listed
	Enabled, ECT  bool
	EnabledKnown  bool
	ECTKnown      bool
	Probs         []string // files that exist but could not be read or parsed
	UnreadableWhy string   // the directory exists but cannot be listed (not root)
}

// BnxtCC reads enable_cc and tos_ecn below BnxtCCDir. Present is false
// when the directory does not exist (no debugfs mounted, an older kernel,
// another driver).
func (h *Host) BnxtCC(pciAddr string) BnxtCC {
	cc := BnxtCC{Dir: BnxtCCDir(pciAddr)}
	if _, err := h.ReadDir(cc.Dir); err != nil {
		if !IsNotExist(err) {
			cc.UnreadableWhy = err.Error()
		}
		return cc
	}
	cc.Present = true
	read := func(name string) (bool, bool) {
		s, err := h.ReadAttr(path.Join(cc.Dir, name))
		if err != nil {
			cc.Probs = append(cc.Probs, err.Error())
			return false, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			cc.Probs = append(cc.Probs, fmt.Sprintf("%s: %q is not a number", h.Display(path.Join(cc.Dir, name)), trimForMsg(s)))
			return false, false
		}
		return n != 0, true
	}
	cc.Enabled, cc.EnabledKnown = read("enable_cc")
	cc.ECT, cc.ECTKnown = read("tos_ecn")
	return cc
}
