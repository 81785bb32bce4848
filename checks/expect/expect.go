// Package expect reads, matches and writes rdmadoctor's expectations file:
// what each class of node must look like, so that a deviation from the
// class (a firmware, a PCIe link, a port rate that differs from the file)
// is a failure naming the line that demanded it. Like NHC's configuration,
// host-name globs decide which class a node belongs to.
//
// The format, version 1:
//
//	# rdmadoctor expectations, format 1
//	[class cx5-roce]
//	hosts = cx5-node* cx5-spare-??        # space-separated globs on the host name; required
//	devices = 2                           # RDMA devices the node must have
//	skip = counters.errors probe.cq_overflow   # checks not run on this class
//	fail_on_warn = ["port.state"]         # these checks' warnings are problems here
//	waive = ["counters.errors/symbol-errors"]   # findings not counted here …
//	waive_reason = "known-bad optics, RMA open" # … and why (required with waive)
//	roce_tc = 106                         # traffic class RoCE applications use (DSCP<<2); 0..255
//	lossless = true                       # PFC/trust/ECN faults fail instead of warn
//	gpu_nic_max_distance = NODE           # a GPU's RDMA NIC no farther (PIX PXB PHB NODE SYS)
//	mlx5_*.fw = ["16.35.*", "16.36.2000"] # device keys: <device glob>.<key>
//	mlx5_*.pcie_speed = 8.0 GT/s PCIe
//	mlx5_*.pcie_width = 16
//	mlx5_*.ports = 1
//	mlx5_*/1.link_layer = Ethernet        # port keys: <device glob>/<port number or *>.<key>
//	mlx5_*/1.rate = 100                   # Gb/s, the number sysfs rate shows
//	mlx5_*/1.width = 4X
//	mlx5_*/1.mtu = 9000                   # the netdev MTU (RoCE) / active MTU (IB)
//	mlx5_*/1.pfc_priority = 3
//	mlx5_1/1.unused = true                # a port unused on purpose: never judged
//
// Rules: '#' starts a comment, on its own line or after a value; blank lines
// are ignored; every key belongs to a [class NAME] section. For the same
// unit (class, device glob, or device glob and port) and key a later line
// wins over an earlier one, and Device and Port merge every rule whose glob
// matches, the later line winning, so a specific rule may follow a general
// one. Globs use path.Match syntax. A string key (fw, pcie_speed,
// link_layer, width) takes a literal, a glob, or a list of them
// (["16.35.*", "16.36.2000"]); fw is matched by the version part of fw_ver,
// without the PSID mlx5 adds in parentheses. Unknown keys, bad values, bad globs,
// duplicate class names, lines over 4 KiB and files over 1 MiB are errors
// that name FILE:LINE and the key; Parse reports every faulty line, not
// only the first. A rule that matches no device or port of the host is
// found by Class.Unmatched.
//
// The package knows nothing of the checks: whether a skip names a real
// check is for the caller to decide (File.CheckIDs).
package expect

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Value is one expected value and the line that set it, so that a finding
// can cite the line an operator wrote.
type Value[T any] struct {
	V    T
	Key  string // as written: "mlx5_*/1.rate"
	Line int
	File string
	// Comment is the text after '#' on the value's line; Write writes it back.
	Comment string
}

// Cite names the value for a finding: "expect.conf:12 mlx5_*/1.rate = 100"
// (the file's base name: the path is in the report's header). A nil value
// cites as "".
func (v *Value[T]) Cite() string {
	if v == nil {
		return ""
	}
	where := filepath.Base(v.File)
	if v.File == "" {
		where = "expectations"
	}
	return fmt.Sprintf("%s:%d %s = %s", where, v.Line, v.Key, formatValue(v.V))
}

// formatValue prints a value as the file spells it.
func formatValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case string:
		return x
	case Pattern:
		return x.String()
	}
	return fmt.Sprint(v)
}

// File is a parsed expectations file.
type File struct {
	Name    string // the path it was read from, as given
	Classes []*Class
}

// Class is one [class NAME] section: the nodes it applies to and what they
// must look like.
type Class struct {
	Name  string
	Line  int // the line of its [class NAME] header
	File  string
	Hosts []string // globs on the host name

	Devices *Value[int]
	Skip    []*Value[string] // check IDs not run on this class
	// FailOnWarnIDs are the checks whose warnings count as problems on
	// this class (fail_on_warn), as --fail-on warn does for every check.
	FailOnWarnIDs []*Value[string]
	// Waive are finding IDs not counted on this class (waive), for the
	// reason WaiveReason gives (waive_reason, required with waive).
	Waive       []*Value[string]
	WaiveReason *Value[string]
	RoCETC      *Value[int]
	Lossless    *Value[bool]
	// GPUNICMaxDistance is the farthest a GPU's RDMA NIC may be on this
	// class, in the classes of `nvidia-smi topo -m` (PIX, PXB, PHB, NODE,
	// SYS): gpu.nic_affinity fails a pair beyond it (gpu_nic_max_distance).
	GPUNICMaxDistance *Value[string]
	// PKeys are the InfiniBand partitions (P_Keys, 15 bits, as written)
	// every IB port of the class must be a full member of (pkeys).
	PKeys []*Value[PKey]
	// Switch is the node description the InfiniBand neighbour of every IB
	// port must match (a glob or a list, switch); SwitchPort the port
	// number on it (switch_port). ib.far_end judges them.
	Switch *Value[Pattern]
	// IBPeers are the ports ib.path resolves a path to (ib_peers): port
	// GUIDs, or nodes by description.
	IBPeers    []*Value[IBPeer]
	SwitchPort *Value[int]
	// Counters are counters.errors' thresholds (counters.go).
	Counters CounterRules

	DeviceRules []*DeviceRule // in file order
	PortRules   []*PortRule   // in file order
	// Candidates are lines Write comments out for the operator to
	// uncomment (SetCandidate); Parse never fills them.
	Candidates []Candidate

	lastLine int // the last line Set numbered (generated classes)
}

// DeviceRule is the device keys of one device glob.
type DeviceRule struct {
	Glob string
	DeviceExpect
}

// PortRule is the port keys of one device glob and port.
type PortRule struct {
	Glob string
	Port int // 0: every port ("*")
	PortExpect
}

// DeviceExpect is what one RDMA device must show; a nil field is not judged.
type DeviceExpect struct {
	FW        *Value[Pattern] // matched by MatchFW: the version part of fw_ver
	PCIeSpeed *Value[Pattern] // as sysfs prints it: "8.0 GT/s PCIe"; MatchPCIeSpeed
	PCIeWidth *Value[int]
	Ports     *Value[int]
}

// PortExpect is what one port must show; a nil field is not judged.
type PortExpect struct {
	LinkLayer   *Value[Pattern] // InfiniBand, Ethernet or Unknown
	Rate        *Value[float64]
	Width       *Value[Pattern] // 1X 2X 4X 8X 12X
	MTU         *Value[int]
	PFCPriority *Value[int]
	Unused      *Value[bool]
	// The plug-in module's vendor, part number and firmware, matched by
	// link.optics against the module's EEPROM.
	ModuleVendor   *Value[Pattern]
	ModulePart     *Value[Pattern]
	ModuleFirmware *Value[Pattern]
}

// NewClass starts a class for a program to fill with Set, refusing a name
// or host glob the parser would refuse.
func NewClass(name string, hosts []string) (*Class, error) {
	if !classNameRE().MatchString(name) {
		return nil, fmt.Errorf("class name %q: want letters, digits, '.', '_' or '-', at most 64, starting with a letter or digit", clip(name))
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("class %s: no host glob", name)
	}
	for _, g := range hosts {
		if err := checkGlob(g); err != nil {
			return nil, fmt.Errorf("host glob %q: %v", clip(g), err)
		}
	}
	return &Class{Name: name, Hosts: append([]string(nil), hosts...)}, nil
}

// Device merges every device rule whose glob matches name; a later line
// wins. A nil class expects nothing.
func (c *Class) Device(name string) DeviceExpect {
	var out DeviceExpect
	if c == nil {
		return out
	}
	for _, r := range c.DeviceRules {
		if !globMatch(r.Glob, name) {
			continue
		}
		out.FW = later(out.FW, r.FW)
		out.PCIeSpeed = later(out.PCIeSpeed, r.PCIeSpeed)
		out.PCIeWidth = later(out.PCIeWidth, r.PCIeWidth)
		out.Ports = later(out.Ports, r.Ports)
	}
	return out
}

// Port merges every port rule whose glob matches dev and whose port is
// port or "*"; a later line wins. A nil class expects nothing.
func (c *Class) Port(dev string, port int) PortExpect {
	var out PortExpect
	if c == nil {
		return out
	}
	for _, r := range c.PortRules {
		if (r.Port != 0 && r.Port != port) || !globMatch(r.Glob, dev) {
			continue
		}
		out.LinkLayer = later(out.LinkLayer, r.LinkLayer)
		out.Rate = later(out.Rate, r.Rate)
		out.Width = later(out.Width, r.Width)
		out.MTU = later(out.MTU, r.MTU)
		out.PFCPriority = later(out.PFCPriority, r.PFCPriority)
		out.Unused = later(out.Unused, r.Unused)
		out.ModuleVendor = later(out.ModuleVendor, r.ModuleVendor)
		out.ModulePart = later(out.ModulePart, r.ModulePart)
		out.ModuleFirmware = later(out.ModuleFirmware, r.ModuleFirmware)
	}
	return out
}

// ExpectedDevices is the class's devices key, nil when unset or on a nil
// class; ExpectedRoCETC and ExpectedLossless are the same for roce_tc and
// lossless, so a check reads a class key without a nil test.
func (c *Class) ExpectedDevices() *Value[int] {
	if c == nil {
		return nil
	}
	return c.Devices
}

// PKey is an InfiniBand partition key as the pkeys key names it; it
// prints as the file should spell it, "0x8001".
type PKey uint16

func (k PKey) String() string { return fmt.Sprintf("0x%04x", uint16(k)) }

// ExpectedPKeys is the class's pkeys key (see ExpectedDevices).
func (c *Class) ExpectedPKeys() []*Value[PKey] {
	if c == nil {
		return nil
	}
	return c.PKeys
}

// PortGUID is an InfiniBand port GUID as the ib_peers key names it; it
// prints as "0x0002c90300a1b2c3".
type PortGUID uint64

func (g PortGUID) String() string { return fmt.Sprintf("0x%016x", uint64(g)) }

// IBPeer is one item of ib_peers: a port GUID, or a node description
// (literal or a glob, as switch takes) that ib.path resolves through the
// SA's NodeRecords. An item that reads as a number is a GUID.
type IBPeer struct {
	GUID PortGUID // 0 when the peer is named by Node
	Node Pattern  // one alternative; nil when the peer is a GUID
}

// ByName reports whether the peer is named by node description.
func (p IBPeer) ByName() bool { return len(p.Node) > 0 }

// String spells the peer as the file does.
func (p IBPeer) String() string {
	if p.ByName() {
		return p.Node[0]
	}
	return p.GUID.String()
}

// ExpectedIBPeers is the class's ib_peers key (see ExpectedDevices).
func (c *Class) ExpectedIBPeers() []*Value[IBPeer] {
	if c == nil {
		return nil
	}
	return c.IBPeers
}

// ExpectedSwitch is the class's switch and switch_port keys (see
// ExpectedDevices); either may be nil.
func (c *Class) ExpectedSwitch() (*Value[Pattern], *Value[int]) {
	if c == nil {
		return nil, nil
	}
	return c.Switch, c.SwitchPort
}

// ExpectedRoCETC is the class's roce_tc key (see ExpectedDevices).
func (c *Class) ExpectedRoCETC() *Value[int] {
	if c == nil {
		return nil
	}
	return c.RoCETC
}

// ExpectedLossless is the class's lossless key (see ExpectedDevices).
func (c *Class) ExpectedLossless() *Value[bool] {
	if c == nil {
		return nil
	}
	return c.Lossless
}

// ExpectedGPUNICMaxDistance is the class's gpu_nic_max_distance key (see
// ExpectedDevices).
func (c *Class) ExpectedGPUNICMaxDistance() *Value[string] {
	if c == nil {
		return nil
	}
	return c.GPUNICMaxDistance
}

// Skipped returns the skip value that names check id, or nil (also on a
// nil class).
func (c *Class) Skipped(id string) *Value[string] {
	if c == nil {
		return nil
	}
	for _, s := range c.Skip {
		if s.V == id {
			return s
		}
	}
	return nil
}

// Source names the class for a report: "cx5-roce (expect.conf:2)".
func (c *Class) Source() string {
	if c == nil {
		return ""
	}
	if c.File == "" {
		return c.Name
	}
	return fmt.Sprintf("%s (%s:%d)", c.Name, filepath.Base(c.File), c.Line)
}

// later returns whichever value was set by the later line; b wins a tie
// (the rule that comes later in file order).
func later[T any](a, b *Value[T]) *Value[T] {
	if b == nil {
		return a
	}
	if a == nil || b.Line >= a.Line {
		return b
	}
	return a
}

// globMatch is path.Match with a bad pattern matching nothing; the parser
// has already refused bad patterns, so this only guards hand-built classes.
func globMatch(glob, name string) bool {
	ok, err := path.Match(glob, name)
	return err == nil && ok
}

// Match returns the first class one of whose host globs matches hostname.
// No match is an error naming the host and every class with its globs.
func (f *File) Match(hostname string) (*Class, error) {
	if f == nil {
		return nil, fmt.Errorf("no expectations file")
	}
	if hostname == "" {
		return nil, fmt.Errorf("%s: the host name is unknown, so no class can be chosen", f.Name)
	}
	var classes []string
	for _, c := range f.Classes {
		for _, g := range c.Hosts {
			if globMatch(g, hostname) {
				return c, nil
			}
		}
		classes = append(classes, fmt.Sprintf("%s [%s]", c.Name, strings.Join(c.Hosts, " ")))
	}
	if len(classes) == 0 {
		return nil, fmt.Errorf("%s: no class for host %q: the file has no [class] section", f.Name, hostname)
	}
	return nil, fmt.Errorf("%s: no class matches host %q; classes: %s", f.Name, hostname, strings.Join(classes, ", "))
}

// CheckIDs verifies that every skip and fail_on_warn value names one of
// the check IDs given (the catalog); the error names each that does not,
// by FILE:LINE, with the nearest ID as a did-you-mean.
func (f *File) CheckIDs(known []string) error {
	if f == nil {
		return nil
	}
	ok := map[string]bool{}
	for _, id := range known {
		ok[id] = true
	}
	var errs ParseErrors
	for _, c := range f.Classes {
		for _, s := range append(append([]*Value[string](nil), c.Skip...), c.FailOnWarnIDs...) {
			if !ok[s.V] {
				errs = append(errs, &ParseError{File: s.File, Line: s.Line, Key: s.Key,
					Msg: fmt.Sprintf("%q is not a check ID%s (rdmadoctor list shows them)", s.V, DidYouMean(s.V, known))})
			}
		}
	}
	return errs.orNil()
}

// Waived returns the waive value that names finding id and the class's
// reason, or nil (also on a nil class).
func (c *Class) Waived(id string) (*Value[string], string) {
	if c == nil || c.WaiveReason == nil {
		return nil, ""
	}
	for _, w := range c.Waive {
		if w.V == id {
			return w, c.WaiveReason.V
		}
	}
	return nil, ""
}

// FindingIDs verifies that every waive value names one of the finding IDs
// given (the catalog); the error names each that does not, by FILE:LINE,
// with the nearest ID as a did-you-mean.
func (f *File) FindingIDs(known []string) error {
	if f == nil {
		return nil
	}
	ok := map[string]bool{}
	for _, id := range known {
		ok[id] = true
	}
	var errs ParseErrors
	for _, c := range f.Classes {
		for _, w := range c.Waive {
			if !ok[w.V] {
				errs = append(errs, &ParseError{File: w.File, Line: w.Line, Key: w.Key,
					Msg: fmt.Sprintf("%q is not a finding ID%s (rdmadoctor explain CHECK lists a check's findings)", w.V, DidYouMean(w.V, known))})
			}
		}
	}
	return errs.orNil()
}

// FailOnWarn reports whether the class's fail_on_warn names check id: its
// warnings then count as problems for this class. False on a nil class.
func (c *Class) FailOnWarn(id string) bool {
	if c == nil {
		return false
	}
	for _, s := range c.FailOnWarnIDs {
		if s.V == id {
			return true
		}
	}
	return false
}

// FailOnWarnChecks is the class's fail_on_warn list, in file order; nil on
// a nil class or when the key is not set.
func (c *Class) FailOnWarnChecks() []string {
	if c == nil {
		return nil
	}
	var ids []string
	for _, s := range c.FailOnWarnIDs {
		ids = append(ids, s.V)
	}
	return ids
}
