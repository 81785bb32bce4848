# The VM suite's scenarios, run in this order in one boot (busybox ash).
#
#   scenario NAME [--key value]... -- RDMADOCTOR-ARGS...
#
# Each one starts from the healthy host (rxe0 ACTIVE on dummy0 with
# 192.0.2.1/24); --break lines (root, ash) break it, rdmadoctor runs, and the
# harness restores the healthy host by itself (modules, dummy0, rxe0, uverbs
# nodes, hidden files): a scenario never undoes its own break.
#
# What the host asserts (testdata/vm/rdvm/verify.go):
#   --needs ID[,ID]     the scenario is PENDING, not passed, until one of these
#                       checks is in `rdmadoctor list`; then --exit/--root apply
#   --exit N[,N]        allowed exit codes
#   --root ID[,ID]|none allowed report root_cause (JSON output only)
#   --status ID=S[|S]   a check's status; PENDING while ID is not in the list
#   --mentions WORD     the root-cause check's text names WORD
#   --refs 1            compare the JSON inventory with ibv_devices, ibv_devinfo -v,
#                       rdma -j link/dev and ip -j addr, run in the same guest
#   --kind snapshot     live run, `rdmadoctor snapshot [--redact]`, replay of the
#                       snapshot: --exit holds for both, the replayed JSON equals
#                       the live one but for started, duration_ms and host.root
#                       (with --redact 1: statuses, exit code, root cause)
#   --kernel-log TEXT   (snapshot) the snapshot's kernel.log holds TEXT; repeated:
#                       each after the one before
#   --kernel-quiet RE   (run) the kernel log lines written during the run all
#                       match the regular expression RE
#   --refs 1 also runs `rdmadoctor inventory` (text and JSON) beside the tools and
#                       compares both with them
# What the guest acts on:
#   --break 'SHELL'     helpers: hide PATH... (a file "removed", restored after),
#                       wait_ready (rxe0 ACTIVE again), wait_active DEV [GID];
#                       added rdma links and netdevs are deleted afterwards
#   --user U --memlock KiB   run rdmadoctor as U with RLIMIT_MEMLOCK KiB
#   --netns NAME        run rdmadoctor inside that network namespace, as a pod
#                       (`ip netns exec`: its own /sys/class/net); the harness
#                       deletes the namespaces and restores shared netns mode
#   --kind run|killprobe|timing|snapshot|rerun   (timing: --runs N --ref 'CMD';
#                       snapshot: --redact 1 captures with --redact; rerun: three
#                       runs with one --state, --between 'SHELL' after the first;
#                       the second is the scenario's report, --prime-status and
#                       --after-status ID=S, --after-exit N judge the others)
# Every JSON run is also checked for: exit_code == the process's status, and
# every level<=N check of `rdmadoctor list` present in checks[].

LIB=/usr/lib/x86_64-linux-gnu

scenario healthy-l1-json --needs pci.device --exit 0 --root none --refs 1 \
	--status kernel.modules=pass --status uverbs.nodes=pass --status libibverbs.install=pass \
	--status libibverbs.devices=pass --status limits.memlock=pass --status port.state=pass \
	--status roce.config=pass \
	-- --level 1 --format json

scenario healthy-l1-text --needs pci.device --exit 0 -- --level 1 --no-color

# Jumbo frames: the RoCE active MTU follows the netdev's (4096 at 9000).
scenario jumbo-mtu --needs pci.device --break '/usr/bin/ip link set dummy0 mtu 9000 && wait_ready' \
	--exit 0 --root none --refs 1 -- --level 1 --format json

# Two devices: each is judged and inventoried, field by field.
scenario two-rxe-devices --needs pci.device \
	--break '/usr/bin/ip link add dummy1 type dummy && /usr/bin/ip link set dummy1 up &&
		/usr/bin/ip addr add 198.51.100.1/24 dev dummy1 && rdma link add rxe1 type rxe netdev dummy1 &&
		wait_active rxe1 0000:0000:0000:0000:0000:ffff:c633:6401' \
	--exit 0 --root none --refs 1 -- --level 1 --format json

# Every probe, probe.cq_overflow included, writes nothing to the kernel log
# on this kernel's rxe but ib_core's "speed is unknown" line, which every
# query of a port whose netdev has no speed (dummy0) makes.
scenario healthy-l2 --needs pci.device --exit 0 --root none \
	--status verbs.resources=pass --status verbs.qp_state=pass --status probe.send_poll=pass \
	--status probe.cq_overflow=pass --status probe.destroy_order=pass --status probe.ud=pass \
	--status probe.gpu_memory=skip \
	--kernel-quiet 'dummy0 speed is unknown, defaulting to 1000$' \
	-- --level 2 --format json

# rdma_rxe needs ib_uverbs, so only the connection-manager modules can go.
scenario no-rdma-cm --needs kernel.modules --break 'rmmod rdma_ucm rdma_cm' \
	--exit 0 --root none --status kernel.modules=warn -- --level 1 --format json

# --fail-on warn counts only the named checks' warnings: pci.device, a
# prerequisite, still warns "only software RDMA" here, but does not count.
scenario no-rdma-cm-fail-on-warn --needs kernel.modules --break 'rmmod rdma_ucm rdma_cm' \
	--exit 13 --root kernel.modules --status kernel.modules=warn --status pci.device=warn --mentions rdma_cm \
	-- --level 1 --format json --check kernel.modules --fail-on warn

scenario no-uverbs-node --needs uverbs.nodes --break 'rm /dev/infiniband/uverbs0' \
	--exit 15 --root uverbs.nodes -- --level 1 --format json

scenario no-rxe-link --needs pci.device --break 'rdma link delete rxe0' \
	--exit 10 --root pci.device -- --level 1 --format json

scenario no-rxe-provider --needs libibverbs.install,libibverbs.devices \
	--break "hide $LIB/libibverbs/librxe-*.so" \
	--exit 16,17 --root libibverbs.install,libibverbs.devices --mentions librxe \
	-- --level 1 --format json

scenario no-libibverbs --needs libibverbs.install,libibverbs.devices \
	--break "hide $LIB/libibverbs.so.1 $LIB/libibverbs.so.1.*; ldconfig" \
	--exit 16,17 --root libibverbs.install,libibverbs.devices --mentions libibverbs \
	-- --level 1 --format json

scenario dummy0-down --needs port.state --break '/usr/bin/ip link set dummy0 down' \
	--exit 19 --root port.state -- --level 1 --format json

scenario dummy0-no-ip --needs roce.config --break '/usr/bin/ip addr flush dev dummy0' \
	--exit 20 --root roce.config -- --level 1 --format json

# Pods (issue 27): rdmadoctor run from a network namespace that does not hold
# the RoCE netdev dummy0, as in a Kubernetes pod. In shared mode a Multus
# macvlan or ipvlan `net1` on dummy0, moved into the namespace with an
# address, carries RoCE: the kernel adds its address to rxe0's GID table
# (an upper device of the port's netdev), so the pod is healthy.
POD_NET1='/usr/bin/ip netns add pod && /usr/bin/ip link set net1 netns pod &&
	/usr/bin/ip -n pod addr add 192.0.2.10/24 dev net1 && /usr/bin/ip -n pod link set net1 up &&
	wait_active rxe0 0000:0000:0000:0000:0000:ffff:c000:020a'
scenario pod-shared-macvlan --needs roce.config --netns pod \
	--break "/usr/bin/ip link add net1 link dummy0 type macvlan mode bridge && $POD_NET1" \
	--exit 0 --root none --status roce.config=pass --status port.state=pass \
	-- --level 1 --format json

scenario pod-shared-ipvlan --needs roce.config --netns pod \
	--break "/usr/bin/ip link add net1 link dummy0 type ipvlan mode l2 && $POD_NET1" \
	--exit 0 --root none --status roce.config=pass --status port.state=pass \
	-- --level 1 --format json

# A pod with no interface on the RDMA NIC: it sees rxe0 (shared mode) but
# none of its networks; roce.config says how to give it one.
scenario pod-shared-no-network --needs roce.config --netns pod \
	--break '/usr/bin/ip netns add pod' \
	--exit 20 --root roce.config --status roce.config=fail \
	-- --level 1 --format json

# Exclusive mode: a device is visible only in its own namespace, and rxe
# refuses to move (`rdma dev set rxe0 netns pod`: EOPNOTSUPP), so the pod
# sees no RDMA device at all; the verdict must say why (the mode, the
# device left in another namespace), not send anyone to the BIOS.
scenario pod-exclusive-no-device --needs rdma.devices --netns pod \
	--break 'rdma system set netns exclusive && /usr/bin/ip netns add pod' \
	--exit 10 --root pci.device --mentions exclusive --status pci.device=fail \
	-- --level 1 --format json

# Root holds CAP_IPC_LOCK, which lifts the limit: run as a plain user.
scenario unprivileged-memlock-64k --needs limits.memlock --user rdtest --memlock 64 \
	--exit 18 --root limits.memlock -- --level 1 --format json

# Snapshots (issue 6): the live level-1 run, `rdmadoctor snapshot` and
# `rdmadoctor --root snap.tar.gz` in the same state; the replay must equal
# the live report (except started, duration_ms, host.root). Redacted: the
# same statuses, exit code and root cause.
scenario snapshot-roundtrip --needs pci.device --kind snapshot \
	--exit 0 --root none -- --level 1 --format json

scenario snapshot-roundtrip-redacted --needs pci.device --kind snapshot --redact 1 \
	--exit 0 --root none -- --level 1 --format json

scenario snapshot-dummy0-down --needs port.state --kind snapshot --break '/usr/bin/ip link set dummy0 down' \
	--exit 19 --root port.state -- --level 1 --format json

# The kernel log travels with a snapshot: a marker written in the driver's
# name, then rdma_rxe reloaded (its init logs "rdma_rxe: loaded"), just
# before the capture; the snapshot's kernel.log must hold both, in order.
scenario snapshot-kernel-log --needs pci.device --kind snapshot \
	--break 'echo "<4>rdma_rxe: rdvm provoked message" >/dev/kmsg && rdma link delete rxe0 &&
		rmmod rdma_rxe && mod_load rdma_rxe && rdma link add rxe0 type rxe netdev dummy0 && wait_ready' \
	--kernel-log 'rdvm provoked message' --kernel-log 'rdma_rxe: loaded' \
	--exit 0 --root none -- --level 1 --format json

# SIGKILL the level-2 child while it holds verbs objects: nothing may leak
# (`rdma -j resource` back to its counts from before the run).
# The run must say so: a level-2 check is the root cause (error: it could
# not look), so the verdict is unknown — exit 4, not 0.
scenario probe-child-killed --needs verbs.resources --kind killprobe \
	--exit 4 \
	--root verbs.resources,verbs.qp_state,probe.send_poll,probe.cq_overflow,probe.destroy_order,probe.ud,probe.gpu_memory \
	-- --level 2 --format json

scenario timing --needs pci.device --kind timing --runs 20 --ref 'ibv_devinfo -v' \
	-- --level 1 --no-color

# Two processes over rxe0, as two hosts would be: `peer serve --once` on the
# guest's address (in the background, polled until it listens: 18516 is
# 0x4854 in /proc/net/tcp or tcp6), then `peer test` against it: an RC connection
# across the two processes, SEND/RECV, WRITE, READ, latency, bandwidth and
# both sides' rxe counters. --fail-on warn: exit 0 only if every check passes.
# The server's log comes back with the scenario's results (serve.log).
scenario peer-loopback --needs pci.device \
	--break 'rdmadoctor peer serve --listen 192.0.2.1:18516 --once --timeout 60s --token vm-token >"$d/serve.log" 2>&1 &
		i=0; until grep -qs ":4854 0*:0000 0A" /proc/net/tcp /proc/net/tcp6; do i=$((i + 1)); [ $i -gt 60 ] && { cat /proc/net/tcp /proc/net/tcp6; exit 1; }; sleep 1; done' \
	--exit 0 --root none -- peer test 192.0.2.1:18516 --token vm-token --fail-on warn --format json

# link.phy on the real kernel's answers: rxe0's netdev is dummy0, whose
# driver has no FEC and no PHY statistics (FEC_GET and ETHTOOL_GSSET_INFO
# answer EOPNOTSUPP): a skip with the reason, never a fail — up, and down
# (port.state fails then; link.phy still skips: dummy names no cause).
# dummy0 has no plug-in module either (MODULE_EEPROM_GET: EOPNOTSUPP), and
# rxe has no PCI function whose AER statistics pcie.aer could read.
scenario link-phy-dummy0 --needs link.phy --status 'link.phy=skip' \
	--status 'link.optics=skip' --status 'pcie.aer=skip' \
	--exit 0 --root none -- --level 1 --format json

scenario link-phy-dummy0-down --needs link.phy --status 'link.phy=skip' \
	--break '/usr/bin/ip link set dummy0 down' \
	--exit 19 --root port.state -- --level 1 --format json

# The kernel's own complaints, each said once: a transmit-queue timeout in
# the netdev watchdog's words (net/sched/sch_generic.c, as the guest's own
# kernel prints it for a netdev without a parent device) naming dummy0, the
# netdev rxe0 runs over, is written to /dev/kmsg between the first run
# (which sets the state's kernel-log mark) and the second. The second run
# finds it (kernel.log/tx-timeout on dummy0, exit 63); the run after reads
# only what is new since and passes. Only kernel.log (and what it needs)
# runs: rxe0's link_downed counts the earlier scenarios' dummy0-down, which
# counters.errors would judge across these runs too.
scenario kernel-log-tx-timeout --needs kernel.log --kind rerun \
	--between 'echo "<2>dummy0: NETDEV WATCHDOG: CPU: 0: transmit queue 0 timed out 5120 ms" >/dev/kmsg' \
	--prime-status kernel.log=pass --status kernel.log=fail --mentions dummy0 \
	--after-status kernel.log=pass --after-exit 0 \
	--exit 63 --root kernel.log -- --check kernel.log --format json
