# The ibsim suite's scenarios, run in this order by test.sh, each on a fabric of its own.
#
#   scenario NAME [--key value]...
#
# The fabric:
#   --topo FILE         topology under topo/ (ibsim's format; default healthy.net)
#   --host HCA          the node rdmadoctor and the reference tools run as (default Hca2)
#   --sm HCA:PRIO[:PARTITIONS]   an opensm attached as HCA with SM priority PRIO and, if given,
#                       partitions/PARTITIONS as its partition configuration (-P); repeated:
#                       started in order, the first waited for as MASTER, each next one as
#                       STANDBY. No --sm: no SM ever runs (ports stay Initialize, LID 0).
#   --kill-sm HCA       once the SMs have swept, the SM attached as HCA is killed (SIGKILL)
#   --console CMD       then an ibsim console command (Unlink "Hca2"[1] pulls Hca2's cable)
#   --expect FILE       rdmadoctor runs with --expect expect/FILE, less the key lines whose
#                       trailing "# <check ID>" names a check not in `rdmadoctor list`
# What the reference tools must show (sminfo, saquery, smpquery, perfquery, ibnetdiscover, run
# as the host; their facts are also compared with ref/NAME/facts, which `test.sh --record`
# writes with the transcripts):
#   --fact KEY=VALUE    the live fact KEY (see facts in lib.sh) is VALUE: the breakage is there
# What rdmadoctor must say (`--check ib.sm,ib.path,ib.far_end,ib.pkey --format json`):
#   --status ID=S[|S]   the check's status; PENDING while ID is not in `rdmadoctor list`
#   --finding ID=FID    the check has finding FID with a status other than pass
#   --mentions ID=@KEY  the check's report (summary, observed, details, findings, evidence)
#                       names the value of reference fact KEY (GUIDs in any spelling);
#   --mentions ID=TEXT  ... or names TEXT
#   --within SECONDS    rdmadoctor returns within SECONDS (every run is bounded by 60)
#   --inventory @facts  `rdmadoctor inventory --format json`, run as the host too, shows the
#                       port's SM, the SA's SMs, the neighbour and the P_Key table as the
#                       reference facts do; --inventory PATH=VALUE: its ib_fabric entry's PATH
# Every run also asserts: the report's exit_code is the process's, and none of the four checks
# is skipped as blocked by a check outside ib.* (a sysfs prerequisite the simulator cannot show).

# The finding IDs the scenarios name: the one place to rename them.
ID_SM_NO_SM=ib.sm/no-sm                  # the port has no SM LID: no SM ever configured it
ID_SM_SILENT=ib.sm/sm-silent             # the SM LID does not answer SMInfo (timeout, retries)
ID_SM_LINK_DOWN=ib.sm/link-down          # the port's physical link is not up: no SM can reach it
ID_FAR_UNEXPECTED=ib.far_end/wrong-neighbour # the neighbour is not the switch/port the class pins
ID_FAR_WIDTH=ib.far_end/width-limited         # the switch port enables only 1X: the link runs narrower than both ends support
ID_PKEY_MISSING=ib.pkey/missing          # a partition the class names is not in the P_Key table
ID_FAR_AWAITING_SM=ib.far_end/awaiting-sm # both ends Initialize: the link waits for an SM (ib.sm's fault)

# SM up, 0x8001 configured, paths resolve, Hca2 on Switch2 port 1 at 4X.
scenario healthy --sm Hca1:14:with-8001.conf \
	--fact sm.answers=yes --fact sm.state=MASTER --fact sm.ports=1 --fact path.self=resolved \
	--fact far.desc=Switch2 --fact far.port=1 --fact far.width=4X --fact 'pkeys=0xffff 0x8001' \
	--status ib.sm=pass --status ib.path=pass --status ib.far_end=pass --status ib.pkey=pass \
	--mentions ib.sm=@sm.guid --mentions ib.path=@path.mtu --mentions ib.far_end=@far.desc

# The same fabric judged against a class that pins the cable and the partition: all hold.
scenario healthy-expect --sm Hca1:14:with-8001.conf --expect healthy.conf \
	--fact far.desc=Switch2 --fact far.port=1 --fact 'pkeys=0xffff 0x8001' \
	--status ib.sm=pass --status ib.path=pass --status ib.far_end=pass --status ib.pkey=pass

# No SM ever ran: the port is Initialize with LID 0 and SM LID 0, SA does not answer; the
# neighbour still answers directed-route SMPs (no LID needed).
scenario no-sm \
	--fact sm.answers=no --fact sm.ports=none --fact port.lid=0 --fact port.smlid=0 \
	--fact port.state=Initialize --fact path.self=none --fact far.desc=Switch2 \
	--status ib.sm=fail --finding ib.sm=$ID_SM_NO_SM --status 'ib.path=fail|skip' \
	--status ib.far_end=skip --finding ib.far_end=$ID_FAR_AWAITING_SM --mentions ib.far_end=@far.desc \
	--status 'ib.pkey=pass|skip' --within 10

# The SM swept, then died: the port keeps its LID and SM LID, SMInfo and SA get no answer.
scenario sm-killed --sm Hca1:14:with-8001.conf --kill-sm Hca1 \
	--fact sm.answers=no --fact sm.ports=none --fact port.smlid=1 --fact port.state=Active \
	--fact path.self=none --fact far.desc=Switch2 \
	--status ib.sm=fail --finding ib.sm=$ID_SM_SILENT --status 'ib.path=fail|skip' \
	--status 'ib.far_end=pass|warn' --status 'ib.pkey=pass|skip' --within 10

# The cable pulled after the sweep (ibsim's Unlink): the port is Down/Polling, nothing answers
# beyond it; the local port's own SMA still answers directed-route SMPs to itself.
scenario cable-pulled --sm Hca1:14:with-8001.conf --console 'Unlink "Hca2"[1]' \
	--fact port.state=Down --fact sm.answers=no --fact sm.ports=none --fact far.desc= \
	--status ib.sm=skip --finding ib.sm=$ID_SM_LINK_DOWN --status 'ib.path=skip|fail' \
	--status 'ib.far_end=skip|fail' --status 'ib.pkey=pass|skip' --within 10

# Two SMs: Hca1 (priority 14) MASTER, Hca3 (priority 1) STANDBY; both are listed.
scenario two-sms --sm Hca1:14:with-8001.conf --sm Hca3:1:with-8001.conf \
	--fact sm.state=MASTER --fact sm.lid=1 --fact sm.ports=2 --fact sm.lid1=MASTER --fact sm.lid5=STANDBY \
	--status ib.sm=pass --status ib.path=pass --status ib.far_end=pass --status ib.pkey=pass \
	--mentions ib.sm=@sm.guid --mentions ib.sm=@sm.lid5.guid

# Hca2's cable moved to Switch1 port 4; the class pins Switch2 port 1.
scenario moved-cable --topo moved-cable.net --sm Hca1:14:with-8001.conf --expect cabled.conf \
	--fact far.desc=Switch1 --fact far.port=4 --fact path.self=resolved \
	--status ib.sm=pass --status ib.path=pass --status ib.far_end=fail \
	--finding ib.far_end=$ID_FAR_UNEXPECTED --mentions ib.far_end=@far.desc --mentions ib.far_end=Switch2 \
	--status ib.pkey=pass

# Switch2 port 1 enabled for 1X only: the link trains 1X on both ends; the path's rate follows
# (2.5 Gb/s, 1X SDR), consistent with the port, so ib.path passes.
scenario degraded-1x --topo degraded-1x.net --sm Hca1:14:with-8001.conf \
	--fact far.width=1X --fact port.width=1X --fact far.desc=Switch2 --fact path.rate=2.5 \
	--status ib.sm=pass --status ib.path=pass --mentions ib.path=@path.rate --status 'ib.far_end=warn|fail' \
	--finding ib.far_end=$ID_FAR_WIDTH --mentions ib.far_end=@far.width --status ib.pkey=pass

# opensm's partitions leave out 0x0001; the class needs full membership of 0x8001.
scenario pkey-missing --sm Hca1:14:without-8001.conf --expect partition.conf \
	--fact pkeys=0xffff --fact sm.state=MASTER \
	--status ib.sm=pass --status ib.path=pass --status ib.far_end=pass --status ib.pkey=fail \
	--finding ib.pkey=$ID_PKEY_MISSING --mentions ib.pkey=0x8001

# Peers named by node description (ib_peers = ["Hca4"]): the SA's NodeRecords give Hca4's port
# GUID and the path to it resolves, as `saquery NR <lid>` and `saquery PR` show.
ID_PATH_UNKNOWN_PEER=ib.path/unknown-peer # an ib_peers node description no node in the subnet has
scenario peer-by-name --sm Hca1:14:with-8001.conf --expect peers.conf \
	--fact peer.Hca4.lid=6 --fact peer.Hca4.path=resolved --fact path.self=resolved \
	--status ib.sm=pass --status ib.path=pass --status ib.far_end=pass --status ib.pkey=pass \
	--mentions ib.path=@peer.Hca4.guid --mentions ib.path=Hca4

# One peer exists (Hca4), the other (Hca9) is no node's description: ib.path fails naming it.
scenario peer-unknown --sm Hca1:14:with-8001.conf --expect peers-unknown.conf \
	--fact peer.Hca4.path=resolved --fact peer.Hca9=none \
	--status ib.sm=pass --status ib.path=fail --finding ib.path=$ID_PATH_UNKNOWN_PEER \
	--mentions ib.path=Hca9 --mentions ib.path=@peer.Hca4.guid --status ib.far_end=pass --status ib.pkey=pass

# Inventory of the healthy fabric: the SM at the SM LID, the SM the SA lists, the neighbour and
# the P_Key table (with each key's membership) as sminfo, saquery and smpquery show them. One SM:
# opensm adds a standby's SMInfoRecord only at a later sweep, so the SA's list of two SMs lags.
scenario inventory --sm Hca1:14:with-8001.conf \
	--fact sm.state=MASTER --fact sm.ports=1 --fact far.desc=Switch2 --fact 'pkeys=0xffff 0x8001' \
	--status ib.sm=pass --status ib.far_end=pass --status ib.pkey=pass \
	--inventory @facts --inventory sm.node_desc=Hca1 --inventory neighbour.node_type=switch
