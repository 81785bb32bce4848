package checks

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// askFabric runs IBFabricFacts against fabric f (nil: openMAD fails with
// openErr).
func askFabric(t *testing.T, f *fakeFabric, openErr error) (*sysfs.IBFabricFacts, error) {
	t.Helper()
	saved := openMAD
	t.Cleanup(func() { openMAD = saved })
	openMAD = func() (mad.Transport, error) {
		if openErr != nil {
			return nil, openErr
		}
		return f, nil
	}
	return IBFabricFacts(context.Background())
}

// TestIBFabricFacts: the SM, the SA's SMs, the neighbour and the P_Key
// table are written down as the fabric answered them.
func TestIBFabricFacts(t *testing.T) {
	roce := mad.Port{CA: "mlx5_1", Num: 1, LinkLayer: "Ethernet", State: 4, PhysState: 5}
	f := &fakeFabric{ports: []mad.Port{ibPort(1, 5), roce}, smState: mad.SMMaster, smActs: []uint32{5},
		pkeys: []uint16{0xffff, 0x0001, 0x8001, 0x0000}, nState: 4, nWidth: 2, nPort: 17}
	got, err := askFabric(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &sysfs.IBFabricFacts{Ports: []sysfs.IBFabricPort{{
		CA: "mlx5_0", Port: 1, State: "Active", PhysState: "LinkUp", LID: 7, SMLID: 1,
		PortGUID: "0002:c903:0000:1111", SubnetPrefix: "fe80::/64",
		SM: &sysfs.IBSMAnswer{LID: 1, GUID: "0002:c903:00a1:b2c3", Priority: 14, State: "MASTER", NodeDesc: "ufm-sm-01 HCA-1"},
		SMs: &sysfs.IBSMList{SMs: []sysfs.IBSM{{LID: 1, GUID: "0000:0000:0000:0000", State: "MASTER"},
			{LID: 9, GUID: "0000:0000:0000:0000", State: "STANDBY"}}},
		Neighbour: &sysfs.IBNeighbour{NodeType: "switch", NodeGUID: "0002:c903:00be:ef00", NodeDesc: "leaf-03 SX6036", Port: 17,
			State: "Active", PhysState: "LinkUp", Width: "4X", Speed: "SDR"},
		PKeys: &sysfs.IBPKeyTable{Keys: []sysfs.IBPKey{{PKey: "0xffff", FullMember: true}, {PKey: "0x0001"}, {PKey: "0x8001", FullMember: true}}},
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("facts (-want +got):\n%s", diff)
	}
}

// TestIBFabricFactsParts: a part that cannot be asked carries its error and
// the others stand; a port whose link is down asks neither SM nor
// neighbour.
func TestIBFabricFactsParts(t *testing.T) {
	f := &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smState: mad.SMMaster, smActs: []uint32{5}, pkeys: []uint16{0xffff},
		nState: 4, nWidth: 2, saSilent: true}
	got, err := askFabric(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := got.Ports[0]
	if p.SMs == nil || p.SMs.Error == "" || len(p.SMs.SMs) != 0 || p.SM.GUID == "" || p.Neighbour.NodeGUID == "" || len(p.PKeys.Keys) != 1 {
		t.Errorf("a silent SA: want its error and every other part, got %+v %+v", p.SMs, p)
	}

	down, err := askFabric(t, &fakeFabric{ports: []mad.Port{ibPort(1, 2)}, pkeys: []uint16{0xffff}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p = down.Ports[0]
	if p.SM.Error == "" || p.SMs != nil || p.Neighbour.Error == "" || p.PKeys.Error != "" || len(p.PKeys.Keys) != 1 {
		t.Errorf("link down: want SM and neighbour not asked, the P_Key table read; got %+v %+v %+v", p.SM, p.Neighbour, p.PKeys)
	}

	silent, err := askFabric(t, &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, silent: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p = silent.Ports[0]
	for part, e := range map[string]string{"sm": p.SM.Error, "sms": p.SMs.Error, "neighbour": p.Neighbour.Error, "pkeys": p.PKeys.Error} {
		if e == "" {
			t.Errorf("nothing answers: %s has no error", part)
		}
	}
}

// TestIBFabricFactsRefused: libibumad refusing the port (no rights to
// /dev/infiniband/umad*) is said once per part, each not asked again.
func TestIBFabricFactsRefused(t *testing.T) {
	f := &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, callErr: &mad.Error{Call: "umad_open_port(mlx5_0, 1)", Errno: syscall.EACCES}}
	got, err := askFabric(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := got.Ports[0]
	for part, e := range map[string]string{"sm": p.SM.Error, "neighbour": p.Neighbour.Error, "pkeys": p.PKeys.Error} {
		if !strings.Contains(e, "umad_open_port(mlx5_0, 1)") {
			t.Errorf("%s: error %q does not name libibumad's refusal", part, e)
		}
	}
	if p.SMs != nil || p.SM.GUID != "" {
		t.Errorf("asked on after libibumad refused the port: %+v %+v", p.SMs, p.SM)
	}
}

// TestIBFabricFactsNothingToAsk: no libibumad, a failing one, a RoCE-only
// host: an error that says why, no facts.
func TestIBFabricFactsNothingToAsk(t *testing.T) {
	for name, tc := range map[string]struct {
		f    *fakeFabric
		open error
		want error
	}{
		"no libibumad":    {open: &mad.LoadError{Path: "libibumad.so.3", Loader: "not found"}},
		"umad_init":       {f: &fakeFabric{portsErr: errors.New("umad_init: -1")}},
		"RoCE ports only": {f: &fakeFabric{ports: []mad.Port{{CA: "mlx5_0", Num: 1, LinkLayer: "Ethernet"}}}, want: ErrNoIBPort},
	} {
		got, err := askFabric(t, tc.f, tc.open)
		if err == nil || got != nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: facts %v, error %v (want %v)", name, got, err, tc.want)
		}
		var le *mad.LoadError
		if name == "no libibumad" && !errors.As(err, &le) {
			t.Errorf("no libibumad: the loader's error is lost: %v", err)
		}
	}
}

// TestReportFabricPort: the inventory's form keeps every part of the facts.
func TestReportFabricPort(t *testing.T) {
	got, err := askFabric(t, &fakeFabric{ports: []mad.Port{ibPort(1, 5)}, smState: mad.SMMaster, smActs: []uint32{5},
		pkeys: []uint16{0xffff}, nState: 4, nWidth: 2, nPort: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ports := []report.IBFabricPort{reportFabricPort(got.Ports[0])}
	if ports[0].SM.NodeDesc != "ufm-sm-01 HCA-1" || ports[0].Neighbour.Port != 3 || ports[0].PKeys.Keys[0].PKey != "0xffff" ||
		len(ports[0].SMs.SMs) != 2 {
		t.Errorf("inventory's form lost a part: %+v", ports[0])
	}
}
