//go:build linux

package sysfs

import (
	"errors"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// liveNetns makes a network namespace for the test, with a veth pair
// v0 (up, MTU 9000, IPv4 and IPv6 addresses) / v1 (down) and, where the
// kernel has the dummy driver, a dummy d0 (up, 198.51.100.7/24). It needs
// root: without it the test is skipped, saying so — except under CI=true,
// where root is expected and anything that stops the test fails it.
func liveNetns(t *testing.T) (ns netns.NsHandle, haveDummy bool) {
	t.Helper()
	ci := os.Getenv("CI") == "true"
	if os.Geteuid() != 0 {
		t.Skip("live netlink tests need root to create a network namespace; run as root (CI does)")
	}
	stop := func(format string, args ...any) {
		t.Helper()
		if ci {
			t.Fatalf(format, args...)
		}
		t.Skipf(format+" (skipped outside CI)", args...)
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		stop("get the current network namespace: %v", err)
	}
	ns, err = netns.New() // moves this thread into the new namespace
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("return to the original network namespace: %v", serr) // the thread is unusable; never unlock it
	}
	orig.Close()
	runtime.UnlockOSThread()
	if err != nil {
		stop("create a network namespace: %v", err)
	}
	t.Cleanup(func() { ns.Close() })

	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatalf("netlink handle in the test namespace: %v", err)
	}
	defer h.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "v0", MTU: 9000}, PeerName: "v1"}
	if err := h.LinkAdd(veth); err != nil {
		stop("add a veth pair: %v", err)
	}
	v0, err := h.LinkByName("v0")
	if err != nil {
		t.Fatal(err)
	}
	for _, cidr := range []string{"192.0.2.1/24", "2001:db8::1/64"} {
		a, _ := netlink.ParseAddr(cidr)
		if err := h.AddrAdd(v0, a); err != nil {
			t.Fatalf("add %s to v0: %v", cidr, err)
		}
	}
	if err := h.LinkSetUp(v0); err != nil {
		t.Fatal(err)
	}
	lo, err := h.LinkByName("lo")
	if err == nil {
		_ = h.LinkSetUp(lo)
	}
	d0 := &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "d0"}}
	if err := h.LinkAdd(d0); err == nil {
		haveDummy = true
		l, _ := h.LinkByName("d0")
		a, _ := netlink.ParseAddr("198.51.100.7/24")
		if err := h.AddrAdd(l, a); err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("this kernel has no dummy driver (%v); veth only", err)
	}
	return ns, haveDummy
}

func findNetdev(nds []Netdev, name string) (Netdev, bool) {
	for _, nd := range nds {
		if nd.Name == name {
			return nd, true
		}
	}
	return Netdev{}, false
}

func TestLiveNetdevsInNetns(t *testing.T) {
	ns, haveDummy := liveNetns(t)
	h := &Host{rootDir: "/", live: netlinkSource{ns: ns}}
	nds, err := h.Netdevs()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(nds))
	for _, nd := range nds {
		names = append(names, nd.Name)
	}
	want := []string{"lo", "v0", "v1"}
	if haveDummy {
		want = append(want, "d0")
	}
	for _, w := range want {
		if !slices.Contains(names, w) {
			t.Fatalf("netdevs %v: %s missing", names, w)
		}
	}
	if len(names) != len(want) {
		t.Fatalf("netdevs %v: want exactly %v (the namespace holds nothing else)", names, want)
	}
	v0, _ := findNetdev(nds, "v0")
	if !v0.AdminUp || v0.MTU != 9000 || v0.Index <= 0 {
		t.Errorf("v0 = %+v: want admin up, MTU 9000, an index", v0)
	}
	if _, err := net.ParseMAC(v0.MAC); err != nil {
		t.Errorf("v0 MAC %q: %v", v0.MAC, err)
	}
	if !slices.Contains(v0.Addresses, "192.0.2.1/24") || !slices.Contains(v0.Addresses, "2001:db8::1/64") {
		t.Errorf("v0 addresses %v: want 192.0.2.1/24 and 2001:db8::1/64", v0.Addresses)
	}
	// v1 is down, so v0 has no carrier: its operstate says the lower layer is down.
	if v0.Carrier || v0.OperState == "up" {
		t.Errorf("v0 with its peer down: carrier %v, operstate %q; want no carrier, not up", v0.Carrier, v0.OperState)
	}
	v1, _ := findNetdev(nds, "v1")
	if v1.AdminUp || v1.OperState != "down" || len(v1.Addresses) != 0 {
		t.Errorf("v1 = %+v: want admin down, operstate down, no addresses", v1)
	}
	if haveDummy {
		d0, _ := findNetdev(nds, "d0")
		if !d0.AdminUp || !slices.Contains(d0.Addresses, "198.51.100.7/24") {
			t.Errorf("d0 = %+v: want up with 198.51.100.7/24", d0)
		}
	}

	// Bring the peer up: v0 gains its carrier and goes up.
	nh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer nh.Close()
	l1, err := nh.LinkByName("v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := nh.LinkSetUp(l1); err != nil {
		t.Fatal(err)
	}
	// The kernel's link watcher updates operstate a moment later: poll.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		nds, err = h.Netdevs()
		if err != nil {
			t.Fatal(err)
		}
		v0, _ = findNetdev(nds, "v0")
		if (v0.Carrier && v0.OperState == "up") || time.Now().After(deadline) {
			break
		}
	}
	if !v0.Carrier || v0.OperState != "up" {
		t.Errorf("v0 with its peer up: carrier %v, operstate %q; want carrier, up", v0.Carrier, v0.OperState)
	}
}

// The host's own namespace must not see the test's devices: the source
// really reads the namespace it is bound to.
func TestLiveNetnsIsolation(t *testing.T) {
	liveNetns(t)
	nds, err := OpenLive().Netdevs()
	if err != nil {
		t.Fatal(err)
	}
	if nd, ok := findNetdev(nds, "v0"); ok && slices.Contains(nd.Addresses, "192.0.2.1/24") {
		t.Fatal("the host namespace shows the test namespace's v0")
	}
}

// The default live source reads the caller's namespace: run it inside the
// test namespace on a locked OS thread.
func TestLiveReaderInsideNetns(t *testing.T) {
	ns, _ := liveNetns(t)
	type answer struct {
		nds []Netdev
		dcb DCB
		err error
	}
	done := make(chan answer, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine, never reused in the wrong namespace
		if err := netns.Set(ns); err != nil {
			done <- answer{err: err}
			return
		}
		h := OpenLive()
		nds, err := h.Netdevs()
		if err != nil {
			done <- answer{err: err}
			return
		}
		d, err := h.DCB("v0")
		done <- answer{nds: nds, dcb: d, err: err}
	}()
	a := <-done
	if a.err != nil {
		t.Fatal(a.err)
	}
	if v0, ok := findNetdev(a.nds, "v0"); !ok || !slices.Contains(v0.Addresses, "192.0.2.1/24") {
		t.Fatalf("inside the namespace: v0 not found with its address in %+v", a.nds)
	}
	if a.dcb.Err != ErrNoDCB {
		t.Fatalf("DCB of veth v0 inside the namespace = %+v, want %s", a.dcb, ErrNoDCB)
	}
}

// veth and dummy drivers have no DCB operations: the kernel answers
// RTM_GETDCB with EOPNOTSUPP, which the source reports as a state.
func TestLiveDCBNotSupported(t *testing.T) {
	ns, haveDummy := liveNetns(t)
	h := &Host{rootDir: "/", live: netlinkSource{ns: ns}}
	ifs := []string{"v0", "v1", "lo"}
	if haveDummy {
		ifs = append(ifs, "d0")
	}
	for _, ifname := range ifs {
		d, err := h.DCB(ifname)
		if err != nil {
			t.Fatalf("DCB(%s): %v", ifname, err)
		}
		if d.Err != ErrNoDCB || d.PFCEn != 0 || len(d.App) != 0 {
			t.Errorf("DCB(%s) = %+v, want {Err: %s}", ifname, d, ErrNoDCB)
		}
	}
	_, err := h.DCB("nosuchif0")
	if err == nil || !strings.Contains(err.Error(), "no such interface") {
		t.Errorf("DCB of a missing interface: err %v, want \"no such interface\"", err)
	}
}

// RDMA netlink exists only with ib_core loaded. Either way the answer must
// be a mode or an error that says why.
func TestLiveRDMA(t *testing.T) {
	ns, _ := liveNetns(t)
	src := netlinkSource{ns: ns}
	mode, err := src.RDMASystem()
	if err != nil {
		if errors.Is(err, unix.EPROTONOSUPPORT) && !strings.Contains(err.Error(), "ib_core") {
			t.Errorf("RDMASystem error %q does not say ib_core is missing", err)
		}
		t.Logf("no RDMA netlink here: %v", err)
	} else if mode.NetnsMode != "shared" && mode.NetnsMode != "exclusive" {
		t.Errorf("netns mode %q, want shared or exclusive", mode.NetnsMode)
	}
	res, err := src.RDMAResources()
	if err != nil {
		if mode.NetnsMode != "" {
			t.Errorf("RDMA netlink answered the mode but not the resources: %v", err)
		}
		return
	}
	for _, r := range res {
		if r.Device == "" || r.Counts == nil {
			t.Errorf("resource entry %+v: want a device name and counts", r)
		}
	}
}

// The ethtool requests in a namespace, on the kernel's real answers: a
// veth and a dummy have no FEC (EOPNOTSUPP), a link state, and (veth) the
// driver's statistics; lo has no statistics set.
func TestLiveEthtoolInNetns(t *testing.T) {
	ns, haveDummy := liveNetns(t)
	h := &Host{rootDir: "/", live: netlinkSource{ns: ns}}
	names := []string{"lo", "v0"}
	if haveDummy {
		names = append(names, "d0")
	}
	got, err := h.Ethtool(names)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		a := got[n]
		if a.FEC != nil || a.FECErr != ErrNotSupported {
			t.Errorf("%s: FEC %+v, error %q: want EOPNOTSUPP", n, a.FEC, a.FECErr)
		}
		if a.Link == nil || a.Link.Up == nil {
			t.Errorf("%s: no link state (%q)", n, a.LinkErr)
		}
	}
	if v0 := got["v0"]; v0.StatsErr != "" || len(v0.Stats) == 0 {
		t.Errorf("v0: statistics %+v, error %q (veth_get_ethtool_stats)", v0.Stats, v0.StatsErr)
	}
	if lo := got["lo"]; lo.StatsErr != ErrNotSupported {
		t.Errorf("lo: statistics error %q, want EOPNOTSUPP", lo.StatsErr)
	}
}

// BenchmarkLiveEthtool is the live requests of one run for one interface
// (lo, in this namespace: FEC_GET, LINKSTATE_GET, LINKMODES_GET and the
// statistics ioctl over one socket), the cost link.phy adds per netdev.
func BenchmarkLiveEthtool(b *testing.B) {
	h := OpenLive()
	for b.Loop() {
		if _, err := h.Ethtool([]string{"lo"}); err != nil {
			b.Fatal(err)
		}
	}
}
