package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
)

// DCB netlink constants from <linux/dcbnl.h> and <linux/rtnetlink.h>.
const (
	rtmGetDCB          = 78 // RTM_GETDCB
	dcbCmdIEEEGet      = 21 // DCB_CMD_IEEE_GET
	dcbAttrIfname      = 1  // DCB_ATTR_IFNAME
	dcbAttrIEEE        = 13 // DCB_ATTR_IEEE (nest)
	dcbAttrIEEEPFC     = 2  // DCB_ATTR_IEEE_PFC: struct ieee_pfc
	dcbAttrIEEEAppTab  = 3  // DCB_ATTR_IEEE_APP_TABLE (nest)
	dcbAttrIEEEApp     = 1  // DCB_ATTR_IEEE_APP: struct dcb_app
	dcbAttrDCBApp      = 2  // DCB_ATTR_DCB_APP: struct dcb_app, non-standard selectors (PCP)
	dcbmsgLen          = 4  // struct dcbmsg {u8 family, u8 cmd, u16 pad}
	ieeePFCMinLen      = 8  // pfc_cap, pfc_en, mbc, pad, u16 delay, pad to the u64 arrays
	dcbAppLen          = 4  // struct dcb_app {u8 selector, u8 priority, u16 protocol}
	nlaHdrLen          = 4
	nlaTypeMask        = 0x3fff // NLA_TYPE_MASK: drop NLA_F_NESTED / NLA_F_NET_BYTEORDER
	maxAppTableEntries = 1024
)

// ErrNoDCB is the DCB state of a driver that has no DCB operations: the
// kernel answers RTM_GETDCB with EOPNOTSUPP.
const ErrNoDCB = "EOPNOTSUPP"

// AppSelectorName names an IEEE 802.1Qaz APP selector.
func AppSelectorName(sel uint8) string {
	switch sel {
	case 1:
		return "ethertype"
	case 2:
		return "stream" // TCP/SCTP port
	case 3:
		return "dgram" // UDP/DCCP port
	case 4:
		return "any"
	case 5:
		return "dscp"
	case 255:
		return "pcp"
	}
	return "selector-" + strconv.Itoa(int(sel))
}

// ParseDCBReply decodes the payload of the kernel's answer to RTM_GETDCB /
// DCB_CMD_IEEE_GET (the bytes after the netlink header): a struct dcbmsg,
// then DCB_ATTR_IFNAME and the DCB_ATTR_IEEE nest holding DCB_ATTR_IEEE_PFC
// (struct ieee_pfc: u8 pfc_cap, u8 pfc_en, u8 mbc, u16 delay, u64
// requests[8], u64 indications[8]) and the APP table. A device whose driver
// reports no PFC leaves PFCCap and PFCEn zero.
func ParseDCBReply(b []byte) (DCB, error) {
	var d DCB
	if len(b) < dcbmsgLen {
		return d, fmt.Errorf("DCB reply of %d bytes: shorter than struct dcbmsg", len(b))
	}
	if b[1] != dcbCmdIEEEGet {
		return d, fmt.Errorf("DCB reply to command %d, want DCB_CMD_IEEE_GET (%d)", b[1], dcbCmdIEEEGet)
	}
	top, err := parseNLAttrs(b[dcbmsgLen:])
	if err != nil {
		return d, fmt.Errorf("DCB reply: %w", err)
	}
	sawIEEE := false
	for _, a := range top {
		if a.typ != dcbAttrIEEE {
			continue
		}
		sawIEEE = true
		inner, err := parseNLAttrs(a.val)
		if err != nil {
			return d, fmt.Errorf("DCB_ATTR_IEEE: %w", err)
		}
		for _, ia := range inner {
			switch ia.typ {
			case dcbAttrIEEEPFC:
				if len(ia.val) < ieeePFCMinLen {
					return d, fmt.Errorf("DCB_ATTR_IEEE_PFC of %d bytes: too short for struct ieee_pfc", len(ia.val))
				}
				d.PFCCap, d.PFCEn = ia.val[0], ia.val[1]
			case dcbAttrIEEEAppTab:
				apps, err := parseNLAttrs(ia.val)
				if err != nil {
					return d, fmt.Errorf("DCB_ATTR_IEEE_APP_TABLE: %w", err)
				}
				for _, app := range apps {
					if app.typ != dcbAttrIEEEApp && app.typ != dcbAttrDCBApp {
						continue
					}
					if len(app.val) < dcbAppLen {
						return d, fmt.Errorf("APP entry of %d bytes: too short for struct dcb_app", len(app.val))
					}
					if len(d.App) >= maxAppTableEntries {
						return d, fmt.Errorf("APP table longer than %d entries", maxAppTableEntries)
					}
					d.App = append(d.App, DCBApp{
						Selector: AppSelectorName(app.val[0]),
						Priority: int(app.val[1]),
						Protocol: int(binary.NativeEndian.Uint16(app.val[2:4])),
					})
				}
			}
		}
	}
	if !sawIEEE {
		return d, errors.New("DCB reply without DCB_ATTR_IEEE")
	}
	return d, nil
}

type nlAttr struct {
	typ uint16
	val []byte
}

// parseNLAttrs splits a run of netlink attributes (struct nlattr: u16 len,
// u16 type, payload padded to 4 bytes). A length that runs past the buffer
// is an error; trailing bytes shorter than a header are ignored.
func parseNLAttrs(b []byte) ([]nlAttr, error) {
	var out []nlAttr
	for len(b) >= nlaHdrLen {
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		t := binary.NativeEndian.Uint16(b[2:4]) & nlaTypeMask
		if l < nlaHdrLen || l > len(b) {
			return out, fmt.Errorf("attribute type %d: length %d outside the %d bytes left", t, l, len(b))
		}
		out = append(out, nlAttr{typ: t, val: b[nlaHdrLen:l]})
		next := (l + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return out, nil
}

// encodeDCBRequest builds the payload of an RTM_GETDCB / DCB_CMD_IEEE_GET
// request for one interface: struct dcbmsg and DCB_ATTR_IFNAME.
func encodeDCBRequest(ifname string) []byte {
	name := append([]byte(ifname), 0)
	attrLen := nlaHdrLen + len(name)
	b := make([]byte, dcbmsgLen+((attrLen+3)&^3))
	b[0] = 0 // AF_UNSPEC
	b[1] = dcbCmdIEEEGet
	binary.NativeEndian.PutUint16(b[dcbmsgLen:], uint16(attrLen))
	binary.NativeEndian.PutUint16(b[dcbmsgLen+2:], dcbAttrIfname)
	copy(b[dcbmsgLen+nlaHdrLen:], name)
	return b
}

// PFCPriorities lists the priorities whose bit is set in a PFC bitmap.
func PFCPriorities(bitmap uint8) []int {
	var out []int
	for p := 0; p < 8; p++ {
		if bitmap&(1<<p) != 0 {
			out = append(out, p)
		}
	}
	return out
}

// NetClass is where network interfaces are listed.
const NetClass = "/sys/class/net"

// Trust reads MLNX_OFED's /sys/class/net/<if>/qos/trust ("pcp" or "dscp").
// A missing file (upstream kernels) returns an error satisfying IsNotExist.
func (h *Host) Trust(ifname string) (string, error) {
	p := path.Join(NetClass, ifname, "qos", "trust")
	s, err := h.ReadAttr(p)
	if err != nil {
		return "", err
	}
	return ParseTrust(s)
}

// ParseTrust reads the trust state out of a qos/trust file, which prints
// the state alone ("dscp") or in a sentence ("Priority trust state: dscp").
func ParseTrust(s string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	switch {
	case strings.Contains(l, "dscp"):
		return "dscp", nil
	case strings.Contains(l, "pcp"):
		return "pcp", nil
	}
	return "", fmt.Errorf("trust %q: neither pcp nor dscp", trimForMsg(s))
}

// ECNState is the per-priority RoCE ECN enablement of one interface, as
// MLNX_OFED shows it under /sys/class/net/<if>/ecn/<point>/enable/<prio>:
// roce_np is the notification point (the receiver that sends CNPs),
// roce_rp the reaction point (the sender that slows down).
type ECNState struct {
	NP, RP  map[int]bool // priority → enabled; a priority absent is unknown
	Present bool         // the ecn directory exists
	Probs   []string     // files that exist but could not be read
}

// ECN reads the ECN enable files of an interface. Present is false on
// kernels without them (upstream drivers configure ECN elsewhere).
func (h *Host) ECN(ifname string) ECNState {
	st := ECNState{NP: map[int]bool{}, RP: map[int]bool{}}
	for _, point := range []string{"roce_np", "roce_rp"} {
		dir := path.Join(NetClass, ifname, "ecn", point, "enable")
		names, err := h.ReadDir(dir)
		if err != nil {
			if !IsNotExist(err) {
				st.Present = true
				st.Probs = append(st.Probs, err.Error())
			}
			continue
		}
		st.Present = true
		dst := st.NP
		if point == "roce_rp" {
			dst = st.RP
		}
		for _, n := range names {
			prio, err := strconv.Atoi(n)
			if err != nil || prio < 0 || prio > 7 {
				continue
			}
			s, err := h.ReadAttr(path.Join(dir, n))
			if err != nil {
				st.Probs = append(st.Probs, err.Error())
				continue
			}
			switch strings.TrimSpace(s) {
			case "1":
				dst[prio] = true
			case "0":
				dst[prio] = false
			default:
				st.Probs = append(st.Probs, fmt.Sprintf("%s: %q is not 0 or 1", h.Display(path.Join(dir, n)), trimForMsg(s)))
			}
		}
	}
	return st
}

// RoCEModePath is the rdma_cm configfs file holding the RoCE version that
// rdma_cm uses for new connections on one port. It exists only after
// someone created the device's directory in configfs.
func RoCEModePath(dev string, port int) string {
	return path.Join("/sys/kernel/config/rdma_cm", dev, "ports", strconv.Itoa(port), "default_roce_mode")
}

// DefaultRoCEMode reads RoCEModePath; a missing file returns an error
// satisfying IsNotExist.
func (h *Host) DefaultRoCEMode(dev string, port int) (string, error) {
	s, err := h.ReadAttr(RoCEModePath(dev, port))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// RoCETOSPath is the rdma_cm configfs file holding the IP ToS byte (DSCP <<
// 2 | ECN) that rdma_cm gives RoCE connections whose application set none.
// Like default_roce_mode it exists only after the device's directory was
// made in configfs.
func RoCETOSPath(dev string, port int) string {
	return path.Join("/sys/kernel/config/rdma_cm", dev, "ports", strconv.Itoa(port), "default_roce_tos")
}

// ParseRoCETOS reads default_roce_tos: a decimal byte, as the kernel prints it.
func ParseRoCETOS(s string) (uint8, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseUint(s, 10, 8)
	if err != nil {
		return 0, fmt.Errorf("default_roce_tos %q: not a ToS byte (0-255)", trimForMsg(s))
	}
	return uint8(v), nil
}

// DefaultRoCETOS reads RoCETOSPath; a missing file returns an error
// satisfying IsNotExist.
func (h *Host) DefaultRoCETOS(dev string, port int) (uint8, error) {
	p := RoCETOSPath(dev, port)
	s, err := h.ReadAttr(p)
	if err != nil {
		return 0, err
	}
	v, err := ParseRoCETOS(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", h.Display(p), err)
	}
	return v, nil
}

// ProcNetVLAN lists the 802.1Q VLAN interfaces, one file per interface.
const ProcNetVLAN = "/proc/net/vlan"

// IsVLAN tells whether an interface is an 802.1Q VLAN device (its frames
// carry a tag, and so a PCP); the 8021q module lists each one in
// /proc/net/vlan.
func (h *Host) IsVLAN(ifname string) (bool, error) {
	if ifname == "" || strings.ContainsAny(ifname, "/") || ifname == "." || ifname == ".." || ifname == "config" {
		return false, nil
	}
	return h.Exists(path.Join(ProcNetVLAN, ifname))
}
