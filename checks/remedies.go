package checks

import (
	"strings"
)

// Remedy texts that several checks share, so that a report gives the same
// advice wherever a finding appears. Every text here must agree with
// RDMA-FACTS; where it advises something that disturbs a working host, it
// says so and puts the harmless step first.

// subnetManagerFix is the remedy for an InfiniBand port that no subnet
// manager has configured (LID 0, SM LID 0, a port stuck in INIT). It looks
// for the fabric's SM before it advises starting one: a fabric run by UFM or
// a managed switch's SM must not get a second SM, which would join the SM
// election (IBA: the higher priority wins, then the lower port GUID) and,
// should it win, re-sweep the whole fabric with its own routing and
// partitions. portGUID is the port's GUID as opensm -g takes it
// ("0x0c42a103002b3c4e"); "" writes a placeholder. The text names the
// port's sysfs files with <dev> and <n>; subnetManagerFixFor fills them in.
func subnetManagerFix(portGUID string) string {
	guid, guidHint := portGUID, ""
	if guid == "" {
		guid, guidHint = "<port GUID>", " (the Port GUID that `ibstat <dev> <n>` shows)"
	}
	return "Look for the fabric's subnet manager before starting one. " +
		"`sminfo` (infiniband-diags) answers with the master SM's LID, GUID, priority and state when one runs — ask it from a host whose port on this fabric is ACTIVE: " +
		"on this port (`sminfo -C <dev> -P <n>`) it needs a LID, so its silence here proves nothing. " +
		"The port's `sm_lid` (`cat /sys/class/infiniband/<dev>/ports/<n>/sm_lid`, or \"SM lid\" in `ibstat <dev> <n>`) is the SM that configured it; 0 means none has. " +
		"The port needs a link first: phys_state `LinkUp` (`cat /sys/class/infiniband/<dev>/ports/<n>/phys_state`); `Polling` is a cable or switch-port fault no SM can fix. " +
		"The port's P_Keys (`grep -v 0x0000 /sys/class/infiniband/<dev>/ports/<n>/pkeys/*`) are programmed by that SM: a port left out of the partition the jobs use " +
		"(neither the default 0xffff/0x7fff nor the job's P_Key) reaches no peer in it, even once it is ACTIVE. " +
		"If an SM answers from elsewhere (UFM, a managed switch's SM, an opensm on another host) but this port stays unconfigured, fix it there: " +
		"the SM's log and partition configuration, this port's cable and switch port. Never start a second SM on such a fabric: it joins the SM election " +
		"and, if it wins (higher priority, or equal priority and lower GUID), re-sweeps the fabric with its own routing and partitions. " +
		"Only when no SM answers anywhere on the fabric (and no UFM or managed switch runs it): install opensm on ONE host (`apt install opensm` / `dnf install opensm`) and run it on the port " +
		"that faces this fabric, `opensm -g " + guid + "`" + guidHint + "; as a service, bind it to that port in the configuration its unit reads " +
		"(`systemctl cat opensm` shows which; opensm.conf's line is `guid " + guid + "`), then `systemctl enable --now opensm`. " +
		"Then wait for the port to go ACTIVE with a LID (`ibstat <dev> <n>`)."
}

// subnetManagerFixFor is subnetManagerFix with the port's device and number
// filled in.
func subnetManagerFixFor(dev, port, portGUID string) string {
	return strings.NewReplacer("<dev>", dev, "<n>", port).Replace(subnetManagerFix(portGUID))
}

// netdevModules are the NIC drivers whose functions carry Ethernet
// netdevs: removing one removes its netdevs, and with them its RDMA
// devices (the RDMA module sits on top of it).
var netdevModules = map[string]bool{
	"mlx5_core": true, "mlx4_core": true, "mlx4_en": true, "bnxt_en": true, "ice": true, "i40e": true,
	"qede": true, "cxgb4": true, "hns3": true, "mana": true,
}

// reloadInterrupts is the sentence every remedy that reloads (or removes)
// a driver or module carries: what the reload takes away from a working
// host, and that the node must be drained first. module is the module the
// remedy reloads; "" means "the driver's modules" in general.
func reloadInterrupts(module string) string {
	name := module
	if name == "" {
		name = "the driver's modules"
	}
	var b strings.Builder
	b.WriteString("Reloading " + name + " interrupts the host: ")
	switch {
	case module == "ib_uverbs":
		// ib_uverbs serves every device; the drivers' RDMA modules
		// (mlx5_ib, …) and rdma_ucm use its symbols, so modprobe -r
		// refuses while they are loaded.
		b.WriteString("every application loses its user-space verbs on every RDMA device — queue pairs, connections and registered memory — " +
			"and `modprobe -r ib_uverbs` refuses while a driver's RDMA module (mlx5_ib, …) or rdma_ucm uses it.")
	case netdevModules[module]:
		b.WriteString("every RDMA connection and all registered memory of every application on its devices are gone, and the Ethernet netdevs of its " +
			"functions go away with it — IP traffic, NFS and storage over those ports stop until the netdevs are back and configured again.")
	case module == "":
		b.WriteString("every RDMA connection and all registered memory of every application on its devices are gone, and on InfiniBand the IPoIB " +
			"interfaces (ib0, …) go with them; reloading the NIC driver itself (mlx5_core, bnxt_en, ice, …) also removes its Ethernet netdevs — " +
			"IP traffic, NFS and storage over those ports stop.")
	default:
		b.WriteString("every RDMA connection and all registered memory of every application on its devices are gone, and on InfiniBand the IPoIB " +
			"interfaces (ib0, …) that sit on those devices go with them — IP traffic, NFS and storage over IPoIB stop.")
	}
	if module == "" || strings.HasPrefix(module, "mlx5_") {
		b.WriteString(" On an mlx5 RoCE LAG (an mlx5_bond_N device) it breaks the bond's RDMA device.")
	}
	b.WriteString(" Drain the node first (Slurm: `scontrol update nodename=<node> state=drain reason=...`; Kubernetes: `kubectl drain <node>`).")
	return b.String()
}

// exclusiveNetnsFix explains devices hidden by the RDMA subsystem's
// exclusive network-namespace mode, and comes first in any remedy for a
// device that is missing or will not open there: in that mode an RDMA
// device belongs to one network namespace, netlink and the namespaced
// sysfs class show it only there, and ib_uverbs refuses an open from any
// other namespace with EPERM (rdma_dev_access_netns). The mode is chosen on
// purpose (containers own their devices), so the fix is to run in the
// device's namespace, not to switch the mode. devs names the devices
// ("mlx5_0, mlx5_1"); "" for the devices in general.
func exclusiveNetnsFix(devs string) string {
	what := "each RDMA device"
	if devs != "" {
		what = devs
	}
	return "The RDMA subsystem is in exclusive network-namespace mode (`rdma system` shows `netns exclusive`): " + what +
		" is visible and opens only inside the one network namespace it belongs to, and this process runs in another " +
		"(a uverbs open from elsewhere fails with EPERM). Run the check and the applications in the device's namespace: " +
		"the pod or container the device was given to (an RDMA CNI moves it there with `rdma dev set <dev> netns <ns>`), " +
		"or on the host `ip netns exec <ns> …` / `nsenter --net=/proc/<pid>/ns/net …` of a process in it; `rdma dev` there lists it. " +
		"Exclusive mode is set on purpose (ib_core `netns_mode=0` or `rdma system set netns exclusive`) so that containers own their devices: " +
		"do not switch it to shared on a host whose containers rely on it (the kernel refuses the change while other network namespaces exist)."
}
