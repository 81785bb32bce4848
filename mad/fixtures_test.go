package mad

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The fixtures under testdata are answers of the simulated fabric (ibsim
// running net.2sw2path4hca, opensm as Hca1) to infiniband-diags run as
// Hca2 with -dd: NAME.hex is the MAD the tool dumped, NAME.txt what it
// printed (testdata/capture.sh made them). Each test decodes the MAD with
// this package and compares with the tool's own reading.

// readFixture returns a fixture's MAD bytes and the tool's printed text.
func readFixture(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.Join(strings.Fields(string(raw)), ""))
	if err != nil {
		t.Fatalf("%s.hex: %v", name, err)
	}
	txt, err := os.ReadFile(filepath.Join("testdata", name+".txt"))
	if err != nil {
		t.Fatal(err)
	}
	return b, string(txt)
}

// toolField is the value infiniband-diags printed for a field
// ("LinkWidthActive:......4X" or "\t\tdlid....4").
func toolField(t *testing.T, txt, name string) string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `[:.]+\.*(.*)$`)
	m := re.FindStringSubmatch(txt)
	if m == nil {
		t.Fatalf("the tool printed no %s in:\n%s", name, txt)
	}
	return strings.TrimSpace(m[1])
}

type fieldCheck struct {
	tool string // the field as the tool prints it
	got  func(b []byte) (string, error)
}

func TestFixturesAgreeWithTools(t *testing.T) {
	cases := map[string][]fieldCheck{
		"nodeinfo_lid4":         nodeInfoChecks,
		"nodeinfo_dr_0_1":       nodeInfoChecks,
		"portinfo_lid4":         portInfoChecks,
		"portinfo_dr_0_1_port1": portInfoChecks,
		"nodedesc_lid1":         {{"Node Description", func(b []byte) (string, error) { return DecodeNodeDesc(SMPData(b)) }}},
		"perfquery_lid4_port1": {
			{"PortSelect", pc(func(c PortCounters) any { return c.PortSelect })},
			{"SymbolErrorCounter", pc(func(c PortCounters) any { return c.SymbolErrors })},
			{"LinkDownedCounter", pc(func(c PortCounters) any { return c.LinkDowned })},
			{"PortRcvErrors", pc(func(c PortCounters) any { return c.RcvErrors })},
			{"PortXmitDiscards", pc(func(c PortCounters) any { return c.XmitDiscards })},
			{"PortXmitData", pc(func(c PortCounters) any { return c.XmitData })},
			{"PortRcvData", pc(func(c PortCounters) any { return c.RcvData })},
			{"PortXmitPkts", pc(func(c PortCounters) any { return c.XmitPkts })},
			{"PortRcvPkts", pc(func(c PortCounters) any { return c.RcvPkts })},
		},
		"pathrecord_4_4": {
			{"dgid", pr(func(p PathRecord) any { return p.DGID })},
			{"sgid", pr(func(p PathRecord) any { return p.SGID })},
			{"dlid", pr(func(p PathRecord) any { return p.DLID })},
			{"slid", pr(func(p PathRecord) any { return p.SLID })},
			{"pkey", pr(func(p PathRecord) any { return fmt.Sprintf("0x%04X", p.PKey) })},
			{"sl", pr(func(p PathRecord) any { return fmt.Sprintf("0x%X", p.SL) })},
			{"mtu", pr(func(p PathRecord) any { return fmt.Sprintf("0x%X", p.MTUSelector<<6|p.MTU) })},
			{"rate", pr(func(p PathRecord) any { return fmt.Sprintf("0x%X", p.RateSelector<<6|p.Rate) })},
			{"num_path_revers", pr(func(p PathRecord) any { return fmt.Sprintf("0x%X", b2i(p.Reversible)<<7|int(p.NumbPath)) })},
		},
	}
	for name, checks := range cases {
		t.Run(name, func(t *testing.T) {
			b, txt := readFixture(t, name)
			h, err := DecodeHeader(b)
			if err != nil || h.Method != MethodGetResp && h.Method != MethodGetTableResp || h.StatusCode() != 0 {
				t.Fatalf("header %+v, %v: want a successful response", h, err)
			}
			for _, c := range checks {
				got, err := c.got(b)
				if err != nil {
					t.Errorf("%s: %v", c.tool, err)
					continue
				}
				if want := toolField(t, txt, c.tool); got != want {
					t.Errorf("%s: decoded %q, the tool printed %q", c.tool, got, want)
				}
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pc(f func(PortCounters) any) func([]byte) (string, error) {
	return func(b []byte) (string, error) {
		c, err := DecodePortCounters(PMAData(b))
		return fmt.Sprint(f(c)), err
	}
}

func pr(f func(PathRecord) any) func([]byte) (string, error) {
	return func(b []byte) (string, error) {
		p, err := DecodePathRecord(SAData(b))
		return fmt.Sprint(f(p)), err
	}
}

func ni(f func(NodeInfo) string) func([]byte) (string, error) {
	return func(b []byte) (string, error) {
		n, err := DecodeNodeInfo(SMPData(b))
		return f(n), err
	}
}

func pi(f func(PortInfo) string) func([]byte) (string, error) {
	return func(b []byte) (string, error) {
		p, err := DecodePortInfo(SMPData(b))
		return f(p), err
	}
}

var nodeInfoChecks = []fieldCheck{
	{"NodeType", ni(func(n NodeInfo) string {
		return map[uint8]string{NodeCA: "Channel Adapter", NodeSwitch: "Switch"}[n.NodeType]
	})},
	{"NumPorts", ni(func(n NodeInfo) string { return fmt.Sprint(n.NumPorts) })},
	{"SystemGuid", ni(func(n NodeInfo) string { return fmt.Sprintf("0x%016x", n.SystemGUID) })},
	{"Guid", ni(func(n NodeInfo) string { return fmt.Sprintf("0x%016x", n.NodeGUID) })},
	{"PortGuid", ni(func(n NodeInfo) string { return fmt.Sprintf("0x%016x", n.PortGUID) })},
	{"PartCap", ni(func(n NodeInfo) string { return fmt.Sprint(n.PartitionCap) })},
	{"Revision", ni(func(n NodeInfo) string { return fmt.Sprintf("0x%08x", n.Revision) })},
	{"LocalPort", ni(func(n NodeInfo) string { return fmt.Sprint(n.LocalPortNum) })},
	{"VendorId", ni(func(n NodeInfo) string { return fmt.Sprintf("0x%06x", n.VendorID) })},
}

var portInfoChecks = []fieldCheck{
	{"GidPrefix", pi(func(p PortInfo) string { return fmt.Sprintf("0x%016x", p.GIDPrefix) })},
	{"Lid", pi(func(p PortInfo) string { return fmt.Sprint(p.LID) })},
	{"SMLid", pi(func(p PortInfo) string { return fmt.Sprint(p.MasterSMLID) })},
	{"CapMask", pi(func(p PortInfo) string { return fmt.Sprintf("0x%x", p.CapMask) })},
	{"LocalPort", pi(func(p PortInfo) string { return fmt.Sprint(p.LocalPortNum) })},
	{"LinkWidthEnabled", pi(func(p PortInfo) string { return WidthName(p.LinkWidthEnabled) })},
	{"LinkWidthActive", pi(func(p PortInfo) string { return WidthName(p.LinkWidthActive) })},
	{"LinkState", pi(func(p PortInfo) string { return PortStateName(p.PortState) })},
	{"PhysLinkState", pi(func(p PortInfo) string { return PhysStateName(p.PhysState) })},
	{"LMC", pi(func(p PortInfo) string { return fmt.Sprint(p.LMC) })},
	{"LinkSpeedActive", pi(func(p PortInfo) string {
		return map[uint8]string{1: "2.5 Gbps", 2: "5.0 Gbps", 4: "10.0 Gbps"}[p.LinkSpeedActive]
	})},
	{"NeighborMTU", pi(func(p PortInfo) string { return fmt.Sprint(MTUBytes(p.NeighborMTU)) })},
	{"SMSL", pi(func(p PortInfo) string { return fmt.Sprint(p.MasterSMSL) })},
	{"MtuCap", pi(func(p PortInfo) string { return fmt.Sprint(MTUBytes(p.MTUCap)) })},
	{"CapabilityMask2", pi(func(p PortInfo) string { return fmt.Sprintf("0x%x", p.CapMask2) })},
}

func TestSMInfoFixture(t *testing.T) {
	b, txt := readFixture(t, "sminfo")
	si, err := DecodeSMInfo(SMPData(b))
	if err != nil {
		t.Fatal(err)
	}
	// sminfo prints one line: "sminfo: sm lid 1 sm guid 0x100001,
	// activity count 125 priority 0 state 3 SMINFO_MASTER".
	got := fmt.Sprintf("sm guid 0x%x, activity count %d priority %d state %d SMINFO_%s", si.GUID, si.ActCount, si.Priority, si.State, SMStateName(si.State))
	if !strings.Contains(txt, got) {
		t.Errorf("decoded %q; sminfo printed %q", got, txt)
	}
}

func TestPKeyFixture(t *testing.T) {
	// smpquery reads the table block by block; the last answer it
	// dumped is the block its attribute modifier names.
	b, txt := readFixture(t, "pkeys_lid4")
	h, err := DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := DecodePKeyBlock(SMPData(b))
	if err != nil {
		t.Fatal(err)
	}
	var row []string
	for _, k := range keys[:8] {
		row = append(row, fmt.Sprintf("0x%04x", k))
	}
	if want := fmt.Sprintf("%4d: ", h.AttrMod*PKeysPerBlock) + strings.Join(row, " "); !strings.Contains(txt, want+"\n") {
		t.Errorf("decoded %q; smpquery printed\n%s", want, txt)
	}
}

func TestDirectedRouteFixture(t *testing.T) {
	b, _ := readFixture(t, "nodeinfo_dr_0_1")
	d, err := DecodeDR(b)
	if err != nil {
		t.Fatal(err)
	}
	// The answer came back (D bit), one hop out through port 1, with the
	// permissive DrSLID/DrDLID smpquery -D sends.
	if !d.Direction || d.HopCount != 1 || fmt.Sprint(d.InitialPath) != "[1]" || d.DrSLID != PermissiveLID || d.DrDLID != PermissiveLID {
		t.Errorf("directed-route fields %+v", d)
	}
}

func TestSMInfoRecordFixture(t *testing.T) {
	b, txt := readFixture(t, "sminforecords")
	recs, err := DecodeSMInfoRecords(b)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %+v, %v: want the one SM", recs, err)
	}
	r := recs[0]
	for tool, got := range map[string]string{
		"LID": fmt.Sprint(r.LID), "GUID": fmt.Sprintf("0x%016x", r.SMInfo.GUID), "ActCount": fmt.Sprint(r.SMInfo.ActCount),
		"Priority": fmt.Sprint(r.SMInfo.Priority), "SMState": fmt.Sprint(r.SMInfo.State),
	} {
		if want := toolField(t, txt, tool); got != want {
			t.Errorf("%s: decoded %q, saquery printed %q", tool, got, want)
		}
	}
	req := NewSMInfoRecordQuery(1)
	if h, _ := DecodeHeader(req); h.Method != MethodGetTable || h.AttrID != AttrSMInfoRecord || h.ClassVersion != 2 {
		t.Errorf("request header %+v", h)
	}
	short := append([]byte(nil), b...)
	short[saHdrOff+9] = 1 // an attribute offset of 8 bytes cannot hold a record
	if _, err := DecodeSMInfoRecords(short); err == nil {
		t.Error("an attribute offset shorter than the record was accepted")
	}
}

// TestNodeRecordFixture: opensm's whole NodeRecord table as ibsim passes
// it (one MAD, no RMPP: the first record whole, the second cut at 256
// bytes), decoded field by field against saquery's dump of the same MAD.
func TestNodeRecordFixture(t *testing.T) {
	b, txt := readFixture(t, "noderecords")
	recs, err := DecodeNodeRecords(b)
	if err != nil || len(recs) != 1 {
		t.Fatalf("records %+v, %v: want the one whole record", recs, err)
	}
	r := recs[0]
	for tool, got := range map[string]string{
		"lid": fmt.Sprint(r.LID), "num_ports": fmt.Sprint(r.Info.NumPorts),
		"node_type":       map[uint8]string{NodeCA: "Channel Adapter", NodeSwitch: "Switch"}[r.Info.NodeType],
		"sys_guid":        fmt.Sprintf("0x%016x", r.Info.SystemGUID),
		"node_guid":       fmt.Sprintf("0x%016x", r.Info.NodeGUID),
		"port_guid":       fmt.Sprintf("0x%016x", r.Info.PortGUID),
		"partition_cap":   fmt.Sprintf("0x%x", r.Info.PartitionCap),
		"revision":        fmt.Sprintf("0x%X", r.Info.Revision),
		"port_num":        fmt.Sprint(r.Info.LocalPortNum),
		"vendor_id":       fmt.Sprintf("0x%x", r.Info.VendorID),
		"NodeDescription": r.Desc,
	} {
		if want := toolField(t, txt, tool); got != want {
			t.Errorf("%s: decoded %q, saquery printed %q", tool, got, want)
		}
	}
	req, err := NewNodeRecordQuery("Hca4", 1)
	if h, _ := DecodeHeader(req); err != nil || h.Method != MethodGetTable || h.AttrID != AttrNodeRecord || h.ClassVersion != 2 {
		t.Errorf("request header %+v, %v", h, err)
	}
	if mask, _ := SAComponentMask(req); mask != NRCompNodeDesc || string(req[saDataOff+44:saDataOff+48]) != "Hca4" {
		t.Errorf("request component mask 0x%x, record %q", mask, req[saDataOff:saDataOff+nodeRecordLen])
	}
	short := append([]byte(nil), b...)
	short[saHdrOff+9] = 13 // 104 bytes cannot hold a 108-byte record
	if _, err := DecodeNodeRecords(short); err == nil {
		t.Error("an attribute offset shorter than the record was accepted")
	}
}
