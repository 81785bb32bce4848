package probe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// runUD probes fake0 in mode with t's target options: a RoCE mode gets a
// sysfs root whose GID 0 is RoCE v2, as the kernel labels it.
func runUD(t *testing.T, mode string, target Target, probes ...string) *PortResult {
	t.Helper()
	opts := Options{Library: withFake(t, mode), SysfsRoot: t.TempDir(), Probes: probes}
	types := filepath.Join(opts.SysfsRoot, "class/infiniband/fake0/ports/1/gid_attrs/types")
	if err := os.MkdirAll(types, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(types, "0"), []byte("RoCE v2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	target.Device, target.Ports = "fake0", []int{1}
	res := Run(context.Background(), testExe(t), []Target{target}, opts)
	d := res.Devices["fake0"]
	if d.Failure != nil {
		t.Fatalf("failure %+v\n%s", d.Failure, d.Stderr)
	}
	pr := d.Port(1)
	if pr == nil || pr.UD == nil {
		t.Fatalf("no probe.ud result: %+v", d)
	}
	return pr
}

// On InfiniBand the handle carries the port's LID and no GRH: the byte
// count still includes the 40-byte GRH area, and the payload sits after it.
func TestFakeUDInfiniBand(t *testing.T) {
	u := runUD(t, "loop", Target{}, Resources, UD).UD
	if !u.OK() {
		t.Fatalf("probe.ud: %+v", u.Failed())
	}
	if u.Addressing == nil || u.Addressing.DLID != 1 || u.Addressing.GID != "" {
		t.Errorf("addressing %+v", u.Addressing)
	}
	if u.ByteLen != uint32(u.Payload+40) || u.PayloadOffset != 40 || u.GRHFlag || u.SrcQP != u.SenderQPN {
		t.Errorf("byte_len %d for %d bytes, offset %d, grh %v, src_qp %#x sender %#x", u.ByteLen, u.Payload, u.PayloadOffset, u.GRHFlag, u.SrcQP, u.SenderQPN)
	}
	if u.WrongQKey != "dropped" || u.QKeyViolations == nil || u.QKeyViolations.Delta != 1 {
		t.Errorf("wrong Q_Key %q, violations %+v", u.WrongQKey, u.QKeyViolations)
	}
	if u.NoGRHRoom != "IBV_WC_LOC_LEN_ERR" || u.Latency.N == 0 {
		t.Errorf("no GRH room %q, %d round trips", u.NoGRHRoom, u.Latency.N)
	}
	// The payload is capped by the active MTU (1024 on the fake port).
	if u.Payload != 1024 {
		t.Errorf("payload %d", u.Payload)
	}
}

// On RoCE the handle is global (GRH with the RoCE v2 GID) and the receive
// completion carries IBV_WC_GRH.
func TestFakeUDRoCE(t *testing.T) {
	u := runUD(t, "roce", Target{}, Resources, UD).UD
	if !u.OK() {
		t.Fatalf("probe.ud: %+v", u.Failed())
	}
	a := u.Addressing
	if a == nil || a.LinkLayer != "Ethernet" || a.GIDIndex != 0 || a.GIDType != verbs.GIDTypeRoCEv2.String() || !u.GRHFlag {
		t.Errorf("addressing %+v, grh %v", a, u.GRHFlag)
	}
}

// Each way a provider can get UD wrong fails the step that sees it.
func TestFakeUDFaults(t *testing.T) {
	for _, c := range []struct {
		mode, step, text string
	}{
		{"ud-offset0", "payload at offset 40", "offset 0"},
		{"ud-norecv", "ibv_poll_cq B (receive completion)", "no completion"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			u := runUD(t, c.mode, Target{}, UD).UD
			st := u.Failed()
			if st == nil || st.Name != c.step || !strings.Contains(st.Error, c.text) || st.Want != "" {
				t.Fatalf("failed step %+v", st)
			}
			if c.mode == "ud-norecv" && st.Cause != udNoDelivery {
				t.Errorf("cause %q", st.Cause)
			}
			if c.mode == "ud-offset0" && u.PayloadOffset != 0 {
				t.Errorf("payload offset %d", u.PayloadOffset)
			}
		})
	}
}

// The classic mistakes that the stack fails to catch, and a RoCE receive
// without IBV_WC_GRH, are observations with a Want, after a data path that
// worked.
func TestFakeUDMistakesNotCaught(t *testing.T) {
	u := runUD(t, "ud-bytelen", Target{}, UD).UD
	st := u.Failed()
	if st == nil || st.Want != wantByteLen || !strings.Contains(st.Error, "byte_len 1024 counts the 1024-byte payload alone") || u.PayloadOffset != 40 {
		t.Fatalf("byte_len: step %+v", st)
	}
	u = runUD(t, "ud-nogrh", Target{}, UD).UD
	st = u.Failed()
	if st == nil || st.Name != "IBV_WC_GRH set (RoCE always carries a GRH)" || st.Want != wantGRHFlag || !strings.Contains(st.Error, "lack IBV_WC_GRH") {
		t.Fatalf("GRH flag: step %+v", st)
	}
	u = runUD(t, "ud-qkey-ignored", Target{}, UD).UD
	st = u.Failed()
	if st == nil || st.Name != "SEND with the wrong Q_Key dropped" || st.Want != wantDropped || u.WrongQKey != "delivered" {
		t.Fatalf("wrong Q_Key: %q, step %+v", u.WrongQKey, st)
	}
	u = runUD(t, "ud-silent-len", Target{}, UD).UD
	st = u.Failed()
	if st == nil || st.Want != wantLenError || u.NoGRHRoom != "no completion" || u.WrongQKey != "dropped" {
		t.Fatalf("no GRH room: %q, step %+v", u.NoGRHRoom, st)
	}
}

// EFA has no RC: verbs.resources creates a UD QP, the RC probes skip with
// the parent's reason, and probe.ud addresses the port by its GID.
func TestFakeEFA(t *testing.T) {
	const why = "EFA has no RC queue pairs (UD and SRD only); probe.ud probes it"
	pr := runUD(t, "efa", Target{NoRC: why})
	if !pr.Resources.OK() || pr.Resources.QPType != "UD" || pr.Resources.NoRC != why {
		t.Fatalf("verbs.resources: %s %+v", pr.Resources.QPType, pr.Resources.Failed())
	}
	for _, p := range []*Probe{&pr.QPState.Probe, &pr.SendPoll.Probe, &pr.CQOverflow.Probe, &pr.DestroyOrder.Probe} {
		if p.Skipped != why || len(p.Steps) != 0 {
			t.Errorf("%s: skipped %q", p.Name, p.Skipped)
		}
	}
	u := pr.UD
	if !u.OK() || u.Addressing == nil || u.Addressing.GIDIndex != 0 || !strings.HasPrefix(u.Addressing.GID, "fe00:") {
		t.Fatalf("probe.ud on EFA: %+v, addressing %+v", u.Failed(), u.Addressing)
	}
}

// A device the parent marks without UD skips probe.ud with that reason.
func TestFakeNoUDSkips(t *testing.T) {
	u := runUD(t, "roce", Target{NoUD: "qedr offers applications RC queue pairs only"}, UD).UD
	if u.Skipped != "qedr offers applications RC queue pairs only" || len(u.Steps) != 0 {
		t.Fatalf("skipped %q, steps %+v", u.Skipped, u.Steps)
	}
	u = runUD(t, "ud-refused", Target{}, UD).UD
	if !strings.Contains(u.Skipped, "EOPNOTSUPP") {
		t.Fatalf("a provider refusing UD QPs: skipped %q, failed %+v", u.Skipped, u.Failed())
	}
}

// Without the parent's word the fake EFA refuses the RC QP, as EFA does.
func TestFakeEFARefusesRC(t *testing.T) {
	pr := runUD(t, "efa", Target{}, Resources, UD)
	st := pr.Resources.Failed()
	// EOPNOTSUPP is ENOTSUP (95) on Linux.
	if st == nil || st.Name != "ibv_create_qp RC" || st.Errno != 95 {
		t.Fatalf("verbs.resources: %+v", st)
	}
	if !strings.HasPrefix(pr.UD.Skipped, "blocked by verbs.resources") {
		t.Errorf("probe.ud: %q", pr.UD.Skipped)
	}
}
