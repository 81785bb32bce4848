package expect

import (
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode"
)

// pos is where a value was written.
type pos struct {
	file    string
	line    int
	comment string
}

func mk[T any](v T, key string, p pos) *Value[T] {
	return &Value[T]{V: v, Key: key, Line: p.line, File: p.file, Comment: p.comment}
}

// Set adds one KEY = VALUE to a class as if it were the next line of its
// file, with the parser's validation: a program that builds a class (the
// expect --from-host command) writes only what Parse reads back. comment is
// what Write puts after the value.
func (c *Class) Set(key, value, comment string) error {
	if c == nil {
		return fmt.Errorf("no class")
	}
	key, value = strings.TrimSpace(key), strings.TrimSpace(value)
	// What a line cannot hold, Set refuses: a value read from a hostile
	// host must not make a file that reads back as something else.
	if value == "" || strings.ContainsFunc(key+value, func(r rune) bool { return r == '#' || r != '\t' && unicode.IsControl(r) }) {
		return fmt.Errorf("%s = %q cannot be written on a line", clip(key), clip(value))
	}
	c.lastLine++
	return c.set(key, value, pos{file: c.File, line: c.lastLine, comment: comment})
}

// set routes a key to the class, a device rule or a port rule. The error
// says what is wrong with the value; the caller adds FILE:LINE and the key.
func (c *Class) set(key, value string, p pos) error {
	c.lastLine = max(c.lastLine, p.line)
	if rest, ok := strings.CutPrefix(key, "counters."); ok {
		return c.setCounterKey(rest, key, value, p) // counters.go
	}
	dot := strings.LastIndexByte(key, '.')
	if dot < 0 {
		return c.setClassKey(key, value, p)
	}
	unit, name := key[:dot], key[dot+1:]
	glob, port, isPort := strings.Cut(unit, "/")
	if err := checkGlob(glob); err != nil {
		return fmt.Errorf("device glob %q: %v", clip(glob), err)
	}
	if !isPort {
		return c.deviceRule(glob).set(name, key, value, p)
	}
	n, err := parsePort(port)
	if err != nil {
		return err
	}
	return c.portRule(glob, n).set(name, key, value, p)
}

// IsCheckID reports whether id has the shape of a check ID
// ("counters.errors"): two words of [a-z0-9_] joined by one '.'.
func IsCheckID(id string) bool {
	group, name, ok := strings.Cut(id, ".")
	return ok && isIDWord(group) && isIDWord(name)
}

// IsFindingID reports whether id has the shape of a finding ID: the
// check's ID, "/", a slug of lower-case words joined by '-'. The catalog
// declares its findings in this shape (checks.declare), every one in
// every process's start, so it is tested by hand, not by a pattern.
func IsFindingID(id string) bool {
	check, slug, ok := strings.Cut(id, "/")
	if !ok || !IsCheckID(check) || slug == "" || slug[0] == '-' || slug[len(slug)-1] == '-' {
		return false
	}
	for i := 0; i < len(slug); i++ {
		c := slug[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && slug[i-1] != '-':
		default:
			return false
		}
	}
	return true
}

// isIDWord says s is one or more of [a-z0-9_].
func isIDWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

const classKeys = "hosts, devices, skip, fail_on_warn, waive, waive_reason, roce_tc, lossless, gpu_nic_max_distance, pkeys, switch, switch_port, ib_peers, counters.<counter>, or <device glob>.<key> / <device glob>/<port>.<key>"

func (c *Class) setClassKey(key, value string, p pos) error {
	switch key {
	case "hosts":
		globs, err := splitWords(value)
		if err != nil {
			return err
		}
		for _, g := range globs {
			if err := checkGlob(g); err != nil {
				return fmt.Errorf("host glob %q: %v", clip(g), err)
			}
		}
		c.Hosts = globs
	case "devices":
		v, err := parseInt(value, 0, 4096)
		c.Devices = orKeep(c.Devices, mk(v, key, p), err)
		return err
	case "skip":
		ids, err := checkIDs(value, key, p)
		if err != nil {
			return err
		}
		c.Skip = ids
	case "fail_on_warn":
		ids, err := checkIDs(value, key, p)
		if err != nil {
			return err
		}
		c.FailOnWarnIDs = ids
	case "waive":
		ids, err := parseFindingIDs(value, key, p)
		if err != nil {
			return err
		}
		c.Waive = ids
	case "waive_reason":
		items, err := splitItems(value)
		if err == nil && (len(items) != 1 || strings.TrimSpace(items[0]) == "") {
			err = fmt.Errorf("one non-empty text: why the waived findings are not counted on this class")
		}
		if err != nil {
			return err
		}
		c.WaiveReason = mk(items[0], key, p)
	case "roce_tc":
		v, err := parseInt(value, 0, 255)
		c.RoCETC = orKeep(c.RoCETC, mk(v, key, p), err)
		return err
	case "lossless":
		v, err := parseBool(value)
		c.Lossless = orKeep(c.Lossless, mk(v, key, p), err)
		return err
	case "pkeys":
		keys, err := parsePKeys(value, key, p)
		if err != nil {
			return err
		}
		c.PKeys = keys
	case "ib_peers":
		peers, err := parseIBPeers(value, key, p)
		if err != nil {
			return err
		}
		c.IBPeers = peers
	case "switch":
		v, err := parsePattern(value, func(it string) (string, error) { return it, nil })
		c.Switch = orKeep(c.Switch, mk(v, key, p), err)
		return err
	case "switch_port":
		v, err := parseInt(value, 1, 254)
		c.SwitchPort = orKeep(c.SwitchPort, mk(v, key, p), err)
		return err
	case "gpu_nic_max_distance":
		v, err := parseGPUNICDistance(value)
		c.GPUNICMaxDistance = orKeep(c.GPUNICMaxDistance, mk(v, key, p), err)
		return err
	default:
		return fmt.Errorf("unknown key; valid: %s", classKeys)
	}
	return nil
}

// parseFindingIDs reads waive's finding IDs.
func parseFindingIDs(value, key string, p pos) ([]*Value[string], error) {
	words, err := splitWords(value)
	if err != nil {
		return nil, err
	}
	var ids []*Value[string]
	for _, id := range words {
		if !IsFindingID(id) {
			return nil, fmt.Errorf("%q is not a finding ID such as counters.errors/symbol-errors", clip(id))
		}
		ids = append(ids, mk(id, key, p))
	}
	return ids, nil
}

// parseIBPeers reads ib_peers: port GUIDs (an item that reads as a
// number) and node descriptions, literal or globs.
func parseIBPeers(value, key string, p pos) ([]*Value[IBPeer], error) {
	words, err := splitWords(value)
	if err == nil && len(words) == 0 {
		err = fmt.Errorf("at least one port GUID such as \"0x0002c90300a1b2c3\" or node description such as \"gpu-r3-01 HCA-1\"")
	}
	if err != nil {
		return nil, err
	}
	var peers []*Value[IBPeer]
	for _, w := range words {
		peer, err := parseIBPeer(w)
		if err != nil {
			return nil, err
		}
		peers = append(peers, mk(peer, key, p))
	}
	return peers, nil
}

// parseIBPeer reads one ib_peers item.
func parseIBPeer(w string) (IBPeer, error) {
	t := strings.TrimSpace(w)
	if n, err := strconv.ParseUint(t, 0, 64); err == nil {
		if n == 0 {
			return IBPeer{}, fmt.Errorf("%q is not a port GUID such as 0x0002c90300a1b2c3", clip(w))
		}
		return IBPeer{GUID: PortGUID(n)}, nil
	}
	if strings.HasPrefix(strings.ToLower(t), "0x") {
		return IBPeer{}, fmt.Errorf("%q is not a port GUID such as 0x0002c90300a1b2c3", clip(w))
	}
	switch {
	case t == "":
		return IBPeer{}, fmt.Errorf("an empty node description")
	case len(t) > 64:
		return IBPeer{}, fmt.Errorf("%q: a node description has at most 64 bytes", clip(t))
	}
	if hasMeta(t) {
		if _, err := path.Match(t, ""); err != nil {
			return IBPeer{}, fmt.Errorf("%q: bad glob (path.Match syntax: * ? [a-z])", clip(t))
		}
	}
	return IBPeer{Node: Pattern{t}}, nil
}

// splitWords reads a key whose value is several words: a list
// (["a", "b"]) or words separated by blanks (a b).
func splitWords(value string) ([]string, error) {
	if isList(value) || strings.HasPrefix(value, `"`) {
		return splitItems(value)
	}
	return strings.Fields(value), nil
}

// checkIDs reads a list of check IDs (skip, fail_on_warn); whether each
// names a check of the catalog is File.CheckIDs's to say.
func checkIDs(value, key string, p pos) ([]*Value[string], error) {
	words, err := splitWords(value)
	if err != nil {
		return nil, err
	}
	var ids []*Value[string]
	for _, id := range words {
		if !IsCheckID(id) {
			return nil, fmt.Errorf("%q is not a check ID such as counters.errors", clip(id))
		}
		ids = append(ids, mk(id, key, p))
	}
	return ids, nil
}

// orKeep returns v, or old when parsing v failed.
func orKeep[T any](old, v *Value[T], err error) *Value[T] {
	if err != nil {
		return old
	}
	return v
}

func (c *Class) deviceRule(glob string) *DeviceRule {
	for _, r := range c.DeviceRules {
		if r.Glob == glob {
			return r
		}
	}
	r := &DeviceRule{Glob: glob}
	c.DeviceRules = append(c.DeviceRules, r)
	return r
}

func (c *Class) portRule(glob string, port int) *PortRule {
	for _, r := range c.PortRules {
		if r.Glob == glob && r.Port == port {
			return r
		}
	}
	r := &PortRule{Glob: glob, Port: port}
	c.PortRules = append(c.PortRules, r)
	return r
}

func (r *DeviceRule) set(name, key, value string, p pos) error {
	var err error
	switch name {
	case "fw":
		// Any text: fw_ver's format is the driver's (MatchFW compares
		// its version part).
		var v Pattern
		v, err = parsePattern(value, func(it string) (string, error) { return it, nil })
		r.FW = orKeep(r.FW, mk(v, key, p), err)
	case "pcie_speed":
		var v Pattern
		v, err = parsePattern(value, func(it string) (string, error) {
			if hasMeta(it) {
				return it, nil // matched against the text sysfs shows
			}
			return it, checkPCIeSpeed(it)
		})
		r.PCIeSpeed = orKeep(r.PCIeSpeed, mk(v, key, p), err)
	case "pcie_width":
		var v int
		if v, err = parseInt(value, 1, 32); err == nil && !validPCIeWidth(v) {
			err = fmt.Errorf("%d is not a PCIe link width (1, 2, 4, 8, 12, 16 or 32)", v)
		}
		r.PCIeWidth = orKeep(r.PCIeWidth, mk(v, key, p), err)
	case "ports":
		var v int
		v, err = parseInt(value, 0, 255)
		r.Ports = orKeep(r.Ports, mk(v, key, p), err)
	default:
		err = fmt.Errorf("unknown device key %q; valid: fw, pcie_speed, pcie_width, ports (a port key needs <device glob>/<port>.)", clip(name))
	}
	return err
}

func (r *PortRule) set(name, key, value string, p pos) error {
	var err error
	switch name {
	case "link_layer":
		var v Pattern
		v, err = parsePattern(value, enumItem("InfiniBand", "Ethernet", "Unknown"))
		r.LinkLayer = orKeep(r.LinkLayer, mk(v, key, p), err)
	case "rate":
		var v float64
		v, err = parseRate(value)
		r.Rate = orKeep(r.Rate, mk(v, key, p), err)
	case "width":
		var v Pattern
		v, err = parsePattern(value, enumItem("1X", "2X", "4X", "8X", "12X"))
		r.Width = orKeep(r.Width, mk(v, key, p), err)
	case "mtu":
		var v int
		v, err = parseInt(value, 256, 65535)
		r.MTU = orKeep(r.MTU, mk(v, key, p), err)
	case "pfc_priority":
		var v int
		v, err = parseInt(value, 0, 7)
		r.PFCPriority = orKeep(r.PFCPriority, mk(v, key, p), err)
	case "unused":
		var v bool
		v, err = parseBool(value)
		r.Unused = orKeep(r.Unused, mk(v, key, p), err)
	case "module_vendor", "module_part", "module_firmware":
		// Any text: what the module's EEPROM says, matched as written
		// or as a glob.
		var v Pattern
		v, err = parsePattern(value, func(it string) (string, error) { return it, nil })
		dst := map[string]**Value[Pattern]{"module_vendor": &r.ModuleVendor, "module_part": &r.ModulePart, "module_firmware": &r.ModuleFirmware}[name]
		*dst = orKeep(*dst, mk(v, key, p), err)
	default:
		err = fmt.Errorf("unknown port key %q; valid: link_layer, rate, width, mtu, pfc_priority, unused, module_vendor, module_part, module_firmware", clip(name))
	}
	return err
}

// checkGlob refuses an empty, blank or malformed path.Match pattern.
// path.Match checks the whole pattern, so matching the empty name is
// enough to find a syntax error anywhere in it.
func checkGlob(g string) error {
	if g == "" {
		return fmt.Errorf("empty")
	}
	if strings.ContainsAny(g, " \t/") {
		return fmt.Errorf("contains a space or '/'")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad pattern (path.Match syntax: * ? [a-z])")
	}
	return nil
}

func parsePort(s string) (int, error) {
	if s == "*" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 255 || s[0] == '+' {
		return 0, fmt.Errorf("port %q: want a port number 1..255 or *", clip(s))
	}
	return n, nil
}

func parseInt(s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || s[0] == '+' {
		return 0, fmt.Errorf("%q is not a whole number", clip(s))
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%d is out of range %d..%d", n, lo, hi)
	}
	return n, nil
}

func parseBool(s string) (bool, error) {
	switch s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q: want true or false", clip(s))
}

// GPUNICDistances are the values of gpu_nic_max_distance, nearest first:
// the classes `nvidia-smi topo -m` prints between a GPU and a NIC.
var GPUNICDistances = []string{"PIX", "PXB", "PHB", "NODE", "SYS"}

// parseGPUNICDistance reads one of GPUNICDistances, bare or quoted, in
// any case; it returns the upper-case spelling.
func parseGPUNICDistance(s string) (string, error) {
	words, err := splitWords(s)
	if err == nil && len(words) == 1 {
		for _, d := range GPUNICDistances {
			if strings.EqualFold(words[0], d) {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("%q: want one of %s (nvidia-smi topo -m's classes, nearest first)", clip(s), strings.Join(GPUNICDistances, " "))
}

// parseRate reads a port rate in Gb/s, the number sysfs rate starts with.
func parseRate(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || strings.ContainsAny(s, "xXpP_") {
		return 0, fmt.Errorf("%q is not a rate in Gb/s (the number sysfs rate shows, e.g. 100)", clip(s))
	}
	if v <= 0 || v > 1e6 {
		return 0, fmt.Errorf("%s Gb/s is out of range (above 0, at most 1000000)", s)
	}
	return v, nil
}

// oneOf matches a value against its allowed spellings, ignoring case, and
// returns the canonical one.
func oneOf(s string, valid ...string) (string, error) {
	for _, v := range valid {
		if strings.EqualFold(s, v) {
			return v, nil
		}
	}
	return "", fmt.Errorf("%q: want one of %s", clip(s), strings.Join(valid, ", "))
}

// checkPCIeSpeed accepts a link speed as sysfs prints it: "8.0 GT/s PCIe"
// (kernels since 4.19) or "8 GT/s".
func checkPCIeSpeed(s string) error {
	f := strings.Fields(s)
	bad := len(f) < 2 || len(f) > 3 || f[1] != "GT/s" || (len(f) == 3 && f[2] != "PCIe")
	if !bad {
		v, err := strconv.ParseFloat(f[0], 64)
		bad = err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v > 1024 || strings.ContainsAny(f[0], "xXpP_")
	}
	if bad {
		return fmt.Errorf("%q is not a PCIe link speed as sysfs prints it, e.g. 16.0 GT/s PCIe", clip(s))
	}
	return nil
}

// PCIeGTs is the GT/s number of a pcie_speed value ("16.0 GT/s PCIe" → 16),
// 0 when it is not one; the parser has already refused such values.
func PCIeGTs(s string) float64 {
	f := strings.Fields(s)
	if len(f) < 2 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return v
}

func validPCIeWidth(n int) bool {
	switch n {
	case 1, 2, 4, 8, 12, 16, 32:
		return true
	}
	return false
}

// parsePKeys reads the pkeys key: P_Keys written as hex ("0x8001") or
// decimal, a list or blank-separated. The membership bit (0x8000) may be
// written or not: the port must be a full member either way.
func parsePKeys(value, key string, p pos) ([]*Value[PKey], error) {
	words, err := splitWords(value)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("at least one P_Key such as \"0x8001\"")
	}
	var keys []*Value[PKey]
	for _, w := range words {
		n, err := strconv.ParseUint(strings.TrimSpace(w), 0, 16)
		if err != nil || n&0x7fff == 0 {
			return nil, fmt.Errorf("%q is not a P_Key such as 0x8001 (16 bits, partition number not 0)", clip(w))
		}
		keys = append(keys, mk(PKey(n), key, p))
	}
	return keys, nil
}
