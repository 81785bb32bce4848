package checks

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// The InfiniBand control-plane checks (ib.*) ask the fabric with
// management datagrams through libibumad (package mad). They find their
// ports through libibumad, not sysfs, and need no sysfs-based check: under
// the ibsim simulator libibumad's view of the devices is faked while the
// files the program reads itself are the real, empty /sys.

// openMAD opens the transport the ib.* checks send MADs through; tests
// replace it with canned answers.
var openMAD = func() (mad.Transport, error) {
	lib, err := umadLib()
	if err != nil {
		return nil, err
	}
	return mad.NewUMAD(lib), nil
}

// umadLib loads and initialises libibumad once per process. umad_init and
// the device scan are not safe to run twice at once (libumad2sim.so binds
// its simulator socket on the first one), and the runner runs checks
// concurrently.
var umadLib = sync.OnceValues(func() (*mad.Lib, error) {
	lib, err := mad.Open("")
	if err != nil {
		return nil, err
	}
	if err := lib.Init(); err != nil {
		return nil, err
	}
	return lib, nil
})

// madMu makes the ib.* checks take turns, from the device scan to the
// last answer: libumad2sim.so sets itself up on the first scan and is not
// safe to enter twice at once, and no two checks' SMPs interleave.
var madMu sync.Mutex

// needUmad: MADs go through /dev/infiniband/umadN, read-write (root's,
// or a group's by udev rule); the same directory libibverbs' nodes are in.
var needUmad = Need{Kind: NeedDevice, Path: sysfs.DevInfiniband,
	For: "opens /dev/infiniband/umadN read-write to send management datagrams, as infiniband-diags does"}

// madFrame are the findings every ib.* check shares: the host cannot be
// asked (a snapshot, no libibumad, no InfiniBand port) or libibumad fails.
type madFrame struct {
	snapshot, noLibrary, initFailed, portsFailed, noIBPort *Finding
}

func declareMADFrame(id string) *madFrame {
	d := func(slug string, st report.Status, when, msg, fix string) *Finding {
		return declare(Finding{ID: id + "/" + slug, Status: st, When: when, Message: msg, Fix: fix})
	}
	return &madFrame{
		snapshot: d("snapshot", report.Skip, "the host is a snapshot: management datagrams go only from the live host",
			"no live fabric in a snapshot: management datagrams are sent only from the host itself", ""),
		noLibrary: d("no-libibumad", report.Skip, "libibumad (libibumad3, rdma-core) cannot be loaded: no InfiniBand management on this host",
			"libibumad cannot be loaded, so there is no InfiniBand management interface to ask: {cause}",
			"On an InfiniBand host install libibumad (Debian/Ubuntu: `apt install libibumad3`; RHEL: `dnf install libibumad`); a RoCE-only host needs none."),
		initFailed: d("umad-failed", report.Error, "libibumad is installed but umad_init or the port listing fails",
			"libibumad is installed but does not work: {cause}",
			"Check that the ib_umad kernel module is loaded (`modprobe ib_umad`; /dev/infiniband/umad* must exist) and that libibumad matches the kernel's rdma-core."),
		portsFailed: d("port-failed", report.Error, "a port could not be asked (umad_open_port refused, a malformed answer)",
			"{port}: {cause}",
			"Opening /dev/infiniband/umad* needs root or the rdma group's access; run as root, or check the udev rule that gives umad devices to a group."),
		noIBPort: d("no-ib-port", report.Skip, "sysfs or libibumad shows no InfiniBand port (no RDMA device, or RoCE/iWARP ports only)",
			"no InfiniBand port: {count} RDMA port(s) found through {source}, none with an InfiniBand link layer", ""),
	}
}

// ibPorts opens the transport and lists the InfiniBand ports, or returns
// the frame's result that ends the check (a skip or an error). A snapshot
// replays what libibumad listed when it was captured; with InfiniBand
// ports there, the MADs needed the live fabric.
func (f *madFrame) ibPorts(env *Env) (mad.Transport, []mad.Port, *Result) {
	// First, and on a snapshot too, so that its replay says what the live
	// run said (the snapshot keeps the link_layer files read here).
	if n, ok := noIBPortInSysfs(env); ok {
		r := f.noIBPort.result("", Slots{"count": strconv.Itoa(n), "source": "sysfs"})
		return nil, nil, &r
	}
	if !env.Host.Live() {
		r := f.snapshot.result("", nil)
		if rec, ok := env.Host.RecordedIBUmad(); ok {
			if rr := f.judgeListing(rec); rr != nil {
				r = *rr
			}
		}
		return nil, nil, &r
	}
	t, err := openMAD()
	if err != nil {
		return nil, nil, f.judgeListing(listingOf(nil, err))
	}
	all, err := t.Ports()
	rec := listingOf(all, err)
	if r := f.judgeListing(rec); r != nil {
		t.Close()
		return nil, nil, r
	}
	var ib []mad.Port
	for _, p := range all {
		if p.InfiniBand() {
			ib = append(ib, p)
		}
	}
	return t, ib, nil
}

// noIBPortInSysfs says the host's RDMA ports, as sysfs lists them, are
// all RoCE or iWARP: libibumad, which lists the same kernel's ports, would
// find no InfiniBand port either, and loading it costs a RoCE host's run
// about 10 ms. Where sysfs lists no port, or cannot be read, libibumad is
// asked; under the ibsim simulator always (it fakes only libibumad's view,
// and the host's sysfs may list RoCE ports of its own). Read once per run
// for the four ib.* checks.
func noIBPortInSysfs(env *Env) (int, bool) {
	l := &env.ibLinks
	l.once.Do(func() {
		if env.Host.Live() && mad.Simulated() {
			return
		}
		if lls, err := env.Host.PortLinkLayers(); err == nil {
			l.ports, l.noIB = noIBLinkLayer(lls)
		}
	})
	return l.ports, l.noIB
}

// ibLinkLayers is noIBPortInSysfs's answer, kept for the run (Env.ibLinks).
type ibLinkLayers struct {
	once  sync.Once
	ports int
	noIB  bool
}

// noIBLinkLayer says there are ports and none is InfiniBand, and counts
// them.
func noIBLinkLayer(lls map[string]string) (int, bool) {
	if len(lls) == 0 {
		return 0, false
	}
	for _, ll := range lls {
		if (mad.Port{LinkLayer: ll}).InfiniBand() {
			return 0, false
		}
	}
	return len(lls), true
}

// listingOf is what libibumad showed: the ports, or why there are none.
func listingOf(ports []mad.Port, err error) *sysfs.IBUmadFacts {
	rec := &sysfs.IBUmadFacts{Ports: []sysfs.IBUmadPort{}}
	var le *mad.LoadError
	switch {
	case errors.As(err, &le):
		rec.LoadError = err.Error()
	case err != nil:
		rec.Error = err.Error()
	}
	for _, p := range ports {
		rec.Ports = append(rec.Ports, sysfs.IBUmadPort{CA: p.CA, Port: p.Num, LinkLayer: p.LinkLayer})
	}
	return rec
}

// judgeListing ends the check when the listing leaves nothing to ask: no
// library, a failing one, no InfiniBand port. nil: there are IB ports.
func (f *madFrame) judgeListing(rec *sysfs.IBUmadFacts) *Result {
	var r Result
	switch {
	case rec.LoadError != "":
		r = f.noLibrary.result("", Slots{"cause": rec.LoadError})
	case rec.Error != "":
		r = f.initFailed.result("", Slots{"cause": rec.Error})
	default:
		for _, p := range rec.Ports {
			if (mad.Port{LinkLayer: p.LinkLayer}).InfiniBand() {
				return nil
			}
		}
		r = f.noIBPort.result("", Slots{"count": strconv.Itoa(len(rec.Ports)), "source": "libibumad"})
	}
	return &r
}

// IBUmadFacts lists libibumad's ports on the live host for a snapshot's
// facts, as the ib.* checks see them, so its replay judges the same.
func IBUmadFacts(ctx context.Context) (*sysfs.IBUmadFacts, error) {
	madMu.Lock()
	defer madMu.Unlock()
	t, err := openMAD()
	if err != nil {
		return listingOf(nil, err), nil
	}
	defer t.Close()
	return listingOf(t.Ports()), nil
}

// madClient is the client the ib.* checks ask through: 200 ms a try, two
// tries, never past the check's deadline.
func madClient(t mad.Transport) *mad.Client { return mad.NewClient(t) }

// callFailed is the port-failed finding when err is libibumad's own
// failure (umad_open_port or umad_send refused: permissions, a port gone),
// not the fabric's answer; ok is false otherwise.
func (f *madFrame) callFailed(unit string, err error) (report.Finding, bool) {
	var le *mad.Error
	if !errors.As(err, &le) {
		return report.Finding{}, false
	}
	return f.portsFailed.At(unit, Slots{"port": unit, "cause": err.Error()}), true
}
