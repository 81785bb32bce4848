package probe

import (
	"fmt"
	"syscall"
)

// causeInfo is what the cause texts quote: the limits in force when a verb
// failed.
type causeInfo struct {
	Device       string
	UverbsDev    string // "uverbs0"
	MemlockBytes int64  // -1 unlimited
	MRBytes      int
	CQEAsked     int
	QPAsked      Caps
	Caps         *DeviceCaps
}

func (c *causeInfo) memlock() string {
	switch {
	case c.MemlockBytes < 0:
		return "unlimited"
	case c.MemlockBytes%1024 == 0:
		return fmt.Sprintf("%d KiB", c.MemlockBytes/1024)
	}
	return fmt.Sprintf("%d bytes", c.MemlockBytes)
}

// cause says what errno means when verb fails, in the terms an operator
// can act on. It is empty when the errno has no meaning specific to the
// verb beyond its name.
func cause(verb string, errno syscall.Errno, c *causeInfo) string {
	node := "/dev/infiniband/" + c.UverbsDev
	if c.UverbsDev == "" {
		node = "the /dev/infiniband/uverbsN node of " + c.Device
	}
	switch errno {
	case syscall.EIO:
		return "the device reported an I/O error: it may be in a fatal state (firmware or PCIe error); read dmesg and reset the driver"
	case syscall.ENODEV, syscall.ENXIO:
		if verb != "ibv_open_device" {
			return "the device went away while in use (driver unloaded, device removed or reset)"
		}
	}
	switch verb {
	case "ibv_get_device_list":
		if errno == syscall.ENOSYS {
			return "the kernel has no InfiniBand support (no ib_uverbs): load ib_uverbs, or use a kernel built with CONFIG_INFINIBAND_USER_ACCESS"
		}
	case "ibv_open_device":
		switch errno {
		case syscall.EACCES, syscall.EPERM:
			return "no permission to open " + node + ": its mode or group (udev rule) does not let this user open it; mode 0666 is the rdma-core default"
		case syscall.ENOENT, syscall.ENODEV, syscall.ENXIO:
			return node + " is missing or belongs to no device: ib_uverbs not loaded, or the device node was not created (udev, container without /dev/infiniband)"
		case syscall.EMFILE, syscall.ENFILE:
			return "out of file descriptors (ulimit -n)"
		case syscall.ENOMEM:
			return "the kernel or the provider could not allocate the context"
		case syscall.EPROTONOSUPPORT, syscall.ENOSYS, syscall.EOPNOTSUPP:
			return "the provider library and the kernel driver disagree on the uverbs ABI: update rdma-core or the kernel so they match"
		}
	case "ibv_alloc_pd":
		if errno == syscall.ENOMEM {
			return "the device has no protection domain left or the kernel is out of memory"
		}
	case "ibv_reg_mr":
		switch errno {
		case syscall.ENOMEM:
			return fmt.Sprintf("pinning %d bytes exceeds RLIMIT_MEMLOCK (max locked memory is %s for this process): raise it (limits.conf memlock, systemd LimitMEMLOCK=infinity, or CAP_IPC_LOCK / `capabilities.add: [IPC_LOCK]` in a container)",
				c.MRBytes, c.memlock())
		case syscall.EFAULT:
			return "the buffer is not mapped memory of this process"
		case syscall.EACCES:
			return "write access asked for memory mapped read-only"
		case syscall.EINVAL:
			return "the access flags or the length are not accepted by this device"
		case syscall.EPERM:
			return "the device refuses this registration for this user (capabilities)"
		}
	case "ibv_create_cq":
		switch errno {
		case syscall.EINVAL:
			if c.Caps != nil {
				return fmt.Sprintf("cqe %d against the device's max_cqe %d, or a completion vector out of range", c.CQEAsked, c.Caps.MaxCQE)
			}
			return "cqe above the device's max_cqe, or a completion vector out of range"
		case syscall.ENOMEM:
			return fmt.Sprintf("the provider pins the CQ's ring: RLIMIT_MEMLOCK (%s) or device memory is exhausted", c.memlock())
		}
	case "ibv_create_qp":
		switch errno {
		case syscall.EINVAL:
			if c.Caps != nil {
				return fmt.Sprintf("the QP's caps against the device limits: asked max_send_wr %d, max_recv_wr %d, max_send_sge %d, max_recv_sge %d; the device allows max_qp_wr %d, max_sge %d",
					c.QPAsked.MaxSendWR, c.QPAsked.MaxRecvWR, c.QPAsked.MaxSendSGE, c.QPAsked.MaxRecvSGE, c.Caps.MaxQPWR, c.Caps.MaxSGE)
			}
			return "the QP's caps (max_send_wr, max_recv_wr, max_sge) exceed the device limits"
		case syscall.ENOMEM:
			return fmt.Sprintf("the provider pins the QP's rings: RLIMIT_MEMLOCK (%s) or the device's QP memory is exhausted", c.memlock())
		case syscall.EPERM:
			return "this QP type needs a capability the process lacks (CAP_NET_RAW for raw packet QPs)"
		case syscall.EOPNOTSUPP, syscall.ENOSYS:
			return "the device does not support RC queue pairs"
		}
	case "ibv_modify_qp":
		switch errno {
		case syscall.EINVAL:
			return "the attributes or the attribute mask do not fit this transition (port, P_Key index, GID index, path MTU above the port's)"
		case syscall.ENODATA, syscall.ENOENT:
			return "the source GID index names an empty GID table entry"
		case syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH:
			return "no route to the destination GID (RoCE: the netdev has no neighbour/route for it)"
		}
	case "ibv_create_ah":
		switch errno {
		case syscall.EINVAL:
			return "the kernel refused the address: on RoCE an address handle needs is_global=1 with a GRH (source GID index and destination GID); the port number or the GID index may not exist"
		case syscall.ENODATA, syscall.ENOENT:
			return "the source GID index names an empty GID table entry"
		case syscall.ETIMEDOUT, syscall.EHOSTUNREACH, syscall.ENETUNREACH:
			return "no route or neighbour for the destination GID's address (RoCE resolves it to a MAC address when the handle is created)"
		case syscall.ENOMEM:
			return "the device has no address handle left or the kernel is out of memory"
		}
	case "ibv_query_port":
		if errno == syscall.EINVAL {
			return "the port number does not exist on this device"
		}
	case "ibv_dereg_mr":
		if errno == syscall.EBUSY {
			return "a memory window is still bound to the region"
		}
	case "ibv_dealloc_pd", "ibv_destroy_cq":
		if errno == syscall.EBUSY {
			return "objects still use it: destroy QPs first, then MRs and CQs, then the PD"
		}
	case "ibv_post_send", "ibv_post_recv":
		switch errno {
		case syscall.ENOMEM:
			return "the work queue is full: more outstanding work requests than max_send_wr/max_recv_wr"
		case syscall.EINVAL:
			return "the work request is not valid for the QP's type or state (too many SGEs, opcode, QP not in RTS/RTR)"
		}
	case "ibv_get_async_event":
		if errno == syscall.EAGAIN {
			return "no event pending"
		}
	}
	return ""
}
