# The simulated fabric of the ibsim suite, sourced by test.sh.
#
# ibsim (Debian's ibsim-utils) simulates the switches and HCAs of a topology file and answers
# the management datagrams of the programs run under ibsim-run, which LD_PRELOADs
# libumad2sim.so: libibumad then talks to the simulator instead of /dev/infiniband/umad*, as
# the HCA named by SIM_HOST. opensm runs as one HCA; the reference tools (infiniband-diags)
# and rdmadoctor as another. Nothing touches the kernel's RDMA stack or needs RDMA hardware.
#
# Each fabric has a socket name of its own (IBSIM_SOCKNAME; ibsim and libumad2sim use Linux
# abstract unix sockets named after it), so runs side by side never see each other's fabric.
# Every process started here is recorded by pid and stopped by fabric_stop.

# The bounds: one reference command, the wait for the SM's sweep (and, with several SMs, for the SA to list them all), one rdmadoctor run.
TOOL_TIMEOUT=${TOOL_TIMEOUT:-15}
SWEEP_TIMEOUT=${SWEEP_TIMEOUT:-45}

FABRIC_DIR=      # the fabric's logs, the SMs' cache directories, the console fifo
IBSIM_PID=
SM_PIDS=()       # "HCA:PID" of every opensm started
FABRIC_SEQ=0

# ensure_tools installs the simulator, the SM and the reference tools when one is missing: as
# root with apt-get (Debian/Ubuntu); otherwise it says what to install and fails.
ensure_tools() {
	local need=()
	command -v ibsim >/dev/null 2>&1 && command -v ibsim-run >/dev/null 2>&1 || need+=(ibsim-utils)
	command -v opensm >/dev/null 2>&1 || need+=(opensm)
	command -v sminfo >/dev/null 2>&1 && command -v saquery >/dev/null 2>&1 || need+=(infiniband-diags)
	grep -q 'libibumad\.so\.3 ' <(ldconfig -p 2>/dev/null) || need+=(libibumad3)
	[ "${#need[@]}" -eq 0 ] && return 0
	[ "$(id -u)" = 0 ] || fail "missing ${need[*]}: run as root or install them: apt-get install ${need[*]}"
	say "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 update -qq >&2 || fail "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need[@]}" >&2 ||
		fail "apt-get install ${need[*]} failed"
}

# as HCA CMD...: CMD attached to the fabric as HCA, bounded by TOOL_TIMEOUT. ibsim-run appends
# to a LD_PRELOAD already set with a typo, so the environment's is dropped. Every client runs in
# the fabric's directory: libumad2sim writes a fake sysfs tree, sys-<pid>/, into the current
# directory (and leaves it there when the client is killed).
as() {
	local hca=$1
	shift
	(cd "$FABRIC_DIR" && env -u LD_PRELOAD SIM_HOST="$hca" timeout -k 2 "$TOOL_TIMEOUT" ibsim-run "$@")
}

# fabric_start TOPOLOGY: ibsim on TOPOLOGY, its console on a fifo held open by this shell (ibsim
# exits when its console reaches end of file), ready once a directed-route query answers.
fabric_start() {
	FABRIC_SEQ=$((FABRIC_SEQ + 1))
	FABRIC_DIR=$W/fabric.$FABRIC_SEQ
	mkdir -p "$FABRIC_DIR"
	export IBSIM_SOCKNAME="rdibsim$$.$FABRIC_SEQ"
	mkfifo "$FABRIC_DIR/console"
	env -u LD_PRELOAD ibsim -s "$1" <"$FABRIC_DIR/console" >"$FABRIC_DIR/ibsim.log" 2>&1 &
	IBSIM_PID=$!
	exec 7>"$FABRIC_DIR/console"
	local end=$((SECONDS + 10))
	until grep -q '^Network simulator ready' "$FABRIC_DIR/ibsim.log" 2>/dev/null; do
		kill -0 "$IBSIM_PID" 2>/dev/null || fail "ibsim exited on $1: $(tail -n 3 "$FABRIC_DIR/ibsim.log")"
		[ "$SECONDS" -lt "$end" ] || fail "ibsim did not get ready on $1 in 10 s"
		sleep 0.1
	done
}

# console CMD: one ibsim console command (Unlink "node"[port], Link ..., see ibsim's Help); returns
# once ibsim has run it (its next prompt is in the log).
console() {
	local before
	before=$(grep -o 'sim> ' "$FABRIC_DIR/ibsim.log" | wc -l)
	printf '%s\n' "$*" >&7
	local end=$((SECONDS + 5))
	until [ "$(grep -o 'sim> ' "$FABRIC_DIR/ibsim.log" | wc -l)" -gt "$before" ]; do
		[ "$SECONDS" -lt "$end" ] || fail "ibsim did not run console command '$*' in 5 s"
		sleep 0.1
	done
}

# sim_dump FILE: the simulator's own view of every port (ibsim's Dump: link, LID, SM LID,
# width, speed, state), without its time stamp.
sim_dump() {
	local start
	start=$(wc -l <"$FABRIC_DIR/ibsim.log")
	console Dump
	{
		printf '$ (ibsim console) Dump\n'
		tail -n +"$((start + 1))" "$FABRIC_DIR/ibsim.log" | sed -e 's/^sim> //' -e '/^# Net status - /d' -e '/^sim> *$/d' | grep .
	} >"$1"
}

# sm_start HCA PRIORITY [PARTITIONS]: opensm attached as HCA with that SM priority (0..15) and
# the partitions file, if any; its cache and log in a directory of its own (two SMs must not
# share guid2lid). The pid is opensm's: the subshell, env and ibsim-run exec it.
sm_start() {
	local hca=$1 prio=$2 parts=${3:-} d=$FABRIC_DIR/sm-$1 args=()
	mkdir -p "$d"
	[ -n "$parts" ] && args+=(-P "$parts")
	(cd "$FABRIC_DIR" && exec env -u LD_PRELOAD SIM_HOST="$hca" OSM_CACHE_DIR="$d" OSM_TMP_DIR="$d" \
		ibsim-run opensm -p "$prio" -f "$d/opensm.log" "${args[@]}") >"$d/stdout" 2>&1 &
	SM_PIDS+=("$hca:$!")
}

# sm_pid HCA: the pid of the opensm started as HCA.
sm_pid() {
	local e
	for e in "${SM_PIDS[@]}"; do [ "${e%%:*}" = "$1" ] && echo "${e#*:}" && return 0; done
	return 1
}

# sm_stop HCA: TERM to the SM attached as HCA, KILL after 5 s; returns once it is gone.
sm_stop() {
	local pid
	pid=$(sm_pid "$1") || return 0
	kill "$pid" 2>/dev/null || true
	local end=$((SECONDS + 5))
	while kill -0 "$pid" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	SM_PIDS=("${SM_PIDS[@]/#$1:*/}")
	return 0
}

# issm_lids: the LIDs of the SM ports (IsSM) in `saquery -s`, not of those with IsSM disabled.
issm_lids() { awk '/^IsSMdisabled ports/ { exit } /EndPortLid/ { sub(/.*\./, ""); print }'; }

# swept HOST SMS: HOST's port is Active with a LID and an SM LID, the SM at that LID answers
# SMInfo as MASTER, and SA lists SMS SM ports (IsSM), each of the others answering STANDBY.
swept() {
	local host=$1 sms=$2 pi lid smlid l n=0
	pi=$(as "$host" smpquery -D portinfo 0 2>/dev/null) || return 1
	grep -q '^LinkState:\.*Active$' <<<"$pi" || return 1
	lid=$(sed -n 's/^Lid:\.*\([0-9]*\)$/\1/p' <<<"$pi")
	smlid=$(sed -n 's/^SMLid:\.*\([0-9]*\)$/\1/p' <<<"$pi")
	[ "${lid:-0}" != 0 ] && [ "${smlid:-0}" != 0 ] || return 1
	[[ "$(as "$host" sminfo "$smlid" 2>/dev/null)" == *SMINFO_MASTER* ]] || return 1
	for l in $(as "$host" saquery -s 2>/dev/null | issm_lids); do
		n=$((n + 1))
		[ "$l" = "$smlid" ] || [[ "$(as "$host" sminfo "$l" 2>/dev/null)" == *SMINFO_STANDBY* ]] || return 1
	done
	[ "$n" = "$sms" ] || return 1
	# ib.sm lists the SMs from the SA's SMInfoRecords, which opensm fills for a standby only at a
	# later sweep (every 10 s by default) than the IsSM port records above: wait for them too.
	[ "$sms" -le 1 ] || [ "$(as "$host" saquery SMIR 2>/dev/null | grep -c '^SMInfoRecord dump:')" -ge "$sms" ]
}

# wait_swept HOST SMS: until swept HOST SMS, bounded by SWEEP_TIMEOUT; an SM that exits fails.
wait_swept() {
	local end=$((SECONDS + SWEEP_TIMEOUT)) e
	until swept "$1" "$2"; do
		for e in "${SM_PIDS[@]}"; do
			[ -n "$e" ] && ! kill -0 "${e#*:}" 2>/dev/null &&
				fail "opensm as ${e%%:*} exited: $(tail -n 5 "$FABRIC_DIR/sm-${e%%:*}/stdout")"
		done
		[ "$SECONDS" -lt "$end" ] ||
			fail "no MASTER SM (and $(($2 - 1)) STANDBY) for $1 after ${SWEEP_TIMEOUT}s: $(as "$1" sminfo 2>&1 | tail -n 1)"
		sleep 0.2
	done
}

# fabric_stop: every SM, then ibsim (its console closed, then TERM, then KILL); waits for each.
fabric_stop() {
	local e
	for e in "${SM_PIDS[@]}"; do [ -n "$e" ] && sm_stop "${e%%:*}"; done
	SM_PIDS=()
	exec 7>&-
	if [ -n "$IBSIM_PID" ]; then
		local end=$((SECONDS + 3))
		while kill -0 "$IBSIM_PID" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.1; done
		kill "$IBSIM_PID" 2>/dev/null || true
		sleep 0.2
		kill -9 "$IBSIM_PID" 2>/dev/null || true
		wait "$IBSIM_PID" 2>/dev/null || true
	fi
	IBSIM_PID=
	return 0
}

# leftovers: the processes this suite started that are still alive (none once fabric_stop
# ran): the SMs and ibsim by pid, and any other client by the socket name in its environment.
leftovers() {
	local e p alive=()
	for e in "${SM_PIDS[@]}"; do
		p=${e#*:}
		[ -n "$p" ] && kill -0 "$p" 2>/dev/null && alive+=("$p")
	done
	[ -n "$IBSIM_PID" ] && kill -0 "$IBSIM_PID" 2>/dev/null && alive+=("$IBSIM_PID")
	for e in /proc/[0-9]*/environ; do
		p=${e#/proc/}
		p=${p%/environ}
		[ "$p" != "$$" ] && [ "$p" != "$BASHPID" ] &&
			grep -qz "^IBSIM_SOCKNAME=rdibsim$$\\." "$e" 2>/dev/null && alive+=("$p")
	done
	[ "${#alive[@]}" -eq 0 ] || printf '%s\n' "${alive[@]}" | sort -un | paste -sd ' ' -
}

# --- the reference tools -------------------------------------------------------------------------

# transcript DIR NAME HOST CMD...: CMD run as HOST into DIR/NAME.txt: the command line, what it
# printed (stdout and stderr) and its exit status. What differs from run to run on the same
# fabric (pids, the date, the SM's activity count, traffic counters) reads <varies>, so that
# recording again changes nothing.
transcript() {
	local dir=$1 name=$2 host=$3 out rc=0
	shift 3
	out=$(as "$host" "$@" 2>&1) || rc=$?
	printf '$ %s\n%s\n# exit %d\n' "$*" "$out" "$rc" | sed -E \
		-e 's/^(ib(warn|panic|error)): \[[0-9]+\]/\1: [<varies>]/' \
		-e 's/^(# Topology file: generated on ).*/\1<varies>/' \
		-e 's/(activity count )[0-9]+/\1<varies>/' \
		-e 's/^((PortXmit|PortRcv)(Data|Pkts):\.*)[0-9]+$/\1<varies>/' >"$dir/$name.txt"
}

# field FILE NAME: the value of a "Name:.....value" line of smpquery/perfquery output.
# Nothing when the query was not made (no file).
field() { [ ! -f "$1" ] || sed -n "s/^$2:\.*//p" "$1" | head -n 1; }
# exit_of FILE: the exit status a transcript recorded.
exit_of() { sed -n 's/^# exit //p' "$1"; }

# reference HOST DIR: what infiniband-diags print, run as HOST, about HOST's port, its SM, its
# path to itself, its P_Key table, the neighbour at the other end of its cable (directed route
# 0,1: NodeInfo, NodeDescription, PortInfo of the port the SMP entered by; PMA counters through
# the neighbour's LID) and the whole subnet (ibnetdiscover).
reference() {
	local host=$1 dir=$2 lid far_port far_lid l
	mkdir -p "$dir"
	transcript "$dir" sminfo "$host" sminfo
	transcript "$dir" saquery-s "$host" saquery -s
	for l in $(issm_lids <"$dir/saquery-s.txt"); do transcript "$dir" "sminfo-lid$l" "$host" sminfo "$l"; done
	transcript "$dir" smpquery-portinfo "$host" smpquery -D portinfo 0
	transcript "$dir" smpquery-pkeys "$host" smpquery -D pkeys 0
	lid=$(field "$dir/smpquery-portinfo.txt" Lid)
	if [ "${lid:-0}" != 0 ]; then
		transcript "$dir" saquery-pr "$host" saquery --src-to-dst "$lid:$lid" PR
		transcript "$dir" perfquery "$host" perfquery
	fi
	transcript "$dir" smpquery-far-nodeinfo "$host" smpquery -D nodeinfo 0,1
	transcript "$dir" smpquery-far-nodedesc "$host" smpquery -D nodedesc 0,1
	far_port=$(field "$dir/smpquery-far-nodeinfo.txt" LocalPort)
	if [ -n "$far_port" ]; then
		transcript "$dir" smpquery-far-portinfo "$host" smpquery -D portinfo 0,1 "$far_port"
		far_lid=$(field "$dir/smpquery-far-portinfo.txt" Lid)
		if [ "$(field "$dir/smpquery-far-nodeinfo.txt" NodeType)" = Switch ]; then
			# A switch's LID is its port 0's.
			transcript "$dir" smpquery-far-portinfo0 "$host" smpquery -D portinfo 0,1 0
			far_lid=$(field "$dir/smpquery-far-portinfo0.txt" Lid)
		fi
		[ "${far_lid:-0}" != 0 ] && transcript "$dir" perfquery-far "$host" perfquery "$far_lid" "$far_port"
	fi
	transcript "$dir" ibnetdiscover "$host" ibnetdiscover
	sim_dump "$dir/ibsim-dump.txt"
}

# mtu_of CODE / rate_of CODE: a PathRecord's MTU (bytes) and rate (Gb/s) from their 6-bit codes.
mtu_of() { local m=(? 256 512 1024 2048 4096); echo "${m[$(($1 & 63))]:-?}"; }
rate_of() { local r=(? ? 2.5 10 30 5 20 40 60 80 120 14 56 112 168 25 100 200 300); echo "${r[$(($1 & 63))]:-?}"; }

# facts DIR: the machine-checkable facts of a reference transcript directory, one key=value a
# line, sorted. Nothing that changes from run to run (activity counts, data counters, dates).
facts() {
	local d=$1 f smline l
	{
		f=$d/sminfo.txt
		if [ "$(exit_of "$f")" = 0 ]; then
			smline=$(grep '^sminfo: sm lid' "$f")
			echo "sm.answers=yes"
			sed -n 's/^sminfo: sm lid \([0-9]*\) sm guid \(0x[0-9a-f]*\),.* priority \([0-9]*\) state [0-9]* SMINFO_\([A-Z]*\).*/sm.lid=\1\nsm.guid=\2\nsm.priority=\3\nsm.state=\4/p' <<<"$smline"
		else
			echo "sm.answers=no"
		fi
		if [ "$(exit_of "$d/saquery-s.txt")" = 0 ]; then
			echo "sm.ports=$(issm_lids <"$d/saquery-s.txt" | wc -l)"
			for l in $(issm_lids <"$d/saquery-s.txt"); do
				echo "sm.lid$l=$(sed -n 's/.* SMINFO_\([A-Z]*\).*/\1/p' "$d/sminfo-lid$l.txt" | grep . || echo none)"
				echo "sm.lid$l.guid=$(sed -n 's/.* sm guid \(0x[0-9a-f]*\),.*/\1/p' "$d/sminfo-lid$l.txt" | grep . || echo none)"
			done
		else
			echo "sm.ports=none"
		fi
		f=$d/smpquery-portinfo.txt
		echo "port.lid=$(field "$f" Lid)"
		echo "port.smlid=$(field "$f" SMLid)"
		echo "port.state=$(field "$f" LinkState)"
		echo "port.width=$(field "$f" LinkWidthActive)"
		f=$d/saquery-pr.txt
		if [ -f "$f" ] && [ "$(exit_of "$f")" = 0 ] && grep -q 'PathRecord dump' "$f"; then
			echo "path.self=resolved"
			echo "path.mtu=$(mtu_of "$(sed -n 's/^[[:space:]]*mtu\.*//p' "$f" | head -n 1)")"
			echo "path.rate=$(rate_of "$(sed -n 's/^[[:space:]]*rate\.*//p' "$f" | head -n 1)")"
		else
			echo "path.self=none"
		fi
		echo "pkeys=$(sed -n 's/^ *[0-9]*: //p' "$d/smpquery-pkeys.txt" | tr ' ' '\n' | grep -v '^0x0000$' | grep . | tr '\n' ' ' | sed 's/ $//')"
		f=$d/smpquery-far-nodeinfo.txt
		echo "far.type=$(field "$f" NodeType)"
		echo "far.guid=$(field "$f" Guid)"
		echo "far.port=$(field "$f" LocalPort)"
		echo "far.desc=$(field "$d/smpquery-far-nodedesc.txt" 'Node Description')"
		f=$d/smpquery-far-portinfo.txt
		echo "far.width=$(field "$f" LinkWidthActive)"
		echo "far.speed=$(field "$f" LinkSpeedActive)"
		echo "far.state=$(field "$f" LinkState)"
		f=$d/perfquery-far.txt
		if [ -f "$f" ] && [ "$(exit_of "$f")" = 0 ]; then
			echo "far.symbol_errors=$(field "$f" SymbolErrorCounter)"
			echo "far.link_recovery=$(field "$f" LinkErrorRecoveryCounter)"
			echo "far.rcv_errors=$(field "$f" PortRcvErrors)"
			echo "far.xmit_discards=$(field "$f" PortXmitDiscards)"
		else
			echo "far.counters=none"
		fi
	} | LC_ALL=C sort
}

# --- Peers named by node description (ib.path's ib_peers = ["Hca4"]) -------------------------
# A scenario whose expectations file names ib_peers by node description gets, in its reference,
# what infiniband-diags show of each such peer; other scenarios' references are unchanged.
# ibsim passes one MAD of an SA table (no RMPP): `saquery NR` shows only the first NodeRecord,
# and saquery's own name lookups (--src-to-dst NAME:NAME, -L NAME) fail the same way. So the
# peer's LID comes from ibnetdiscover, its record from `saquery NR <lid>` (one record) and its
# path from `saquery --src-to-dst <lid>:<lid> PR`. rdmadoctor asks NodeRecords with the
# NodeDescription component, which opensm filters on, so its answer holds the one node.

# peer_names: the quoted, non-GUID items of the ib_peers line of scenario()'s expectations file
# ($expect, through bash's dynamic scope), one a line; nothing without one.
peer_names() {
	[ -n "${expect:-}" ] && [ -f "$here/expect/$expect" ] || return 0
	sed -n 's/^ib_peers *= *//p' "$here/expect/$expect" | sed 's/#.*//' | grep -o '"[^"]*"' | tr -d '"' | grep -vi '^0x' || true
}

# peer_lid DIR NAME: the LID of the channel adapter NAME in DIR's ibnetdiscover transcript (its
# first port's "# lid N"); nothing when no CA has that description.
peer_lid() {
	awk -v d="\"$2\"" '$1 == "Ca" && $NF == d { getline; for (i = 1; i < NF; i++) if ($i == "lid") { print $(i + 1); exit } }' \
		"$1/ibnetdiscover.txt"
}

# reference_peers HOST DIR: `saquery NR`, then per peer named by description its NodeRecord
# and the path from HOST's LID to it.
reference_peers() {
	local host=$1 dir=$2 name lid own
	[ -n "$(peer_names)" ] || return 0
	transcript "$dir" saquery-nr "$host" saquery NR
	own=$(field "$dir/smpquery-portinfo.txt" Lid)
	while IFS= read -r name; do
		lid=$(peer_lid "$dir" "$name")
		[ -n "$lid" ] || continue
		transcript "$dir" "saquery-nr-$name" "$host" saquery NR "$lid"
		transcript "$dir" "saquery-pr-$name" "$host" saquery --src-to-dst "$own:$lid" PR
	done < <(peer_names)
}

# peer_facts DIR: per peer named by description, peer.NAME=none when no node has it, else its
# LID, port GUID (from its NodeRecord) and whether the path to it resolves.
peer_facts() {
	local d=$1 name f
	while IFS= read -r name; do
		f=$d/saquery-nr-$name.txt
		if [ ! -f "$f" ]; then
			echo "peer.$name=none"
			continue
		fi
		echo "peer.$name.lid=$(sed -n 's/^[[:space:]]*lid\.*//p' "$f" | head -n 1)"
		echo "peer.$name.guid=$(sed -n 's/^[[:space:]]*port_guid\.*//p' "$f" | head -n 1)"
		f=$d/saquery-pr-$name.txt
		if [ "$(exit_of "$f")" = 0 ] && grep -q 'PathRecord dump' "$f"; then
			echo "peer.$name.path=resolved"
		else
			echo "peer.$name.path=none"
		fi
	done < <(peer_names)
}

# reference and facts as above, with the peers' appended (the definitions above are kept under
# the names reference_core and facts_core).
eval "reference_core() $(declare -f reference | tail -n +2)"
eval "facts_core() $(declare -f facts | tail -n +2)"
reference() { reference_core "$@" && reference_peers "$@"; }
facts() { { facts_core "$@"; peer_facts "$@"; } | LC_ALL=C sort; }

# run_inventory NAME: `rdmadoctor inventory --format json` as the host, into $W/NAME.inventory.json
# (verify.py's --inventory reads it beside the report): the SM, the neighbour and the P_Key table
# as inventory shows them, for comparison with the reference tools' facts.
run_inventory() {
	local rc=0
	(cd "$FABRIC_DIR" && env -u LD_PRELOAD SIM_HOST="$host" timeout -k 2 60 ibsim-run "$bin" inventory --format json) \
		>"$W/$1.inventory.json" 2>"$W/$1.inventory.stderr" || rc=$?
	[ "$rc" = 0 ] || fail "$1: rdmadoctor inventory exited $rc: $(head -c 300 "$W/$1.inventory.stderr")"
}
