package checks

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// fakeFabric answers MADs as a port's own agent, an SM and the P_Key table
// would, from its fields: the ib.* checks' judging is tested through the
// same Client and codecs as on a host, without libibumad.
type fakeFabric struct {
	ports    []mad.Port
	smState  uint8
	smActs   []uint32 // ActCount per SMInfo answer, the last repeated
	pkeys    []uint16
	silent   bool   // no answer to anything
	status   uint16 // an error status on every answer
	callErr  error  // Exchange fails with this (libibumad's own failure)
	smInfos  int
	portsErr error
	// The second SM, at LID 9: its state as it answers SMInfo (0:
	// STANDBY), silent, and its state in the SA's SMInfoRecord (0: STANDBY).
	sm2State, sm2Record uint8
	sm2Silent           bool
	// The neighbour one hop out (ib.far_end).
	nState, nWidth uint8 // its port's PortState and LinkWidthActive
	ownInit        bool  // this port answers Initialize (no SM has configured it)
	nEnabled       uint8 // the neighbour's LinkWidthEnabled; 0: 1X|4X
	nPort          uint8
	nCounters      mad.PortCounters // the neighbour's PMA PortCounters (error counters)
	pmaStatus      uint16
	// The SA's PathRecord (ib.path): its MTU and rate codes, or a status.
	pathMTU, pathRate uint8
	saStatus          uint16
	saSilent          bool
	// The SA's NodeRecord table (ib.path's peers by name), the status it
	// answers a NodeRecord query with, and the component masks asked.
	nodes    []mad.NodeRecord
	nrStatus uint16
	nrMasks  []uint64
}

func (f *fakeFabric) Ports() ([]mad.Port, error) { return f.ports, f.portsErr }
func (f *fakeFabric) Close() error               { return nil }

func (f *fakeFabric) Exchange(p mad.Port, dest mad.Dest, req []byte, timeout time.Duration) ([]byte, error) {
	if f.callErr != nil {
		return nil, f.callErr
	}
	if f.silent {
		return nil, fmt.Errorf("fake: %w", mad.ErrTimeout)
	}
	h, err := mad.DecodeHeader(req)
	if err != nil {
		return nil, err
	}
	resp := append([]byte(nil), req...)
	resp[3] |= 0x80
	if h.Class == mad.ClassSubnDR {
		resp[4] |= 0x80
	}
	binary.BigEndian.PutUint16(resp[4:], binary.BigEndian.Uint16(resp[4:])|f.status)
	if h.Class == mad.ClassSA && f.saSilent {
		return nil, fmt.Errorf("fake SA: %w", mad.ErrTimeout)
	}
	if h.Class == mad.ClassSA && h.AttrID == mad.AttrSMInfoRecord {
		// Two SMs, 32 bytes a record (attribute offset 4): this master
		// at LID 1, a standby at LID 9.
		binary.BigEndian.PutUint16(resp[44:], 4)
		for i, sm := range []struct {
			lid   uint16
			state uint8
		}{{1, mad.SMMaster}, {9, orState(f.sm2Record)}} {
			r := resp[56+32*i:]
			binary.BigEndian.PutUint16(r, sm.lid)
			r[4+20] = sm.state
		}
		return resp, nil
	}
	if h.Class == mad.ClassSA && h.AttrID == mad.AttrNodeRecord {
		return f.nodeRecords(req, resp), nil
	}
	if h.Class == mad.ClassSA {
		binary.BigEndian.PutUint16(resp[4:], f.saStatus)
		d := resp[56:]
		copy(d[8:24], req[56+8:56+24]) // DGID as asked
		binary.BigEndian.PutUint16(d[40:], 7)
		d[54], d[55] = 2<<6|f.pathMTU, 2<<6|f.pathRate
		return resp, nil
	}
	if h.Class == mad.ClassPerf {
		binary.BigEndian.PutUint16(resp[4:], f.pmaStatus)
		putPortCounters(resp[64:], f.nCounters)
		return resp, nil
	}
	if h.Class == mad.ClassSubnLID && dest.LID == 9 {
		if f.sm2Silent {
			return nil, fmt.Errorf("fake SM at LID 9: %w", mad.ErrTimeout)
		}
		f.fillSecondSM(h, resp[64:128])
		return resp, nil
	}
	if h.Class == mad.ClassSubnDR && req[7] > 0 {
		f.fillNeighbour(h, resp[64:128])
		return resp, nil
	}
	f.fill(h, resp[64:128])
	return resp, nil
}

// nodeRecords answers a NodeRecord GetTable as opensm does: with the
// NodeDescription component, only the nodes whose 64 bytes equal the
// request's; 112 bytes a record (attribute offset 14 words).
func (f *fakeFabric) nodeRecords(req, resp []byte) []byte {
	binary.BigEndian.PutUint16(resp[4:], f.nrStatus)
	mask, _ := mad.SAComponentMask(req)
	f.nrMasks = append(f.nrMasks, mask)
	binary.BigEndian.PutUint16(resp[44:], 14)
	want := string(req[56+44 : 56+108])
	resp = resp[:56]
	for i, n := range f.nodes {
		var d [64]byte
		copy(d[:], n.Desc)
		if mask&mad.NRCompNodeDesc != 0 && string(d[:]) != want {
			continue
		}
		r := make([]byte, 112)
		binary.BigEndian.PutUint16(r, uint16(20+i))
		r[4+2] = mad.NodeCA
		binary.BigEndian.PutUint64(r[4+20:], n.Info.PortGUID)
		r[4+36] = n.Info.LocalPortNum
		copy(r[44:], d[:])
		resp = append(resp, r...)
	}
	return append(resp, make([]byte, 112)...) // a zero LID ends the table
}

// orState is an SM state, STANDBY for 0.
func orState(s uint8) uint8 {
	if s == 0 {
		return mad.SMStandby
	}
	return s
}

// fillSecondSM answers as the second SM (LID 9, sm-02).
func (f *fakeFabric) fillSecondSM(h mad.Header, d []byte) {
	switch h.AttrID {
	case mad.AttrSMInfo:
		binary.BigEndian.PutUint64(d[0:], 0x0002c90300c0ffee)
		binary.BigEndian.PutUint32(d[16:], 42)
		d[20] = 1<<4 | orState(f.sm2State)
	case mad.AttrNodeDesc:
		copy(d, "sm-02 HCA-1")
	}
}

// putPortCounters writes the error counters of PortCounters (IBTA vol 1
// 16.1.3.5, table 247) as a PMA would.
func putPortCounters(d []byte, c mad.PortCounters) {
	binary.BigEndian.PutUint16(d[4:], c.SymbolErrors)
	d[6], d[7] = c.LinkErrorRecovery, c.LinkDowned
	binary.BigEndian.PutUint16(d[8:], c.RcvErrors)
	binary.BigEndian.PutUint16(d[14:], c.XmitDiscards)
	d[19] = c.LocalLinkIntegrityErrors<<4 | c.ExcessiveBufferOverrunErrors&0x0f
}

// fillNeighbour answers as the switch one hop out (leaf-03, port nPort).
func (f *fakeFabric) fillNeighbour(h mad.Header, d []byte) {
	switch h.AttrID {
	case mad.AttrNodeInfo:
		d[0], d[1], d[2], d[3] = 1, 1, mad.NodeSwitch, 36
		binary.BigEndian.PutUint64(d[12:], 0x0002c90300beef00)
		d[36] = f.nPort
	case mad.AttrNodeDesc:
		copy(d, "leaf-03 SX6036")
	case mad.AttrPortInfo:
		f.portInfo(d, 9, f.nState, f.nWidth)
		if f.nEnabled != 0 {
			d[29] = f.nEnabled
		}
	}
}

// portInfo writes a PortInfo (14.2.5.6): LID, 1X|4X enabled and
// supported, the active width, SDR, the state, LinkUp.
func (f *fakeFabric) portInfo(d []byte, lid uint16, state, width uint8) {
	binary.BigEndian.PutUint16(d[16:], lid)
	d[29], d[30], d[31] = 3, 3, width
	d[32] = 1<<4 | state
	d[33] = 5 << 4
	d[35] = 1<<4 | 1
	d[36] = 4 << 4 // NeighborMTU 2048
}

// fill writes the attribute the request asks for (IBTA vol 1 14.2.5).
func (f *fakeFabric) fill(h mad.Header, d []byte) {
	switch h.AttrID {
	case mad.AttrSMInfo:
		binary.BigEndian.PutUint64(d[0:], 0x0002c90300a1b2c3)
		act := f.smActs[min(f.smInfos, len(f.smActs)-1)]
		f.smInfos++
		binary.BigEndian.PutUint32(d[16:], act)
		d[20] = 14<<4 | f.smState
	case mad.AttrNodeDesc:
		copy(d, "ufm-sm-01 HCA-1")
	case mad.AttrNodeInfo:
		d[0], d[1], d[2], d[3] = 1, 1, mad.NodeCA, 1
		binary.BigEndian.PutUint16(d[28:], uint16(len(f.pkeys)))
	case mad.AttrPortInfo:
		state := uint8(4)
		if f.ownInit {
			state = 2
		}
		f.portInfo(d, 7, state, 2)
	case mad.AttrPKeyTable:
		block := int(h.AttrMod & 0xffff)
		for i := 0; i < mad.PKeysPerBlock; i++ {
			if k := block*mad.PKeysPerBlock + i; k < len(f.pkeys) {
				binary.BigEndian.PutUint16(d[2*i:], f.pkeys[k])
			}
		}
	}
}

func ibPort(smLID uint16, phys uint32) mad.Port {
	return mad.Port{CA: "mlx5_0", Num: 1, LinkLayer: "InfiniBand", State: 4, PhysState: phys, LID: 7, SMLID: smLID, Rate: 10,
		GIDPrefix: 0xfe80 << 48, GUID: 0x0002c90300001111}
}

// runIB runs check id against fabric f (nil: openMAD fails with openErr)
// on a live host, with the expectations class body (may be "").
func runIB(t *testing.T, id string, f *fakeFabric, openErr error, class string) Result {
	t.Helper()
	return runIBWith(t, id, f, openErr, class, Options{CheckTimeout: 5 * time.Second})
}

// runIBWith is runIB with the run's options (a kept state).
func runIBWith(t *testing.T, id string, f *fakeFabric, openErr error, class string, opts Options) Result {
	t.Helper()
	saved := openMAD
	t.Cleanup(func() { openMAD = saved })
	openMAD = func() (mad.Transport, error) {
		if openErr != nil {
			return nil, openErr
		}
		return f, nil
	}
	env := NewEnv(sysfs.OpenLive(), opts)
	if class != "" {
		file, err := expect.Parse("expect.conf", strings.NewReader("[class c]\nhosts = *\n"+class))
		if err != nil {
			t.Fatal(err)
		}
		if env.Expect, err = file.Match("any"); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := Lookup(id)
	ctx, cancel := context.WithTimeout(context.Background(), env.Opts.CheckTimeout)
	defer cancel()
	r := c.Run(ctx, env)
	recordResult(id, r)
	return r
}

type ibRef struct{ ID, Unit string }

func ibRefs(fs []report.Finding) []ibRef {
	var out []ibRef
	for _, f := range fs {
		out = append(out, ibRef{f.ID, f.Unit})
	}
	return out
}

func TestIBSMFindings(t *testing.T) {
	healthy := func() *fakeFabric {
		return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smState: mad.SMMaster, smActs: []uint32{100, 103}, pkeys: []uint16{0xffff}}
	}
	edit := func(e func(f *fakeFabric)) *fakeFabric { f := healthy(); e(f); return f }
	for _, tc := range []struct {
		name string
		f    *fakeFabric
		want string
	}{
		{"master, ActCount moving", healthy(), "ib.sm/master"},
		{"ActCount frozen", edit(func(f *fakeFabric) { f.smActs = []uint32{100} }), "ib.sm/act-count-frozen"},
		{"SM LID 0 with the link up", edit(func(f *fakeFabric) { f.ports = []mad.Port{ibPort(0, 5)} }), "ib.sm/no-sm"},
		{"SM LID 0, link polling", edit(func(f *fakeFabric) { f.ports = []mad.Port{ibPort(0, 2)} }), "ib.sm/link-down"},
		{"SM silent", edit(func(f *fakeFabric) { f.silent = true }), "ib.sm/sm-silent"},
		{"SM standby", edit(func(f *fakeFabric) { f.smState = mad.SMStandby }), "ib.sm/not-master"},
		{"a second SM answers MASTER", edit(func(f *fakeFabric) { f.sm2State = mad.SMMaster }), "ib.sm/two-masters"},
		{"the SA lists a second master that does not answer", edit(func(f *fakeFabric) { f.sm2Record, f.sm2Silent = mad.SMMaster, true }), "ib.sm/two-masters"},
		{"the SA's record says MASTER, the SM itself STANDBY", edit(func(f *fakeFabric) { f.sm2Record = mad.SMMaster }), "ib.sm/master"},
		{"bad status", edit(func(f *fakeFabric) { f.status = 7 << 2 }), "ib.sm/bad-answer"},
		{"umad_send refused", edit(func(f *fakeFabric) {
			f.callErr = &mad.Error{Call: "umad_open_port(mlx5_0, 1)", Errno: syscall.EACCES}
		}), "ib.sm/port-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIB(t, "ib.sm", tc.f, nil, "")
			if diff := cmp.Diff([]ibRef{{tc.want, "mlx5_0/1"}}, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}

// TestIBSMWording: the remedy names the SM by GUID and node description
// and never tells a host that is no SM host to start one.
func TestIBSMWording(t *testing.T) {
	r := runIB(t, "ib.sm", &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smState: mad.SMStandby, smActs: []uint32{1}}, nil, "")
	for _, want := range []string{"0x0002c90300a1b2c3", `"ufm-sm-01 HCA-1"`, "STANDBY", "the SA knows 2 SM(s):", "LID 9 GUID"} {
		if !strings.Contains(r.Summary+r.Remedy+strings.Join(r.Details, "\n"), want) {
			t.Errorf("summary/remedy/details lack %q:\n%s\n%s\n%s", want, r.Summary, r.Remedy, r.Details)
		}
	}
	r = runIB(t, "ib.sm", &fakeFabric{ports: []mad.Port{ibPort(0, 5)}}, nil, "")
	if strings.Contains(strings.ToLower(r.Remedy), "start opensm") {
		t.Errorf("remedy says to start opensm: %s", r.Remedy)
	}
}

// TestIBSMTwoMastersWording: both masters are named by LID, GUID and node
// description, and the remedy keeps one master instead of starting one.
func TestIBSMTwoMastersWording(t *testing.T) {
	f := &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smState: mad.SMMaster, smActs: []uint32{1, 2}, sm2State: mad.SMMaster}
	r := runIB(t, "ib.sm", f, nil, "")
	want := `mlx5_0/1: 2 SMs are MASTER — LID 1 GUID 0x0002c90300a1b2c3 "ufm-sm-01 HCA-1"; LID 9 GUID 0x0002c90300c0ffee "sm-02 HCA-1": ` +
		"a split subnet or SMs fighting over it"
	if r.Status != report.Fail || r.Summary != want {
		t.Errorf("%s: %s\nwant %s", r.Status, r.Summary, want)
	}
	if rem := strings.ToLower(r.Remedy); strings.Contains(rem, "start opensm") || !strings.Contains(rem, "keep one master") ||
		!strings.Contains(rem, "lower its priority") {
		t.Errorf("remedy: %s", r.Remedy)
	}
}

// TestIBSMTimeoutBounded: an SM that never answers costs the tries'
// timeouts, not a hang, and the check's deadline bounds it.
func TestIBSMTimeoutBounded(t *testing.T) {
	f := &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, silent: true}
	start := time.Now()
	r := runIB(t, "ib.sm", f, nil, "")
	if r.Status != report.Fail || time.Since(start) > 2*time.Second {
		t.Errorf("status %s after %s", r.Status, time.Since(start))
	}
	c := mad.NewClient(f)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	time.Sleep(2 * time.Millisecond)
	if _, err := c.SMInfo(ctx, f.ports[0], mad.Route{LID: 1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("past the deadline: %v", err)
	}
}

func TestIBPKeyFindings(t *testing.T) {
	table := func(keys ...uint16) *fakeFabric {
		return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smActs: []uint32{1}, pkeys: append(keys, make([]uint16, 40)...)}
	}
	for _, tc := range []struct {
		name, class string
		f           *fakeFabric
		want        []ibRef
	}{
		{"default only", "", table(0xffff), []ibRef{{"ib.pkey/ok", "mlx5_0/1"}}},
		{"expected key, full member", `pkeys = ["0x8001"]` + "\n", table(0xffff, 0x8001), []ibRef{{"ib.pkey/ok", "mlx5_0/1"}}},
		{"expected key missing", `pkeys = ["0x8001", "0x8002"]` + "\n", table(0xffff, 0x8002),
			[]ibRef{{"ib.pkey/missing", "mlx5_0/1"}}},
		{"expected key limited", "pkeys = 0x8001\n", table(0xffff, 0x0001), []ibRef{{"ib.pkey/limited-member", "mlx5_0/1"}}},
		{"no default partition", "", table(0x8001), []ibRef{{"ib.pkey/no-default", "mlx5_0/1"}}},
		{"table unreadable", "", func() *fakeFabric { f := table(0xffff); f.silent = true; return f }(),
			[]ibRef{{"ib.pkey/query-failed", "mlx5_0/1"}}},
		{"umad refused", "", func() *fakeFabric {
			f := table(0xffff)
			f.callErr = &mad.Error{Call: "umad_open_port(mlx5_0, 1)", Errno: syscall.EACCES}
			return f
		}(), []ibRef{{"ib.pkey/port-failed", "mlx5_0/1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIB(t, "ib.pkey", tc.f, nil, tc.class)
			if diff := cmp.Diff(tc.want, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}

// TestIBPKeyReadsWholeTable: a key past the first 32-entry block is found.
func TestIBPKeyReadsWholeTable(t *testing.T) {
	keys := make([]uint16, 64)
	keys[0], keys[40] = 0xffff, 0x8123
	r := runIB(t, "ib.pkey", &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, pkeys: keys}, nil, "pkeys = 0x8123\n")
	if r.Status != report.Pass {
		t.Errorf("%s: %s", r.Status, r.Summary)
	}
}

// TestIPoIBMembership: an IPoIB interface on the port whose P_Key is not
// in the table fails; its mode and MTU are read from sysfs.
func TestIPoIBMembership(t *testing.T) {
	root := t.TempDir()
	for name, attrs := range map[string]map[string]string{
		"ib0.8005": {"pkey": "0x8005", "mode": "datagram", "mtu": "2044",
			"address": "00:00:10:87:fe:80:00:00:00:00:00:00:00:02:c9:03:00:00:11:11"},
		"ib0": {"pkey": "0xffff", "mode": "connected", "mtu": "65520",
			"address": "00:00:10:86:fe:80:00:00:00:00:00:00:00:02:c9:03:00:00:11:11"},
		"eth0": {"mtu": "1500", "address": "52:54:00:12:34:56"},
	} {
		dir := filepath.Join(root, "sys/class/net", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for k, v := range attrs {
			if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	env := NewEnv(h, Options{})
	p := ibPort(1, 5)
	mine := ipoibOf(readIPoIB(env), p)
	if len(mine) != 2 {
		t.Fatalf("IPoIB interfaces on the port: %+v", mine)
	}
	fs := judgePKeys(env, p, []uint16{0xffff, 0x8001}, mine)
	if diff := cmp.Diff([]ibRef{{"ib.pkey/ipoib-not-member", "mlx5_0/1"}}, ibRefs(fs)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	if !strings.Contains(fs[0].Message, "ib0.8005") || !strings.Contains(fs[0].Message, "0x8005") {
		t.Errorf("message %q", fs[0].Message)
	}
}

// TestIBFrame: the hosts the ib.* checks cannot ask skip or err, and say why.
func TestIBFrame(t *testing.T) {
	roce := &fakeFabric{ports: []mad.Port{{CA: "mlx5_0", Num: 1, LinkLayer: "Ethernet"}}}
	for _, id := range []string{"ib.sm", "ib.pkey", "ib.far_end", "ib.path"} {
		for _, tc := range []struct {
			name    string
			f       *fakeFabric
			openErr error
			want    string
		}{
			{"no libibumad", nil, &mad.LoadError{Path: "libibumad.so.3", Loader: "cannot open shared object file"}, id + "/no-libibumad"},
			{"umad_init fails", nil, &mad.Error{Call: "umad_init", Errno: syscall.ENODEV}, id + "/umad-failed"},
			{"port listing fails", &fakeFabric{portsErr: &mad.Error{Call: "umad_get_cas_names", Errno: syscall.EIO}}, nil, id + "/umad-failed"},
			{"RoCE only", roce, nil, id + "/no-ib-port"},
		} {
			t.Run(id+" "+tc.name, func(t *testing.T) {
				r := runIB(t, id, tc.f, tc.openErr, "")
				if diff := cmp.Diff([]ibRef{{tc.want, ""}}, ibRefs(r.Findings)); diff != "" {
					t.Errorf("findings (-want +got):\n%s", diff)
				}
			})
		}
		t.Run(id+" snapshot", func(t *testing.T) {
			h, err := sysfs.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c, _ := Lookup(id)
			r := c.Run(context.Background(), NewEnv(h, Options{}))
			if diff := cmp.Diff([]ibRef{{id + "/snapshot", ""}}, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIBFarEndFindings(t *testing.T) {
	healthy := func() *fakeFabric {
		return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smActs: []uint32{1}, nState: 4, nWidth: 2, nPort: 17}
	}
	edit := func(e func(f *fakeFabric)) *fakeFabric { f := healthy(); e(f); return f }
	const pinned = "switch = \"leaf-03*\"\nswitch_port = 17\n"
	for _, tc := range []struct {
		name, class string
		f           *fakeFabric
		want        []string
	}{
		{"as expected", pinned, healthy(), []string{"ib.far_end/ok"}},
		{"link not up", "", edit(func(f *fakeFabric) { f.ports = []mad.Port{ibPort(1, 2)} }), []string{"ib.far_end/link-down"}},
		{"neighbour silent", "", edit(func(f *fakeFabric) { f.silent = true }), []string{"ib.far_end/unreachable"}},
		{"umad refused", "", edit(func(f *fakeFabric) {
			f.callErr = &mad.Error{Call: "umad_send", Errno: syscall.EPERM}
		}), []string{"ib.far_end/port-failed"}},
		{"switch side not active", "", edit(func(f *fakeFabric) { f.nState = 2 }), []string{"ib.far_end/neighbour-port-down"}},
		{"both sides wait for an SM", "", edit(func(f *fakeFabric) { f.nState, f.ownInit = 2, true }), []string{"ib.far_end/awaiting-sm"}},
		{"trained 1X", "", edit(func(f *fakeFabric) { f.nWidth = 1 }), []string{"ib.far_end/width-degraded"}},
		{"switch port enables 1X", "", edit(func(f *fakeFabric) { f.nWidth, f.nEnabled = 1, 1 }), []string{"ib.far_end/width-limited"}},
		{"another switch", "switch = \"spine-*\"\n", healthy(), []string{"ib.far_end/wrong-neighbour"}},
		{"another port", "switch_port = 18\n", healthy(), []string{"ib.far_end/wrong-port"}},
		{"switch counts symbol errors", "", edit(func(f *fakeFabric) { f.nCounters.SymbolErrors = 5 }), []string{"ib.far_end/neighbour-errors"}},
		{"PMA refuses", "", edit(func(f *fakeFabric) { f.pmaStatus = 3 << 2 }), []string{"ib.far_end/counters-unread"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIB(t, "ib.far_end", tc.f, nil, tc.class)
			var want []ibRef
			for _, id := range tc.want {
				want = append(want, ibRef{id, "mlx5_0/1"})
			}
			if diff := cmp.Diff(want, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}

func TestIBPathFindings(t *testing.T) {
	healthy := func() *fakeFabric {
		return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smActs: []uint32{1}, pathMTU: 4, pathRate: 3}
	}
	edit := func(e func(f *fakeFabric)) *fakeFabric { f := healthy(); e(f); return f }
	u := "mlx5_0/1"
	for _, tc := range []struct {
		name, class string
		f           *fakeFabric
		want        []ibRef
	}{
		{"self", "", healthy(), []ibRef{{"ib.path/resolved", u}}},
		{"self and a peer", "ib_peers = 0x2c90300009999\n", healthy(), []ibRef{{"ib.path/resolved", u}, {"ib.path/resolved", u}}},
		{"no SM", "", edit(func(f *fakeFabric) { f.ports = []mad.Port{ibPort(0, 5)} }), []ibRef{{"ib.path/no-sm", u}}},
		{"SA silent", "", edit(func(f *fakeFabric) { f.saSilent = true }), []ibRef{{"ib.path/sa-silent", u}}},
		{"no record", "", edit(func(f *fakeFabric) { f.saStatus = 3 << 8 }), []ibRef{{"ib.path/no-path", u}}},
		{"MTU 1024 on the path", "", edit(func(f *fakeFabric) { f.pathMTU = 3 }), []ibRef{{"ib.path/mtu-below-port", u}}},
		{"rate below the port", "", edit(func(f *fakeFabric) { f.pathRate = 2 }), []ibRef{{"ib.path/rate-below-port", u}}},
		{"DR status error", "", edit(func(f *fakeFabric) { f.status = 7 << 2 }), []ibRef{{"ib.path/bad-answer", u}}},
		{"umad refused", "", edit(func(f *fakeFabric) {
			f.callErr = &mad.Error{Call: "umad_register", Errno: syscall.EPERM}
		}), []ibRef{{"ib.path/port-failed", u}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runIB(t, "ib.path", tc.f, nil, tc.class)
			if diff := cmp.Diff(tc.want, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
		})
	}
}

// TestIBReplay: a snapshot that recorded libibumad's listing replays its
// verdict; one with InfiniBand ports, or none recorded, skips as a snapshot.
func TestIBReplay(t *testing.T) {
	for _, tc := range []struct {
		name, facts, want string
	}{
		{"no IB port", `{"ports": [{"ca": "mlx5_0", "port": 1, "link_layer": "Ethernet"}]}`, "ib.sm/no-ib-port"},
		{"no library", `{"load_error": "dlopen libibumad.so.3: not found", "ports": []}`, "ib.sm/no-libibumad"},
		{"failing library", `{"error": "umad_init: ENODEV", "ports": []}`, "ib.sm/umad-failed"},
		{"IB port", `{"ports": [{"ca": "mlx5_0", "port": 1, "link_layer": "InfiniBand"}]}`, "ib.sm/snapshot"},
		{"nothing recorded", "", "ib.sm/snapshot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			facts := `{"schema": "` + sysfs.FactsSchema + `"}`
			if tc.facts != "" {
				facts = `{"schema": "` + sysfs.FactsSchema + `", "ib_umad": ` + tc.facts + `}`
			}
			if err := os.WriteFile(filepath.Join(root, sysfs.FactsFile), []byte(facts), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := sysfs.Open(root)
			if err != nil {
				t.Fatal(err)
			}
			c, _ := Lookup("ib.sm")
			r := c.Run(context.Background(), NewEnv(h, Options{}))
			if diff := cmp.Diff([]ibRef{{tc.want, ""}}, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIBUmadFacts: a capture records the ports libibumad lists, or why
// there are none, as the checks see them.
func TestIBUmadFacts(t *testing.T) {
	saved := openMAD
	t.Cleanup(func() { openMAD = saved })
	openMAD = func() (mad.Transport, error) { return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}}, nil }
	got, err := IBUmadFacts(context.Background())
	want := &sysfs.IBUmadFacts{Ports: []sysfs.IBUmadPort{{CA: "mlx5_0", Port: 1, LinkLayer: "InfiniBand"}}}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("facts %+v, %v; want %+v", got, err, want)
	}
	openMAD = func() (mad.Transport, error) { return nil, &mad.LoadError{Path: "libibumad.so.3", Loader: "not found"} }
	if got, _ := IBUmadFacts(context.Background()); got.LoadError == "" || len(got.Ports) != 0 {
		t.Errorf("without libibumad: %+v", got)
	}
}

// The ports sysfs lists decide whether libibumad is worth loading: ports
// all RoCE or iWARP skip; any InfiniBand port, or none listed (the ibsim
// simulator fakes only libibumad's view), ask libibumad.
func TestNoIBPortInSysfs(t *testing.T) {
	for _, tc := range []struct {
		host string
		n    int
		noIB bool
	}{
		{"cx5-roce-healthy", 2, true},
		{"cxgb4-iwarp", 1, true},
		{"cx6-ib-healthy", 0, false},
		{"", 0, false}, // no RDMA class at all
	} {
		dir := t.TempDir()
		if tc.host != "" {
			dir = filepath.Join("..", "testdata", "hosts", tc.host)
		}
		h, err := sysfs.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		lls, err := h.PortLinkLayers()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v", tc.host, err)
		}
		n, noIB := noIBLinkLayer(lls)
		if noIB != tc.noIB || (noIB && n != tc.n) {
			t.Errorf("%s: %d port(s), none InfiniBand %v; want %d, %v (%v)", tc.host, n, noIB, tc.n, tc.noIB, lls)
		}
	}
}

// TestIBPathPeersByName: ib_peers names nodes by description; the SA's
// NodeRecords resolve them (a literal with the NodeDescription component,
// a glob from the whole table) and every port matched is asked a path.
func TestIBPathPeersByName(t *testing.T) {
	node := func(desc string, port uint8, guid uint64) mad.NodeRecord {
		return mad.NodeRecord{Desc: desc, Info: mad.NodeInfo{LocalPortNum: port, PortGUID: guid}}
	}
	fabric := func() *fakeFabric {
		return &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smActs: []uint32{1}, pathMTU: 4, pathRate: 3, nodes: []mad.NodeRecord{
			node("Hca4", 1, 0x40001), node("storage-01 HCA-1", 1, 0x50001), node("storage-01 HCA-1", 2, 0x50002),
			node("storage-02 HCA-1", 1, 0x60001), node("Switch1", 0, 0x70000)}}
	}
	u := "mlx5_0/1"
	for _, tc := range []struct {
		name, class string
		edit        func(f *fakeFabric)
		want        []ibRef
		mask        uint64 // the component mask of the NodeRecord query
		has         string
	}{
		{"a literal description", `ib_peers = "Hca4"` + "\n", nil,
			[]ibRef{{"ib.path/resolved", u}, {"ib.path/resolved", u}}, mad.NRCompNodeDesc,
			`path to peer "Hca4" port 1 (fe80::4:1, GUID 0x0000000000040001) resolves`},
		{"a glob: every port of every node", `ib_peers = "storage-0*"` + "\n", nil,
			[]ibRef{{"ib.path/resolved", u}, {"ib.path/resolved", u}, {"ib.path/resolved", u}, {"ib.path/resolved", u}}, 0,
			`peer "storage-01 HCA-1" port 2`},
		{"no such node", `ib_peers = ["Hca9", "0x2c90300009999"]` + "\n", nil,
			[]ibRef{{"ib.path/unknown-peer", u}, {"ib.path/resolved", u}, {"ib.path/resolved", u}}, mad.NRCompNodeDesc,
			`mlx5_0/1: no node named "Hca9" in the subnet (the SA's NodeRecords; expect.conf:3 ib_peers = Hca9)`},
		{"ERR_NO_RECORDS", `ib_peers = "Hca4"` + "\n", func(f *fakeFabric) { f.nrStatus = 3 << 8 },
			[]ibRef{{"ib.path/unknown-peer", u}, {"ib.path/resolved", u}}, mad.NRCompNodeDesc, `no node named "Hca4"`},
		{"the SA refuses", `ib_peers = "Hca4"` + "\n", func(f *fakeFabric) { f.nrStatus = 7 << 8 },
			[]ibRef{{"ib.path/peer-lookup-failed", u}, {"ib.path/resolved", u}}, mad.NRCompNodeDesc,
			`the node named "Hca4" could not be looked up: NodeRecord GetTable to the SA at LID 1 for "Hca4"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fabric()
			if tc.edit != nil {
				tc.edit(f)
			}
			r := runIB(t, "ib.path", f, nil, tc.class)
			if diff := cmp.Diff(tc.want, ibRefs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
			}
			if len(f.nrMasks) != 1 || f.nrMasks[0] != tc.mask {
				t.Errorf("NodeRecord queries with masks %x, want one with 0x%x", f.nrMasks, tc.mask)
			}
			var msgs []string
			for _, fd := range r.Findings {
				msgs = append(msgs, fd.Message)
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.has) {
				t.Errorf("findings lack %q:\n%s", tc.has, strings.Join(msgs, "\n"))
			}
		})
	}
}
