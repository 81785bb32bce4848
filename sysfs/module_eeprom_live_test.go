//go:build linux

package sysfs

import (
	"slices"
	"testing"
)

// The live reader asks the kernel for the loopback device's module: lo has
// none, so the answer is a recorded errno (EOPNOTSUPP, or EPERM without
// CAP_NET_ADMIN), never an error of the reader and never pages; and the
// capture records it for every interface.
func TestLiveModuleEEPROMOfLoopback(t *testing.T) {
	h := OpenLive()
	m, found, err := h.ModuleEEPROM("lo")
	if err != nil || !found {
		t.Fatalf("ModuleEEPROM(lo) = %+v, %v, %v; want a recorded answer", m, found, err)
	}
	if !slices.Contains([]string{ErrNoModule, "EPERM"}, m.Err) || len(m.Pages) != 0 {
		t.Errorf("ModuleEEPROM(lo) = %+v; want EOPNOTSUPP (or EPERM unprivileged) and no pages", m)
	}
	if !h.RecordsModules() {
		t.Error("a live host can always be asked")
	}
	nds, err := h.Netdevs()
	if err != nil {
		t.Skipf("no netdevs: %v", err)
	}
	unavailable := map[string]string{}
	got := h.gatherModuleEEPROMs(nds, unavailable)
	if _, ok := got["lo"]; !ok {
		t.Errorf("the capture lacks lo's answer: %v (unavailable %v)", got, unavailable)
	}
}

// In a network namespace with a veth pair and a dummy — drivers without a
// plug-in module — the kernel's answer for each is EOPNOTSUPP (EPERM
// unprivileged): recorded, so link.optics skips them with the reason.
func TestLiveModuleEEPROMOfVirtualDrivers(t *testing.T) {
	ns, haveDummy := liveNetns(t)
	h := &Host{rootDir: "/", live: netlinkSource{ns: ns}}
	names := []string{"v0", "v1"}
	if haveDummy {
		names = append(names, "d0")
	}
	for _, n := range names {
		m, found, err := h.ModuleEEPROM(n)
		if err != nil || !found || !slices.Contains([]string{ErrNoModule, "EPERM"}, m.Err) || len(m.Pages) != 0 {
			t.Errorf("ModuleEEPROM(%s) = %+v, %v, %v; want EOPNOTSUPP and no pages", n, m, found, err)
		}
	}
}
