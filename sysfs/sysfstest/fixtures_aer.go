package sysfstest

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The kernel's AER statistics on the HGX H100 node (a ConnectX-7 behind
// each Broadcom PEX89000 switch): every NIC and every bridge above it has
// aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal, the root ports
// also aer_rootport_total_err_*, written as drivers/pci/pcie/aer.c's
// aer_stats_dev_attr prints them. The scenarios are generator functions,
// not registered fixtures: a rise needs two runs over changing files.

// Addresses on mlx5_0's path in the HGX layout (switchPair for bus 0x18).
const (
	AERNIC                   = "0000:18:00.0" // mlx5_0
	AERSwitchDownstreamPort  = "0000:17:00.0"
	AERSwitchUpstreamPort    = "0000:16:00.0"
	AERRootPort              = "0000:15:01.0"
	aerCorrectableTotalLabel = "TOTAL_ERR_COR"
)

// aerCorrectableKinds and aerUncorrectableKinds are the names aer.c
// prints, in bit order (aer_correctable_error_string,
// aer_uncorrectable_error_string of the 5.15 to 6.x kernels).
var (
	aerCorrectableKinds   = []string{"RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF"}
	aerUncorrectableKinds = []string{"Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
		"ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr", "PoisonTLPBlocked"}
)

// AERCounts are one function's AER counts by kind; a file's total (the
// error messages) is the sum of its kinds, one error per message.
type AERCounts struct {
	Correctable, NonFatal, Fatal map[string]uint64
}

// aerFile renders one statistics file: every kind, then the total.
func aerFile(kinds []string, counts map[string]uint64, total string) string {
	var b strings.Builder
	var sum uint64
	for _, k := range kinds {
		fmt.Fprintf(&b, "%s %d\n", k, counts[k])
		sum += counts[k]
	}
	fmt.Fprintf(&b, "%s %d\n", total, sum)
	return b.String()
}

// WriteAER writes a function's AER statistics in dir; a root port also
// gets its totals, which count the messages of the whole hierarchy below
// (here: its own counts and those given in below).
func WriteAER(t *Tree, dir string, c AERCounts, rootPort bool, below ...AERCounts) {
	t.File(path.Join(dir, "aer_dev_correctable"), aerFile(aerCorrectableKinds, c.Correctable, aerCorrectableTotalLabel))
	t.File(path.Join(dir, "aer_dev_nonfatal"), aerFile(aerUncorrectableKinds, c.NonFatal, "TOTAL_ERR_NONFATAL"))
	t.File(path.Join(dir, "aer_dev_fatal"), aerFile(aerUncorrectableKinds, c.Fatal, "TOTAL_ERR_FATAL"))
	if !rootPort {
		return
	}
	var cor, nonfatal, fatal uint64
	for _, x := range append([]AERCounts{c}, below...) {
		cor, nonfatal, fatal = cor+sum(x.Correctable), nonfatal+sum(x.NonFatal), fatal+sum(x.Fatal)
	}
	t.Attr(path.Join(dir, "aer_rootport_total_err_cor"), fmt.Sprint(cor))
	t.Attr(path.Join(dir, "aer_rootport_total_err_nonfatal"), fmt.Sprint(nonfatal))
	t.Attr(path.Join(dir, "aer_rootport_total_err_fatal"), fmt.Sprint(fatal))
}

func sum(m map[string]uint64) uint64 {
	var s uint64
	for _, v := range m {
		s += v
	}
	return s
}

// AERHGX is the HGX H100 node with AER statistics on every NIC and bridge:
// zero, except the counts given by address; the addresses in noAER have no
// files (no AER capability).
func AERHGX(counts map[string]AERCounts, noAER ...string) *Tree {
	h := HGXH100()
	placeBelowBridges(&h)
	t := Build(h)
	skip := map[string]bool{}
	for _, a := range noAER {
		skip[a] = true
	}
	dirs := bridgeDirs(h.GPU.Bridges)
	for _, b := range h.GPU.Bridges {
		if skip[b.Addr] {
			continue
		}
		var below []AERCounts
		for addr, c := range counts {
			if strings.HasPrefix(dirs[addr], dirs[b.Addr]+"/") || nicBelow(h, addr, dirs[b.Addr]) {
				below = append(below, c)
			}
		}
		WriteAER(t, dirs[b.Addr], counts[b.Addr], b.PortType == 4, below...)
	}
	for _, n := range h.NICs {
		if !skip[n.Addr] {
			WriteAER(t, pciPath(n), counts[n.Addr], false)
		}
	}
	return t
}

// nicBelow reports whether the NIC at addr sits below the bridge dir.
func nicBelow(h Host, addr, dir string) bool {
	for _, n := range h.NICs {
		if n.Addr == addr {
			return strings.HasPrefix(pciPath(n), dir+"/")
		}
	}
	return false
}

// AERHealthy: every count zero. pcie.aer passes on the 32 hops of the
// eight NICs; the run exits 0.
func AERHealthy() *Tree { return AERHGX(nil) }

// AERCorrectableRising is the switch's downstream port above mlx5_0 whose
// receiver counts correctable errors, at run step (one hour apart, the
// same boot): step 0 has 8 since boot (10 days: 0.03/h, pcie.aer passes),
// step 1 30 more (RxErr and BadTLP: 30/h, above 10/h: warn), step 2 900
// more (900/h, above 480/h: fail, exit 62), step 3 none more (pass).
func AERCorrectableRising(step int) *Tree {
	rx := []uint64{6, 30, 830, 830}
	bad := []uint64{2, 8, 108, 108}
	step = max(0, min(step, len(rx)-1))
	return AERHGX(map[string]AERCounts{
		AERSwitchDownstreamPort: {Correctable: map[string]uint64{"RxErr": rx[step], "BadTLP": bad[step]}},
	})
}

// AERNonFatalOnNIC: mlx5_0 sent one non-fatal uncorrectable error (a
// completion timeout) since boot. pcie.aer warns on a first run (a count
// since boot, not known to be recent), exit 0; with the state, a later run
// fails when another one follows, and stays failing (still-failing) until
// counters.clean_runs clean runs have passed.
func AERNonFatalOnNIC() *Tree {
	return AERHGX(map[string]AERCounts{AERNIC: {NonFatal: map[string]uint64{"CmpltTO": 1}}})
}

// AERHopWithoutFiles: the switch's upstream port above mlx5_0 has no AER
// statistics (no AER capability). pcie.aer passes, saying that one hop of
// 32 is not judged.
func AERHopWithoutFiles() *Tree { return AERHGX(nil, AERSwitchUpstreamPort) }

// RewriteAER makes the AER statistics of the host written at dir those of
// tr, a tree of the same node: every aer_* file below /sys/devices is
// removed, then tr's are written. Runs over changing counts (and cases
// that differ only in them) rewrite a few files instead of the node's
// thousand.
func RewriteAER(dir string, tr *Tree) error {
	devices := filepath.Join(dir, "sys", "devices")
	err := filepath.WalkDir(devices, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), "aer_") {
			return os.Remove(p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("remove the AER files of %s: %w", dir, err)
	}
	for p, content := range tr.Files {
		if !strings.HasPrefix(path.Base(p), "aer_") {
			continue
		}
		host := filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, "/")))
		if err := os.WriteFile(host, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", host, err)
		}
	}
	return nil
}
