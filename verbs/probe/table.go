package probe

import (
	"encoding/json"
	"fmt"
	"time"
)

// Kind is one level-2 probe, declared once: its name (the ID of the check
// that judges it), what a pass shows, how the child runs it on a port, its
// result when the port's deadline passed before it, and where the parent
// keeps its decoded result. The child's runner, the parent's decoder, the
// check's "expected" line and the docs all read this table; a new probe is
// a row here, its result type and PortResult field, and its check.
type Kind struct {
	Name string
	// Expected is what a healthy port shows: the report's "expected".
	Expected string
	// run runs the probe on the runner's port; blocked is why
	// verbs.resources failed before it ("" when it did not).
	run func(r *runner, blocked string) any
	// outOfTime is the probe's result when it was not run (p says why).
	outOfTime func(p Probe) any
	// decode puts the child's result into its PortResult field.
	decode func(pr *PortResult, raw json.RawMessage) error
}

// Kinds are the level-2 probes in the order the child runs them on each
// port: the catalog's.
var Kinds = []Kind{
	{Resources, "open, PD, MR, CQ and RC QP (UD where the device has no RC) created on every ACTIVE port",
		func(r *runner, _ string) any { return r.resources() },
		func(p Probe) any { return &ResourcesResult{Probe: p} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.Resources, raw) }},
	{QPState, "RESET→INIT→RTR→RTS walked, RESET→RTS refused with EINVAL, ERR→RESET recovers",
		func(r *runner, blocked string) any { return r.qpState(blocked) },
		func(p Probe) any { return &QPStateResult{Probe: p} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.QPState, raw) }},
	{SendPoll, "the SEND completes IBV_WC_SUCCESS with the right byte count and payload",
		func(r *runner, blocked string) any { return r.sendPoll(blocked) },
		func(p Probe) any { return &SendPollResult{Probe: p} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.SendPoll, raw) }},
	{CQOverflow, "an overrun CQ raises IBV_EVENT_CQ_ERR",
		func(r *runner, blocked string) any { return r.cqOverflow(blocked) },
		func(p Probe) any { return &CQOverflowResult{Probe: p, Events: []AsyncEventRecord{}} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.CQOverflow, raw) }},
	{DestroyOrder, "EBUSY for frees out of order, an error completion for a stale lkey, counts back to baseline",
		func(r *runner, blocked string) any { return r.destroyOrder(blocked) },
		func(p Probe) any { return &DestroyOrderResult{Probe: p} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.DestroyOrder, raw) }},
	{UD, "a UD SEND through an address handle arrives with byte_len = payload + 40 and the payload at offset 40; a wrong Q_Key is dropped",
		func(r *runner, blocked string) any { return r.ud(blocked) },
		func(p Probe) any { return &UDResult{Probe: p, PayloadOffset: -1} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.UD, raw) }},
	{GPUMemory, "GPU memory registers with the NIC through peer memory or DMA-BUF, and a SEND into it arrives intact",
		func(r *runner, blocked string) any { return r.gpuMemory(blocked) },
		func(p Probe) any { return &GPUMemoryResult{Probe: p, Paths: []GPUPath{}} },
		func(pr *PortResult, raw json.RawMessage) error { return decodeInto(&pr.GPUMemory, raw) }},
}

// AllProbes lists every probe's name in run order.
var AllProbes = func() []string {
	names := make([]string, len(Kinds))
	for i, k := range Kinds {
		names[i] = k.Name
	}
	return names
}()

// LookupKind finds a probe by name.
func LookupKind(name string) (*Kind, bool) {
	for i := range Kinds {
		if Kinds[i].Name == name {
			return &Kinds[i], true
		}
	}
	return nil, false
}

// decodeInto decodes raw into a new *T at field.
func decodeInto[T any](field **T, raw json.RawMessage) error {
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return err
	}
	*field = v
	return nil
}

// decodeProbe puts the child's result of probe name into pr.
func decodeProbe(pr *PortResult, name string, raw json.RawMessage) error {
	k, ok := LookupKind(name)
	if !ok {
		return fmt.Errorf("result of unknown probe %q", name)
	}
	if err := k.decode(pr, raw); err != nil {
		return fmt.Errorf("decode %s: %w", name, err)
	}
	return nil
}

// outOfTime is the result of a probe that was not run because the port's
// deadline had passed; nil for an unknown probe name.
func outOfTime(name string, port int, timeout time.Duration) any {
	k, ok := LookupKind(name)
	if !ok {
		return nil
	}
	p := newProbe(name)
	p.Skipped = fmt.Sprintf("not run: port %d's deadline (%v for all its probes, --probe-timeout) passed in the probes before it", port, timeout)
	p.OutOfTime = true
	return k.outOfTime(p)
}
