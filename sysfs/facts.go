package sysfs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"syscall"
)

// FactsFile is the name, at the top of a fixture or snapshot root, of the
// JSON file that holds what a live host answers through system calls rather
// than files. Its format is FactsSchema, documented in docs/snapshots.md.
const FactsFile = "rdmadoctor.facts.json"

// FactsSchema names the facts file format version.
const FactsSchema = "rdmadoctor.facts/v1"

// Facts are the non-file answers of one host. Every field is optional; a
// missing field makes the checks that need it report `error` with the reason.
type Facts struct {
	Schema   string `json:"schema"`
	Hostname string `json:"hostname,omitempty"`
	// Netdevs are the network interfaces as netlink (RTM_GETLINK/GETADDR) sees them.
	Netdevs []Netdev `json:"netdevs,omitempty"`
	// DCB holds the IEEE DCB answer (RTM_GETDCB / DCB_CMD_IEEE_GET) per interface.
	DCB map[string]DCB `json:"dcb,omitempty"`
	// Ethtool holds, by interface, the ethtool answers link.phy judges: FEC
	// state and statistics, link state, link modes, driver statistics.
	Ethtool map[string]EthtoolAnswer `json:"ethtool,omitempty"`
	// RDMASystem is `rdma system`: the RDMA network-namespace mode.
	RDMASystem *RDMASystem `json:"rdma_system,omitempty"`
	// RDMAResources are the per-device resource counts (`rdma resource`).
	RDMAResources []RDMAResource `json:"rdma_resources,omitempty"`
	// Libibverbs is what the real library's ibv_get_device_list returned.
	Libibverbs *VerbsEnumeration `json:"libibverbs,omitempty"`
	// IBUmad is what libibumad listed for the InfiniBand checks (ib.*).
	IBUmad *IBUmadFacts `json:"ib_umad,omitempty"`
	// IBFabric is what the fabric answered about each InfiniBand port: its
	// SM, its neighbour one hop out, its P_Key table (inventory shows it).
	IBFabric *IBFabricFacts `json:"ib_fabric,omitempty"`
	// DevNodes are the /dev nodes (uverbsN, rdma_cm) as stat and open saw
	// them: a directory of files cannot hold a character device.
	DevNodes *DevNodeFacts `json:"dev_nodes,omitempty"`
	// ModuleEEPROMs are the plug-in modules' EEPROM pages (ethtool netlink
	// MODULE_EEPROM_GET) by interface name, or the errno its driver answered.
	ModuleEEPROMs map[string]ModuleEEPROM `json:"module_eeproms,omitempty"`
	// DevlinkHealth is `devlink health show`: the drivers' health reporters.
	DevlinkHealth *DevlinkHealth `json:"devlink_health,omitempty"`
	// ReadErrors are files that exist on the host but whose read failed,
	// by path, with the errno name ("EINVAL" for a counter the driver
	// refuses, "EACCES"): reading them from the root fails the same way, so a
	// replay judges them as the live host did.
	ReadErrors map[string]string `json:"read_errors,omitempty"`
	// Unavailable lists facts a capture could not gather, with the reason.
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// Netdev is one network interface.
type Netdev struct {
	Name      string   `json:"name"`
	Index     int      `json:"index"`
	OperState string   `json:"operstate"` // "up", "down", "unknown", ...
	AdminUp   bool     `json:"admin_up"`
	Carrier   bool     `json:"carrier"`
	MTU       int      `json:"mtu"`
	MAC       string   `json:"mac,omitempty"`
	Addresses []string `json:"addresses,omitempty"` // CIDR, e.g. "192.0.2.1/24"
}

// DCB is one interface's IEEE DCB state. Err is set ("EOPNOTSUPP") when the
// driver has no DCB support; the other fields are then meaningless.
type DCB struct {
	Err    string `json:"error,omitempty"`
	PFCCap uint8  `json:"pfc_cap"`
	PFCEn  uint8  `json:"pfc_en"` // bitmap of priorities with PFC on
	// App holds the IEEE APP table: selector ("dscp", "ethertype", ...), protocol, priority.
	App []DCBApp `json:"app,omitempty"`
}

// DCBApp is one IEEE APP table entry.
type DCBApp struct {
	Selector string `json:"selector"`
	Protocol int    `json:"protocol"`
	Priority int    `json:"priority"`
}

// RDMASystem is the global RDMA subsystem configuration.
type RDMASystem struct {
	NetnsMode string `json:"netns_mode"` // "shared" or "exclusive"
}

// RDMAResource is one device's resource counts, as `rdma resource` shows.
type RDMAResource struct {
	Device string         `json:"device"`
	Counts map[string]int `json:"counts"` // "pd", "cq", "qp", "mr", "cm_id", "ctx", "srq"
}

// VerbsEnumeration is the answer of libibverbs' ibv_get_device_list, as the
// verbs child gave it: every part libibverbs.devices judges, so a replay
// judges the answer the live host gave, not a summary of it.
type VerbsEnumeration struct {
	// Library is the name the library was opened by ("libibverbs.so.1", or
	// the --libibverbs path). An older facts file has only LibraryPath.
	Library string `json:"library,omitempty"`
	// LibraryPath is the file the loader opened, or "" when it failed.
	LibraryPath string `json:"library_path,omitempty"`
	// LoadError is the dynamic loader's message when the library did not open.
	LoadError string `json:"load_error,omitempty"`
	// MissingSymbols are the verbs the opened library lacks (a foreign or
	// very old libibverbs.so.1).
	MissingSymbols []string `json:"missing_symbols,omitempty"`
	// Errno is the errno set by a NULL ibv_get_device_list ("ENOSYS"), or "".
	Errno string `json:"errno,omitempty"`
	// ListError is the child's message for a NULL ibv_get_device_list.
	ListError string        `json:"list_error,omitempty"`
	Devices   []VerbsDevice `json:"devices"`
	// Providers are the provider libraries the library loaded, as mapped.
	Providers []string `json:"providers,omitempty"`
	// Warnings are the lines the library printed on stderr ("couldn't load
	// driver ...").
	Warnings []string `json:"warnings,omitempty"`
	// ChildError is set when the verbs child gave no full answer (it timed
	// out, crashed, or the run stopped waiting for it): the check's error.
	ChildError string `json:"child_error,omitempty"`
}

// VerbsDevice is one entry of the library's device list.
type VerbsDevice struct {
	Name     string `json:"name"`
	NodeGUID string `json:"node_guid"`
	// Uverbs is the device's uverbs node as the library found it ("uverbs0").
	Uverbs string `json:"uverbs,omitempty"`
}

// ErrNoFacts says a fixture root has no facts file, so non-file facts are unknown.
var ErrNoFacts = errors.New("no facts file in the root")

func loadFacts(h *Host) (*Facts, error) {
	data, err := h.ReadFile(FactsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f Facts
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("facts file %s: %w", h.Display(FactsFile), err)
	}
	if f.Schema != FactsSchema {
		return nil, fmt.Errorf("facts file %s: schema %q, want %q", h.Display(FactsFile), f.Schema, FactsSchema)
	}
	return &f, nil
}

// Facts returns the fixture's facts, or nil on a live host or a root without
// a facts file.
func (h *Host) Facts() *Facts { return h.facts }

// noFacts explains why a fixture fact is unknown.
func (h *Host) noFacts(what string) error {
	if h.facts == nil {
		return fmt.Errorf("%s unknown: %w (%s)", what, ErrNoFacts, h.Display(FactsFile))
	}
	if r, ok := h.facts.Unavailable[what]; ok {
		return fmt.Errorf("%s unknown: the capture could not read it: %s", what, r)
	}
	return fmt.Errorf("%s unknown: not recorded in %s", what, h.Display(FactsFile))
}

// Hostname is the host's name: live from the kernel, else from the facts file
// (or /proc/sys/kernel/hostname inside the root).
func (h *Host) Hostname() string {
	if h.facts != nil && h.facts.Hostname != "" {
		return h.facts.Hostname
	}
	if s, err := h.ReadAttr("/proc/sys/kernel/hostname"); err == nil {
		return s
	}
	return ""
}

// Netdevs lists the network interfaces.
func (h *Host) Netdevs() ([]Netdev, error) {
	if h.Live() {
		return h.live.Netdevs()
	}
	if h.facts == nil || h.facts.Netdevs == nil {
		return nil, h.noFacts("netdevs")
	}
	return h.facts.Netdevs, nil
}

// DCB returns the IEEE DCB state of one interface.
func (h *Host) DCB(ifname string) (DCB, error) {
	if h.Live() {
		return h.live.DCB(ifname)
	}
	if h.facts == nil || h.facts.DCB == nil {
		return DCB{}, h.noFacts("dcb")
	}
	d, ok := h.facts.DCB[ifname]
	if !ok {
		return DCB{}, fmt.Errorf("dcb of %s unknown: not recorded in %s", ifname, h.Display(FactsFile))
	}
	return d, nil
}

// RDMASystem returns the RDMA subsystem mode.
func (h *Host) RDMASystem() (RDMASystem, error) {
	if h.Live() {
		return h.live.RDMASystem()
	}
	if h.facts == nil || h.facts.RDMASystem == nil {
		return RDMASystem{}, h.noFacts("rdma_system")
	}
	return *h.facts.RDMASystem, nil
}

// RDMAResources returns per-device resource counts.
func (h *Host) RDMAResources() ([]RDMAResource, error) {
	if h.Live() {
		return h.live.RDMAResources()
	}
	if h.facts == nil || h.facts.RDMAResources == nil {
		return nil, h.noFacts("rdma_resources")
	}
	return h.facts.RDMAResources, nil
}

// IBUmadFacts is what libibumad showed on the live host: whether it loaded
// and initialised, and the ports umad_get_ca listed. The MADs themselves
// need the live fabric; a replay judges only what this decides (no
// library, a failing one, no InfiniBand port).
type IBUmadFacts struct {
	LoadError string       `json:"load_error,omitempty"` // the loader's message: no libibumad
	Error     string       `json:"error,omitempty"`      // umad_init or the port listing failed
	Ports     []IBUmadPort `json:"ports"`
}

// IBUmadPort is one port libibumad listed.
type IBUmadPort struct {
	CA        string `json:"ca"`
	Port      int    `json:"port"`
	LinkLayer string `json:"link_layer"`
}

// RecordedIBUmad returns what libibumad listed on the captured host; false
// on a live host or when the capture did not record it.
func (h *Host) RecordedIBUmad() (*IBUmadFacts, bool) {
	if h.Live() || h.facts == nil || h.facts.IBUmad == nil {
		return nil, false
	}
	return h.facts.IBUmad, true
}

// RecordedVerbs returns the libibverbs enumeration recorded in a fixture or
// snapshot. On a live host the enumeration is made by the verbs child
// process, not here, and this returns an error.
func (h *Host) RecordedVerbs() (*VerbsEnumeration, error) {
	if h.Live() {
		return nil, errors.New("live host: the libibverbs enumeration is made by the verbs child process")
	}
	if h.facts == nil || h.facts.Libibverbs == nil {
		return nil, h.noFacts("libibverbs")
	}
	return h.facts.Libibverbs, nil
}

// errnoByName maps the errno names a facts file may record to errnos.
var errnoByName = map[string]syscall.Errno{
	"EACCES": syscall.EACCES, "EPERM": syscall.EPERM, "EINVAL": syscall.EINVAL, "EAGAIN": syscall.EAGAIN,
	"EIO": syscall.EIO, "ENODEV": syscall.ENODEV, "EOPNOTSUPP": syscall.EOPNOTSUPP, "ENXIO": syscall.ENXIO,
	"EBUSY": syscall.EBUSY, "ENODATA": syscall.ENODATA,
}

// recordedReadError returns the errno the facts file records for p, if any.
func (h *Host) recordedReadError(p string) error {
	if h.facts == nil || len(h.facts.ReadErrors) == 0 {
		return nil
	}
	name, ok := h.facts.ReadErrors[path.Clean("/"+p)]
	if !ok {
		return nil
	}
	if e, ok := errnoByName[name]; ok {
		return e
	}
	return fmt.Errorf("read failed on the captured host: %s", name)
}
