//go:build linux

package sysfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Ethtool asks every interface named for its FEC state and statistics, its
// link state and link modes (ethtool generic netlink) and its driver
// statistics (the SIOCETHTOOL ioctl, asked on the same socket: the kernel
// serves it on any socket, in the socket's network namespace), over one
// socket for the whole run. A kernel without the ethtool netlink family
// (before 5.6) leaves the netlink parts with that error; the statistics
// still come.
func (s netlinkSource) Ethtool(ifnames []string) (map[string]EthtoolAnswer, error) {
	sock, err := nl.GetNetlinkSocketAt(s.ns, netns.None(), unix.NETLINK_GENERIC)
	if err != nil {
		return nil, fmt.Errorf("netlink (generic): %w", err)
	}
	defer sock.Close()
	tv := unix.NsecToTimeval(netlinkTimeout.Nanoseconds())
	if err := sock.SetReceiveTimeout(&tv); err != nil {
		return nil, fmt.Errorf("netlink (generic): %w", err)
	}
	if err := sock.SetSendTimeout(&tv); err != nil {
		return nil, fmt.Errorf("netlink (generic): %w", err)
	}
	g := &ethtoolGenl{sock: sock}
	gerr := g.resolve()
	out := make(map[string]EthtoolAnswer, len(ifnames))
	for _, name := range ifnames {
		var a EthtoolAnswer
		if gerr != nil {
			a.FECErr, a.LinkErr, a.ModesErr = gerr.Error(), gerr.Error(), gerr.Error()
		} else {
			g.answer(name, &a)
		}
		a.Stats, a.StatsErr = ethtoolStats(sock.GetFd(), name)
		out[name] = a
	}
	return out, nil
}

// ethtoolGenl is one generic-netlink socket with the ethtool family's ID.
type ethtoolGenl struct {
	sock   *nl.NetlinkSocket
	family uint16
}

// resolve finds the "ethtool" family's ID (CTRL_CMD_GETFAMILY) on the socket.
func (g *ethtoolGenl) resolve() error {
	name := append([]byte(unix.ETHTOOL_GENL_NAME), 0)
	payload := append([]byte{unix.CTRL_CMD_GETFAMILY, 2, 0, 0}, nlAttrBytes(unix.CTRL_ATTR_FAMILY_NAME, name)...)
	msgs, err := g.exchange(unix.GENL_ID_CTRL, payload)
	if errors.Is(err, unix.ENOENT) {
		return errors.New("the kernel has no ethtool netlink family (Linux 5.6+)")
	}
	if err != nil {
		return fmt.Errorf("netlink CTRL_CMD_GETFAMILY ethtool: %w", err)
	}
	for _, m := range msgs {
		attrs, err := genlAttrs(m)
		if err != nil {
			continue
		}
		for _, a := range attrs {
			if a.typ == unix.CTRL_ATTR_FAMILY_ID && len(a.val) >= 2 {
				g.family = binary.NativeEndian.Uint16(a.val)
			}
		}
	}
	if g.family == 0 {
		return errors.New("netlink CTRL_CMD_GETFAMILY ethtool: no family ID in the answer")
	}
	return nil
}

// exchange sends one request on the shared socket and returns the replies.
func (g *ethtoolGenl) exchange(family uint16, payload []byte) ([][]byte, error) {
	req := nl.NewNetlinkRequest(int(family), 0) // errors come as NLMSG_ERROR; no ACK left behind
	req.AddRawData(payload)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_GENERIC: {Socket: g.sock}}
	return req.Execute(unix.NETLINK_GENERIC, 0)
}

// get asks one ethtool GET command about an interface; the error is the
// errno name where the kernel refused ("EOPNOTSUPP"), else the words.
func (g *ethtoolGenl) get(cmd uint8, ifname string, flags uint32) ([]byte, string) {
	payload := append([]byte{cmd, unix.ETHTOOL_GENL_VERSION, 0, 0}, EncodeEthtoolHeader(ifname, flags)...)
	msgs, err := g.exchange(g.family, payload)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			if errno == unix.ENOTSUP {
				return nil, ErrNotSupported
			}
			return nil, unix.ErrnoName(errno)
		}
		return nil, err.Error()
	}
	if len(msgs) == 0 {
		return nil, "no answer"
	}
	return msgs[0], ""
}

// answer fills the netlink parts of one interface's answer.
func (g *ethtoolGenl) answer(ifname string, a *EthtoolAnswer) {
	if b, e := g.get(unix.ETHTOOL_MSG_FEC_GET, ifname, ethtoolFlagStats|ethtoolFlagCompact); e != "" {
		a.FECErr = e
	} else if f, err := ParseFECReply(b); err != nil {
		a.FECErr = err.Error()
	} else {
		a.FEC = &f
	}
	if b, e := g.get(unix.ETHTOOL_MSG_LINKSTATE_GET, ifname, 0); e != "" {
		a.LinkErr = e
	} else if l, err := ParseLinkStateReply(b); err != nil {
		a.LinkErr = err.Error()
	} else {
		a.Link = &l
	}
	if b, e := g.get(unix.ETHTOOL_MSG_LINKMODES_GET, ifname, ethtoolFlagCompact); e != "" {
		a.ModesErr = e
	} else if m, err := ParseLinkModesReply(b); err != nil {
		a.ModesErr = err.Error()
	} else {
		a.Modes = &m
	}
}

// ethSSStats is ETH_SS_STATS, the string set of the driver statistics.
const ethSSStats = 1

// maxEthtoolStats bounds the driver statistics read: mlx5 with many
// channels has a few thousand.
const maxEthtoolStats = 1 << 16

// ifreqData is struct ifreq with ifr_data (include/uapi/linux/if.h): the
// name, then a pointer, padded to the size of the union.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func ethtoolIoctl(fd int, ifname string, buf []byte) error {
	var ifr ifreqData
	if len(ifname) >= unix.IFNAMSIZ {
		return unix.EINVAL
	}
	copy(ifr.name[:], ifname)
	ifr.data = unsafe.Pointer(&buf[0])
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	runtime.KeepAlive(buf)
	if errno != 0 {
		return errno
	}
	return nil
}

// ethtoolStats is `ethtool -S`: ETHTOOL_GSSET_INFO for the count of
// ETH_SS_STATS, ETHTOOL_GSTRINGS for the names, ETHTOOL_GSTATS for the
// values (include/uapi/linux/ethtool.h, net/ethtool/ioctl.c).
func ethtoolStats(fd int, ifname string) ([]EthtoolStat, string) {
	info := make([]byte, 8+8+4) // cmd, reserved, sset_mask, data[1]
	binary.NativeEndian.PutUint32(info, unix.ETHTOOL_GSSET_INFO)
	binary.NativeEndian.PutUint64(info[8:], 1<<ethSSStats)
	if err := ethtoolIoctl(fd, ifname, info); err != nil {
		return nil, errnoWord(err)
	}
	n := 0
	if binary.NativeEndian.Uint64(info[8:])&(1<<ethSSStats) != 0 {
		n = int(binary.NativeEndian.Uint32(info[16:]))
	}
	if n == 0 {
		return nil, ErrNotSupported // the driver has no statistics set
	}
	if n > maxEthtoolStats {
		return nil, fmt.Sprintf("%d statistics: more than %d", n, maxEthtoolStats)
	}
	names := make([]byte, 12+n*ethGStringLen)
	binary.NativeEndian.PutUint32(names, unix.ETHTOOL_GSTRINGS)
	binary.NativeEndian.PutUint32(names[4:], ethSSStats)
	binary.NativeEndian.PutUint32(names[8:], uint32(n))
	if err := ethtoolIoctl(fd, ifname, names); err != nil {
		return nil, "ETHTOOL_GSTRINGS: " + errnoWord(err)
	}
	vals := make([]byte, 8+n*8)
	binary.NativeEndian.PutUint32(vals, unix.ETHTOOL_GSTATS)
	binary.NativeEndian.PutUint32(vals[4:], uint32(n))
	if err := ethtoolIoctl(fd, ifname, vals); err != nil {
		return nil, "ETHTOOL_GSTATS: " + errnoWord(err)
	}
	return DecodeEthtoolStats(names[12:], vals[8:], n), ""
}

// errnoWord is an errno's name ("EOPNOTSUPP"), else the error's words.
func errnoWord(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if errno == unix.ENOTSUP {
			return ErrNotSupported
		}
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
	}
	return err.Error()
}
