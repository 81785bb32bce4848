package checks

import (
	"context"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// InventoryIBFabric is what inventory shows of the InfiniBand fabric: on
// the live host asked now through management datagrams (bounded as the
// ib.* checks are), in a snapshot what its capture recorded. The string
// says why there is nothing: no libibumad, no InfiniBand port, a root that
// did not record the fabric.
func InventoryIBFabric(ctx context.Context, h *sysfs.Host) ([]report.IBFabricPort, string) {
	var f *sysfs.IBFabricFacts
	if h.Live() {
		var err error
		if f, err = IBFabricFacts(ctx); err != nil {
			return nil, err.Error()
		}
	} else {
		facts := h.Facts()
		switch {
		case facts != nil && facts.IBFabric != nil:
			f = facts.IBFabric
		case facts != nil && facts.Unavailable["ib_fabric"] != "":
			return nil, "the capture could not ask the fabric: " + facts.Unavailable["ib_fabric"]
		default:
			return nil, "the root records no fabric (no ib_fabric in " + sysfs.FactsFile + "): management datagrams go only from the live host"
		}
	}
	out := make([]report.IBFabricPort, 0, len(f.Ports))
	for _, p := range f.Ports {
		out = append(out, reportFabricPort(p))
	}
	return out, ""
}

// reportFabricPort turns one port's facts into the inventory's form.
func reportFabricPort(p sysfs.IBFabricPort) report.IBFabricPort {
	r := report.IBFabricPort{CA: p.CA, Port: p.Port, State: p.State, PhysState: p.PhysState, LID: p.LID, SMLID: p.SMLID,
		PortGUID: p.PortGUID, SubnetPrefix: p.SubnetPrefix}
	if p.SM != nil {
		sm := report.IBSMAnswer(*p.SM)
		r.SM = &sm
	}
	if p.SMs != nil {
		l := &report.IBSMList{SMs: make([]report.IBSM, 0, len(p.SMs.SMs)), Error: p.SMs.Error}
		for _, sm := range p.SMs.SMs {
			l.SMs = append(l.SMs, report.IBSM(sm))
		}
		r.SMs = l
	}
	if p.Neighbour != nil {
		n := report.IBNeighbour(*p.Neighbour)
		r.Neighbour = &n
	}
	if p.PKeys != nil {
		t := &report.IBPKeyTable{Keys: make([]report.IBPKey, 0, len(p.PKeys.Keys)), Error: p.PKeys.Error}
		for _, k := range p.PKeys.Keys {
			t.Keys = append(t.Keys, report.IBPKey(k))
		}
		r.PKeys = t
	}
	return r
}
