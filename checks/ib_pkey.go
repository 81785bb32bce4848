package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/mad"
	"github.com/rdmadoctor/rdmadoctor/report"
)

func init() {
	register(Check{
		ID: "ib.pkey", Code: 73, Level: 1,
		Title:      "each InfiniBand port's P_Key table, read by SMP, holds the default partition and full membership of the expected ones",
		Privileges: []Need{needUmad},
		Explain: Explanation{
			Judges: "Every InfiniBand port libibumad finds: NodeInfo (PartitionCap) and the P_KeyTable blocks, 32 keys each, through directed-route " +
				"SMPs to the port itself (no SM needed), 200 ms a try, two tries. The default partition (0x7fff, full 0xffff or limited 0x7fff) " +
				"must be present; each P_Key the expectations class names (pkeys = [\"0x8001\"]) must be there with the full-membership bit " +
				"(0x8000); the P_Key of each IPoIB interface on the port (/sys/class/net/*/pkey, where present) must be in the table. " +
				"IPoIB interfaces' mode and MTU are reported.",
			Why: "Partitions are how an InfiniBand fabric isolates tenants and jobs: a port that is a limited member, or not a member, of its " +
				"job's partition cannot talk to its peers (connections time out, IPoIB child interfaces stay silent) while every link looks " +
				"healthy. sysfs' IPoIB pkey always shows the full bit, so only the table itself tells membership.",
		},
		Run: runIBPKey,
	})
}

const pkeySMFix = "Partitions are assigned by the subnet manager (opensm: /etc/opensm/partitions.conf, `{pkey_name}=0x{pkey_hex}, ipoib : ALL=full;` " +
	"or the port GUIDs; UFM: the PKey settings): ask the fabric's administrator to make this port (GUID {guid}) a full member, then " +
	"check with `smpquery pkeys {lid}`."

// ib.pkey's findings.
var (
	pkeyFrame = declareMADFrame("ib.pkey")
	pkeyOK    = declare(Finding{ID: "ib.pkey/ok", Status: report.Pass,
		When:    "the default partition, every expected P_Key as a full member and every IPoIB interface's P_Key are in the table",
		Message: "{port}: P_Key table holds {keys}{expected}"})
	pkeyNoDefault = declare(Finding{ID: "ib.pkey/no-default", Status: report.Fail,
		When:    "the default partition (0x7fff/0xffff) is not in the port's P_Key table",
		Message: "{port}: the default partition 0xffff is not in the P_Key table ({keys})",
		Fix: strings.NewReplacer("{pkey_name}", "Default", "{pkey_hex}", "7fff").Replace(pkeySMFix) +
			" Without the default partition the port cannot reach the SA: path queries and multicast joins fail."})
	pkeyMissing = declare(Finding{ID: "ib.pkey/missing", Status: report.Fail,
		When:    "a P_Key the expectations class names is not in the port's table",
		Message: "{port}: P_Key {pkey} ({cite}) is not in the P_Key table ({keys})", Fix: pkeySMFix})
	pkeyLimited = declare(Finding{ID: "ib.pkey/limited-member", Status: report.Fail,
		When:    "a P_Key the expectations class names is in the table without the full-membership bit",
		Message: "{port}: P_Key {pkey} ({cite}) is only a limited member ({found}): it cannot talk to other limited members",
		Fix:     pkeySMFix})
	pkeyIPoIB = declare(Finding{ID: "ib.pkey/ipoib-not-member", Status: report.Fail,
		When:    "an IPoIB interface on the port uses a P_Key that is not in the port's table",
		Message: "{port}: IPoIB interface {netdev} uses P_Key {pkey}, which is not in the port's P_Key table ({keys})",
		Fix: "The interface's partition is not assigned to this port: either it was created for a partition the SM does not give this " +
			"port (remove it: `ip link delete {netdev}`) or the SM's partition configuration lacks the port. " + pkeySMFix})
	pkeyQueryFailed = declare(Finding{ID: "ib.pkey/query-failed", Status: report.Error,
		When:    "the port's NodeInfo or P_KeyTable could not be read through SMPs (no answer, an error status)",
		Message: "{port}: {cause}",
		Fix:     "SMPs to the port itself are answered by its own subnet management agent: a port that does not answer them has a firmware or driver fault; reload the driver or reset the device."})
)

// maxPKeyBlocks bounds the table read: 32 blocks are 1024 keys, more than
// any HCA's PartitionCap.
const maxPKeyBlocks = 32

func runIBPKey(ctx context.Context, env *Env) Result {
	madMu.Lock()
	defer madMu.Unlock()
	t, ports, done := pkeyFrame.ibPorts(env)
	if done != nil {
		return *done
	}
	defer t.Close()
	c := madClient(t)
	ipoib := readIPoIB(env)
	var fs []report.Finding
	var details []string
	ev := map[string]any{}
	for _, p := range ports {
		keys, err := readPKeys(ctx, c, p)
		if f, ok := pkeyFrame.callFailed(p.Name(), err); ok {
			fs = append(fs, f)
			continue
		}
		if err != nil {
			fs = append(fs, pkeyQueryFailed.At(p.Name(), Slots{"port": p.Name(), "cause": err.Error()}))
			continue
		}
		ev[p.Name()] = pkeyHexes(keys)
		mine := ipoibOf(ipoib, p)
		fs = append(fs, judgePKeys(env, p, keys, mine)...)
		for _, n := range mine {
			details = append(details, fmt.Sprintf("%s: IPoIB %s, P_Key 0x%04x, mode %s, MTU %s", p.Name(), n.name, n.pkey, n.mode, n.mtu))
		}
	}
	r := combineFindings(fs, false)
	r.Details, r.Evidence = details, map[string]any{"pkey_tables": ev}
	return r
}

// readPKeys reads the port's own P_Key table through directed-route SMPs
// (an empty path: the port's own agent answers, with or without an SM),
// as long as its PartitionCap says.
func readPKeys(ctx context.Context, c *mad.Client, p mad.Port) ([]uint16, error) {
	self := mad.Route{Path: []uint8{}}
	ni, err := c.NodeInfo(ctx, p, self)
	if err != nil {
		return nil, err
	}
	n := min(int(ni.PartitionCap), maxPKeyBlocks*mad.PKeysPerBlock)
	if n == 0 {
		n = mad.PKeysPerBlock
	}
	return c.PKeyTable(ctx, p, self, 0, n)
}

// judgePKeys judges one port's table: the default partition, the
// expected keys' full membership, the IPoIB interfaces' keys.
func judgePKeys(env *Env, p mad.Port, keys []uint16, ipoib []ipoibIf) []report.Finding {
	unit := p.Name()
	slots := Slots{"port": unit, "keys": strings.Join(pkeyHexes(keys), ", "), "guid": fmt.Sprintf("0x%016x", p.GUID),
		"lid": fmt.Sprint(p.LID)}
	var fs []report.Finding
	if _, ok := findPKey(keys, 0x7fff); !ok {
		fs = append(fs, pkeyNoDefault.At(unit, slots))
	}
	var named []string
	for _, w := range env.Expect.ExpectedPKeys() {
		want := uint16(w.V)
		s := slots.with("pkey", fmt.Sprintf("0x%04x", want|0x8000), "cite", w.Cite(),
			"pkey_name", fmt.Sprintf("p%04x", want&0x7fff), "pkey_hex", fmt.Sprintf("%04x", want&0x7fff))
		named = append(named, fmt.Sprintf("0x%04x", want|0x8000))
		switch k, ok := findPKey(keys, want); {
		case !ok:
			fs = append(fs, pkeyMissing.At(unit, s))
		case k&0x8000 == 0:
			fs = append(fs, pkeyLimited.At(unit, s.with("found", fmt.Sprintf("0x%04x", k))))
		}
	}
	for _, n := range ipoib {
		if _, ok := findPKey(keys, n.pkey); !ok {
			s := slots.with("netdev", n.name, "pkey", fmt.Sprintf("0x%04x", n.pkey),
				"pkey_name", fmt.Sprintf("p%04x", n.pkey&0x7fff), "pkey_hex", fmt.Sprintf("%04x", n.pkey&0x7fff))
			fs = append(fs, pkeyIPoIB.At(unit, s))
		}
	}
	if len(fs) == 0 {
		expected := ""
		if len(named) > 0 {
			expected = "; full member of " + strings.Join(named, ", ") + " as expected"
		}
		fs = append(fs, pkeyOK.At(unit, slots.with("expected", expected)))
	}
	return fs
}

// findPKey finds the entry of partition want (its low 15 bits), full
// member first.
func findPKey(keys []uint16, want uint16) (uint16, bool) {
	var found uint16
	ok := false
	for _, k := range keys {
		if k&0x7fff == want&0x7fff && k&0x7fff != 0 {
			if k&0x8000 != 0 {
				return k, true
			}
			found, ok = k, true
		}
	}
	return found, ok
}

// pkeyHexes lists the table's valid entries (0x0000 is an empty slot).
func pkeyHexes(keys []uint16) []string {
	var out []string
	for _, k := range keys {
		if k&0x7fff != 0 {
			out = append(out, fmt.Sprintf("0x%04x", k))
		}
	}
	if len(out) == 0 {
		return []string{"no valid entry"}
	}
	return out
}
