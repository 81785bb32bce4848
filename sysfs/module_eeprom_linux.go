//go:build linux

package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ModuleEEPROM reads one interface's plug-in module: the lower page, then
// the half pages ModuleReadPlan names for what the lower page says the
// module is. It asks the ethtool generic-netlink family
// (ETHTOOL_MSG_MODULE_EEPROM_GET, Linux 5.13+; the kernel itself falls
// back to a driver's older get_module_eeprom there); where netlink has no
// such request it uses the SIOCETHTOOL ioctl. A driver with neither
// answers EOPNOTSUPP, which is recorded (Err), not returned as an error.
func (s netlinkSource) ModuleEEPROM(ifname string) (ModuleEEPROM, error) {
	r, err := s.newEthtoolReader(ifname)
	if err != nil {
		return s.moduleByIoctl(ifname, err)
	}
	defer r.sock.Close()
	lower, err := r.read(ModuleI2CA0, 0, 0, 0)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// An old kernel's ethtool family lacks the request, or the
		// driver lacks module support: the ioctl tells which.
		return s.moduleByIoctl(ifname, err)
	}
	if err != nil {
		return moduleErr(ifname, err)
	}
	m := ModuleEEPROM{Source: "netlink", Pages: []ModulePage{NewModulePage(ModuleI2CA0, 0, 0, 0, lower)}}
	for _, want := range ModuleReadPlan(lower) {
		b, err := r.read(want.I2C, want.Page, want.Bank, want.Offset)
		if err != nil {
			want.Err = errnoName(err)
			m.Pages = append(m.Pages, want)
			continue
		}
		m.Pages = append(m.Pages, NewModulePage(want.I2C, want.Page, want.Bank, want.Offset, b))
	}
	return m, nil
}

// moduleErr records a failed first read: an errno is the module's state
// (no module support, an empty cage, no privilege); anything else is an
// error of the reader.
func moduleErr(ifname string, err error) (ModuleEEPROM, error) {
	var errno unix.Errno
	if errors.As(err, &errno) {
		return ModuleEEPROM{Err: errnoName(errno)}, nil
	}
	return ModuleEEPROM{}, fmt.Errorf("module EEPROM of %s: %w", ifname, err)
}

// errnoName names an errno as the facts file records it: EOPNOTSUPP under
// that name (Linux's ENOTSUP is the same number, and ErrnoName picks it).
func errnoName(err error) string {
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return err.Error()
	}
	if errno == unix.EOPNOTSUPP {
		return ErrNoModule
	}
	return unix.ErrnoName(errno)
}

// ethtoolReader asks one interface's module for half pages over one
// generic-netlink socket.
type ethtoolReader struct {
	sock   *nl.SocketHandle
	family uint16
	ifname string
}

func (s netlinkSource) newEthtoolReader(ifname string) (*ethtoolReader, error) {
	h, err := s.handle(unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("netlink (generic): %w", err)
	}
	fam, err := h.GenlFamilyGet(unix.ETHTOOL_GENL_NAME)
	h.Close()
	if err != nil {
		// Kernels before 5.6 have no ethtool family.
		return nil, fmt.Errorf("generic netlink family %q: %w", unix.ETHTOOL_GENL_NAME, err)
	}
	sock, err := nl.GetNetlinkSocketAt(s.ns, netns.None(), unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("netlink (generic): %w", err)
	}
	tv := unix.NsecToTimeval(netlinkTimeout.Nanoseconds())
	if err := sock.SetReceiveTimeout(&tv); err != nil {
		sock.Close()
		return nil, err
	}
	return &ethtoolReader{sock: &nl.SocketHandle{Socket: sock}, family: fam.ID, ifname: ifname}, nil
}

// read asks for one half page (ETHTOOL_A_MODULE_EEPROM_OFFSET/LENGTH/PAGE/
// BANK/I2C_ADDRESS, the device named in the request header) and returns
// ETHTOOL_A_MODULE_EEPROM_DATA.
func (r *ethtoolReader) read(i2c, page, bank uint8, offset int) ([]byte, error) {
	req := nl.NewNetlinkRequest(int(r.family), 0)
	req.AddData(&nl.Genlmsg{Command: unix.ETHTOOL_MSG_MODULE_EEPROM_GET, Version: unix.ETHTOOL_GENL_VERSION})
	hdr := nl.NewRtAttr(unix.NLA_F_NESTED|ethtoolAModuleEEPROMHeader, nil)
	hdr.AddRtAttr(unix.ETHTOOL_A_HEADER_DEV_NAME, nl.ZeroTerminated(r.ifname))
	req.AddData(hdr)
	req.AddData(nl.NewRtAttr(ethtoolAModuleEEPROMOffset, nl.Uint32Attr(uint32(offset))))
	req.AddData(nl.NewRtAttr(ethtoolAModuleEEPROMLength, nl.Uint32Attr(ModuleHalfPage)))
	req.AddData(nl.NewRtAttr(ethtoolAModuleEEPROMPage, nl.Uint8Attr(page)))
	req.AddData(nl.NewRtAttr(ethtoolAModuleEEPROMBank, nl.Uint8Attr(bank)))
	req.AddData(nl.NewRtAttr(ethtoolAModuleEEPROMI2C, nl.Uint8Attr(i2c)))
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_GENERIC: r.sock}
	msgs, err := req.Execute(unix.NETLINK_GENERIC, 0)
	if err != nil {
		return nil, fmt.Errorf("MODULE_EEPROM_GET %s %s: %w", r.ifname, modulePageName(i2c, page, bank, offset), err)
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("MODULE_EEPROM_GET %s: no answer", r.ifname)
	}
	return ParseModuleEEPROMReply(msgs[0])
}

// moduleByIoctl reads the module through SIOCETHTOOL: ETHTOOL_GMODULEINFO
// for its layout and length, ETHTOOL_GMODULEEEPROM for the bytes, cut into
// the half pages the netlink request would have returned. nlErr is why
// netlink did not answer, kept when the ioctl cannot either.
func (s netlinkSource) moduleByIoctl(ifname string, nlErr error) (ModuleEEPROM, error) {
	if s.ns.IsOpen() {
		// The ioctl socket would be this process's namespace.
		return moduleErr(ifname, nlErr)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return ModuleEEPROM{}, fmt.Errorf("module EEPROM of %s: socket: %w", ifname, err)
	}
	defer unix.Close(fd)
	// struct ethtool_modinfo {u32 cmd, type, eeprom_len, reserved[8]}
	info := make([]byte, 44)
	binary.NativeEndian.PutUint32(info[0:], unix.ETHTOOL_GMODULEINFO)
	if err := ethtoolIoctl(fd, ifname, info); err != nil {
		return moduleErr(ifname, err)
	}
	typ, eepromLen := binary.NativeEndian.Uint32(info[4:]), binary.NativeEndian.Uint32(info[8:])
	if eepromLen == 0 || eepromLen > maxIoctlEEPROM {
		return ModuleEEPROM{}, fmt.Errorf("ETHTOOL_GMODULEINFO %s: EEPROM length %d", ifname, eepromLen)
	}
	buf := make([]byte, 16+eepromLen) // struct ethtool_eeprom {cmd, magic, offset, len} + data
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GMODULEEEPROM)
	binary.NativeEndian.PutUint32(buf[12:], eepromLen)
	if err := ethtoolIoctl(fd, ifname, buf); err != nil {
		return moduleErr(ifname, err)
	}
	return ModuleEEPROM{Source: "ioctl", Pages: IoctlPages(typ, buf[16:])}, nil
}

// maxIoctlEEPROM bounds the ioctl's EEPROM length: SFF-8636's 640 bytes is
// the most the kernel's layouts define.
const maxIoctlEEPROM = 640
