package sysfs

import (
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
)

// DevlinkHealth is the answer of `devlink health show`: every health
// reporter of every devlink instance, read through generic netlink
// (DEVLINK_CMD_HEALTH_REPORTER_GET, dumped). Absent is set, with the reason,
// when the kernel has no devlink family (a kernel without devlink, a guest
// whose drivers register none): there are then no reporters, and that is no
// fault.
type DevlinkHealth struct {
	Reporters []DevlinkReporter `json:"reporters"`
	Absent    string            `json:"absent,omitempty"`
}

// DevlinkReporter is one health reporter of a devlink instance (a PCI
// function "pci/0000:3b:00.0", or one of its ports).
type DevlinkReporter struct {
	Bus    string `json:"bus"`    // "pci"
	Device string `json:"device"` // "0000:3b:00.0"
	// Port is the devlink port index of a port reporter, nil for the
	// instance's own.
	Port *uint32 `json:"port,omitempty"`
	Name string  `json:"name"` // "fw", "fw_fatal", "tx", "rx"
	// State is "healthy" or "error" (DEVLINK_HEALTH_REPORTER_STATE_*).
	State        string `json:"state"`
	ErrorCount   uint64 `json:"error_count"`
	RecoverCount uint64 `json:"recover_count"`
}

// Handle is the reporter's devlink handle as the devlink tool writes it:
// "pci/0000:3b:00.0", with "/<port>" for a port reporter.
func (r DevlinkReporter) Handle() string {
	h := r.Bus + "/" + r.Device
	if r.Port != nil {
		h += fmt.Sprintf("/%d", *r.Port)
	}
	return h
}

// The devlink generic netlink ABI (include/uapi/linux/devlink.h): the
// command and attribute numbers never change.
const (
	devlinkFamily               = "devlink"
	devlinkCmdHealthReporterGet = 52 // DEVLINK_CMD_HEALTH_REPORTER_GET
	devlinkAttrBusName          = 1  // DEVLINK_ATTR_BUS_NAME, string
	devlinkAttrDevName          = 2  // DEVLINK_ATTR_DEV_NAME, string
	devlinkAttrPortIndex        = 3  // DEVLINK_ATTR_PORT_INDEX, u32
	devlinkAttrHealthReporter   = 114
	devlinkAttrReporterName     = 115 // string
	devlinkAttrReporterState    = 116 // u8: 0 healthy, 1 error
	devlinkAttrReporterErrCount = 117 // u64
	devlinkAttrReporterRecCount = 118 // u64
)

// ParseDevlinkHealthReporter decodes the attributes of one
// DEVLINK_CMD_HEALTH_REPORTER_GET answer (the generic netlink header
// removed): the handle (bus and device names, a port index) at the top and
// the reporter nested in DEVLINK_ATTR_HEALTH_REPORTER, as
// devlink_nl_health_reporter_fill (net/devlink/health.c) writes them.
// Malformed input is an error, never a panic.
func ParseDevlinkHealthReporter(attrs []byte) (DevlinkReporter, error) {
	var r DevlinkReporter
	ad, err := netlink.NewAttributeDecoder(attrs)
	if err != nil {
		return r, fmt.Errorf("devlink health reporter: %w", err)
	}
	var nested bool
	for ad.Next() {
		switch ad.Type() {
		case devlinkAttrBusName:
			r.Bus = ad.String()
		case devlinkAttrDevName:
			r.Device = ad.String()
		case devlinkAttrPortIndex:
			p := ad.Uint32()
			r.Port = &p
		case devlinkAttrHealthReporter:
			nested = true
			ad.Nested(func(nd *netlink.AttributeDecoder) error { return decodeReporter(nd, &r) })
		}
	}
	if err := ad.Err(); err != nil {
		return DevlinkReporter{}, fmt.Errorf("devlink health reporter: %w", err)
	}
	if !nested || r.Bus == "" || r.Device == "" || r.Name == "" {
		return DevlinkReporter{}, errors.New("devlink health reporter: the answer lacks the handle or the reporter's name")
	}
	return r, nil
}

// decodeReporter reads the attributes nested in DEVLINK_ATTR_HEALTH_REPORTER.
func decodeReporter(nd *netlink.AttributeDecoder, r *DevlinkReporter) error {
	for nd.Next() {
		switch nd.Type() {
		case devlinkAttrReporterName:
			r.Name = nd.String()
		case devlinkAttrReporterState:
			switch s := nd.Uint8(); s {
			case 0:
				r.State = "healthy"
			case 1:
				r.State = "error"
			default:
				r.State = fmt.Sprintf("state %d", s)
			}
		case devlinkAttrReporterErrCount:
			r.ErrorCount = nd.Uint64()
		case devlinkAttrReporterRecCount:
			r.RecoverCount = nd.Uint64()
		}
	}
	return nil
}

// DevlinkHealth returns the devlink health reporters: live, asked of the
// kernel; in a fixture or snapshot, from its facts file.
func (h *Host) DevlinkHealth() (*DevlinkHealth, error) {
	if h.Live() {
		return readDevlinkHealth()
	}
	if h.facts == nil || h.facts.DevlinkHealth == nil {
		return nil, h.noFacts("devlink_health")
	}
	return h.facts.DevlinkHealth, nil
}
