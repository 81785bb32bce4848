package sysfs

import (
	"errors"
	"reflect"
	"testing"
)

// fakeLive answers every live fact without a kernel.
type fakeLive struct{ dcbErr error }

func (fakeLive) Netdevs() ([]Netdev, error) {
	return []Netdev{{Name: "lo", Index: 1}, {Name: "eth0", Index: 2, MAC: "52:54:00:12:34:56"}}, nil
}
func (f fakeLive) DCB(ifname string) (DCB, error) {
	if ifname == "lo" && f.dcbErr != nil {
		return DCB{}, f.dcbErr
	}
	return DCB{Err: ErrNoDCB}, nil
}
func (fakeLive) RDMASystem() (RDMASystem, error)        { return RDMASystem{NetnsMode: "shared"}, nil }
func (fakeLive) RDMAResources() ([]RDMAResource, error) { return []RDMAResource{}, nil }

// TestGatherFactsFillsEveryField fails when a field is added to Facts
// without its live answer in GatherFacts (a snapshot would lack it).
func TestGatherFactsFillsEveryField(t *testing.T) {
	h := &Host{rootDir: "/", live: fakeLive{}}
	f := h.GatherFacts(map[string]Access{"/dev/infiniband": AccessList, "/dev/infiniband/uverbs0": AccessStat, "/sys/class": AccessList})
	v := reflect.ValueOf(*f)
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		switch name {
		case "Libibverbs", "IBUmad", "IBFabric": // made by the verbs child and libibumad (above sysfs), added by the caller
			continue
		case "ReadErrors": // added by the capture from the reads that failed
			continue
		case "Unavailable":
			if len(f.Unavailable) > 0 {
				t.Errorf("unavailable with a source that answers everything: %v", f.Unavailable)
			}
			continue
		}
		if v.Field(i).IsZero() {
			t.Errorf("Facts.%s is not gathered on a live host", name)
		}
	}
	if f.DevNodes == nil || !reflect.DeepEqual(f.DevNodes.Dirs, []string{"/dev/infiniband"}) {
		t.Errorf("dev_nodes dirs %+v, want [/dev/infiniband]", f.DevNodes)
	}
}

func TestGatherFactsSaysWhatIsMissing(t *testing.T) {
	h := &Host{rootDir: "/", live: fakeLive{dcbErr: errors.New("boom")}}
	f := h.GatherFacts(nil)
	if f.Unavailable["dcb:lo"] != "boom" || f.DevNodes != nil {
		t.Errorf("unavailable %v, dev_nodes %+v", f.Unavailable, f.DevNodes)
	}
	fix, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fix.Close()
	if g := fix.GatherFacts(nil); g.Unavailable["netdevs"] == "" || g.Schema != FactsSchema {
		t.Errorf("a root without facts file: %+v", g)
	}
}
