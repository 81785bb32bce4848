# Guest side of the SoftRoCE VM harness (busybox ash), sourced by /init.
#
# The healthy state every scenario starts from: the modules of
# /etc/rdvm-modules loaded, dummy0 up with 192.0.2.1/24 and its IPv6
# link-local address, rxe0 on dummy0 with port 1 ACTIVE, the uverbs nodes
# present, every file that a scenario hid back in place. baseline() restores
# it after each scenario, so a scenario only says how to break the host.

RXE=rxe0
NETDEV=dummy0
IPV4=192.0.2.1
# The RoCE v2 GID of IPV4 (an IPv4-mapped IPv6 address), as sysfs prints it.
IPV4_GID=0000:0000:0000:0000:0000:ffff:c000:0201
KVER=$(uname -r)
STASH=/rdvm/stash
RESULTS=/tmp/rdvm
# Seconds one rdmadoctor run may take before it is killed (exit 143).
RDVM_RUN_LIMIT=90

say() { echo "rdvm: $*"; }

uptime_s() { cut -d' ' -f1 /proc/uptime; }

rxe_state() {
	if [ -r /sys/class/infiniband/$RXE/ports/1/state ]; then
		echo "$RXE port 1 $(cat /sys/class/infiniband/$RXE/ports/1/state)"
	else
		echo "no $RXE"
	fi
}

# mod_load NAME loads a module of /etc/rdvm-modules unless it is there already.
mod_load() {
	local f
	[ -d /sys/module/$1 ] && [ ! -e /sys/module/$1/initstate ] && return 0 # built in
	grep -q "^$1 " /proc/modules && return 0
	f=$(find /lib/modules/$KVER -name "$1.ko" | head -n1)
	[ -n "$f" ] || { say "module $1: no $1.ko"; return 1; }
	insmod "$f" || { say "insmod $f failed"; return 1; }
}

mods_load_all() {
	local m
	for m in $(cat /etc/rdvm-modules); do mod_load "$m" || return 1; done
}

# uverbs_nodes makes /dev/infiniband/uverbsN for each uverbs device whose node
# is missing (devtmpfs made them once; a scenario may have removed one) and
# opens them to everyone, as Debian's rdma-core udev rules do.
uverbs_nodes() {
	local d n
	for d in /sys/class/infiniband_verbs/uverbs*; do
		[ -e "$d/dev" ] || continue
		n=/dev/infiniband/${d##*/}
		if [ ! -c "$n" ]; then
			mkdir -p /dev/infiniband
			mknod "$n" c $(tr ':' ' ' <"$d/dev")
		fi
	done
	chmod 0666 /dev/infiniband/* 2>/dev/null
	return 0
}

# wait_active DEV [GID] [SECONDS]: DEV's port 1 ACTIVE (and GID, as sysfs
# prints it, in its table: the GIDs follow the port a moment later).
wait_active() {
	local dev=$1 gid=${2:-} i=0 lim
	lim=$((${3:-20} * 10))
	while [ $i -lt $lim ]; do
		if grep -q ACTIVE /sys/class/infiniband/$dev/ports/1/state 2>/dev/null &&
			{ [ -z "$gid" ] || grep -qx "$gid" /sys/class/infiniband/$dev/ports/1/gids/* 2>/dev/null; }; then
			return 0
		fi
		sleep 0.1
		i=$((i + 1))
	done
	say "$dev not ready after ${3:-20} s"
	return 1
}

# wait_ready [SECONDS]: rxe0's port 1 ACTIVE with the RoCE v2 GID of IPV4.
wait_ready() {
	wait_active $RXE $IPV4_GID "${1:-20}" || { say "$(rxe_state)"; return 1; }
}

net_up() {
	/usr/bin/ip link set lo up
	/usr/bin/ip link show $NETDEV >/dev/null 2>&1 || /usr/bin/ip link add $NETDEV type dummy
	[ "$(cat /sys/class/net/$NETDEV/mtu)" = 1500 ] || /usr/bin/ip link set $NETDEV mtu 1500
	/usr/bin/ip link set $NETDEV up
	/usr/bin/ip -4 addr show dev $NETDEV | grep -q "inet $IPV4/" ||
		/usr/bin/ip addr add $IPV4/24 dev $NETDEV
	# A flush also drops the link-local address; a down/up makes it again.
	if ! /usr/bin/ip -6 addr show dev $NETDEV | grep -q 'inet6 fe80'; then
		/usr/bin/ip link set $NETDEV down
		/usr/bin/ip link set $NETDEV up
	fi
}

stack_up() {
	mods_load_all || return 1
	net_up || return 1
	[ -e /sys/class/infiniband/$RXE ] || rdma link add $RXE type rxe netdev $NETDEV || return 1
	uverbs_nodes
	wait_ready 30
}

# hide PATH... moves files out of the way (a package "removed" from the
# image); baseline puts them back. Globs are the caller's to expand.
hide() {
	local p n
	mkdir -p $STASH
	for p in "$@"; do
		[ -e "$p" ] || [ -L "$p" ] || { say "hide: no $p"; return 1; }
		n=$(ls $STASH | wc -l)
		mv "$p" "$STASH/$n" && echo "$n $p" >>$STASH.list
	done
}

unhide_all() {
	local n p
	[ -s $STASH.list ] || return 0
	while read -r n p; do
		mkdir -p "$(dirname "$p")"
		mv "$STASH/$n" "$p"
	done <$STASH.list
	rm -f $STASH.list
	ldconfig
}

# netns_reset deletes the scenarios' network namespaces (their macvlan and
# ipvlan interfaces go with them) and puts the RDMA subsystem back in shared
# mode, which the kernel refuses (EBUSY) while another namespace lives: the
# deletion finishes asynchronously, so the mode is retried.
netns_reset() {
	local p i
	for p in /run/netns/*; do
		[ -e "$p" ] && /usr/bin/ip netns delete "${p##*/}"
	done
	rdma system show 2>/dev/null | grep -q 'netns shared' && return 0
	i=0
	until rdma system set netns shared 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 10 ] && { say "netns_reset: rdma system set netns shared still refused"; return 1; }
		sleep 1
	done
}

# baseline restores the healthy state; it prints what it had to do.
baseline() {
	local p n
	unhide_all
	netns_reset || return 1
	# Devices and netdevs a scenario added go again.
	for p in /sys/class/infiniband/*; do
		[ -e "$p" ] || continue
		n=${p##*/}
		[ "$n" = $RXE ] || rdma link delete "$n"
	done
	for p in /sys/class/net/*; do
		[ -d "$p" ] || continue
		n=${p##*/}
		case $n in lo | $NETDEV) ;; *) /usr/bin/ip link delete "$n" ;; esac
	done
	mods_load_all || return 1
	net_up || return 1
	[ -e /sys/class/infiniband/$RXE ] || rdma link add $RXE type rxe netdev $NETDEV || return 1
	uverbs_nodes
	wait_ready 30
}

# emit NAME DIR sends DIR to the host as one base64 record of a tar.gz.
emit() {
	echo "@@RDVM-BEGIN $1@@"
	tar -C "$2" -cf - . 2>/dev/null | gzip -c | base64
	echo "@@RDVM-END $1@@"
}

# refs DIR saves what the reference tools (rdma-core, iproute2) say about the
# host, for the host side to compare rdmadoctor's inventory with.
refs() {
	ibv_devices >"$1/ref.ibv_devices" 2>&1
	ibv_devinfo -v >"$1/ref.ibv_devinfo" 2>&1
	rdma -j link >"$1/ref.rdma_link.json" 2>&1
	rdma -j dev >"$1/ref.rdma_dev.json" 2>&1
	rdma -j resource >"$1/ref.rdma_resource.json" 2>&1
	/usr/bin/ip -j addr show >"$1/ref.ip_addr.json" 2>&1
	# rdmadoctor's own view, to hold against the references above.
	rdmadoctor inventory >"$1/inventory.txt" 2>&1
	rdmadoctor inventory --format json >"$1/inventory.json" 2>&1
}

# scenario NAME [--key value]... -- RDMADOCTOR-ARGS...
#
# Runs one scenario: the --break shell lines (as root), rdmadoctor with the
# given arguments (as --user with --memlock KiB when given), then baseline.
# Every --key value goes to the record's meta file for the host to assert
# (--exit, --root, --needs, --status, --mentions ...); the guest itself acts on
# --break, --user, --memlock, --kind (run | killprobe | timing | snapshot |
# rerun), --runs, --ref, --refs (1: save the reference tools' answers),
# --redact (1: snapshot --redact) and --between (rerun: the lines run between
# its first and second run). Records go to the console as they finish.
scenario() {
	local name d brk user memlock kind wantrefs runs ref redact netns between st t0 n0
	name=$1
	shift
	if [ -n "$RDVM_ONLY" ]; then
		case ",$RDVM_ONLY," in *",$name,"*) ;; *) return 0 ;; esac
	fi
	d=$RESULTS/$name
	rm -rf "$d"
	mkdir -p "$d"
	brk="" user="" memlock="" kind=run wantrefs=0 runs=20 ref="" redact=0 netns="" between=""
	: >"$d/meta"
	while [ $# -gt 0 ]; do
		case $1 in
		--)
			shift
			break
			;;
		--*) [ $# -ge 2 ] || { say "scenario $name: $1 needs a value"; return 1; } ;;
		*)
			say "scenario $name: unexpected word '$1' (rdmadoctor's arguments go after --)"
			echo "meta_error unexpected word $1" >>"$d/meta"
			break
			;;
		esac
		case $1 in
		--break) brk=$2 ;;
		--user) user=$2 ;;
		--memlock) memlock=$2 ;;
		--kind) kind=$2 ;;
		--runs) runs=$2 ;;
		--ref) ref=$2 ;;
		--refs) wantrefs=$2 ;;
		--redact) redact=$2 ;;
		--netns) netns=$2 ;;
		--between) between=$2 ;;
		esac
		# One line per key: a --break may span lines.
		printf '%s %s\n' "${1#--}" "$(printf '%s' "$2" | tr '\n\t' '  ')" >>"$d/meta"
		shift 2
	done
	printf 'args %s\n' "$*" >>"$d/meta"
	echo "run_limit $RDVM_RUN_LIMIT" >>"$d/meta"
	say "scenario $name: $kind rdmadoctor $* ${brk:+(break: $brk)}"
	t0=$(uptime_s)
	if [ -n "$brk" ]; then
		(eval "$brk") >"$d/break.log" 2>&1
		echo "break_exit $?" >>"$d/meta"
	fi
	[ "$wantrefs" = 1 ] && refs "$d"
	set -- rdmadoctor "$@"
	if [ -n "$user" ]; then
		set -- rdvm runas --user "$user" --memlock "${memlock:--1}" -- "$@"
	fi
	# A pod's view: its own network namespace (and the sysfs that
	# `ip netns exec` mounts for it), the host's RDMA devices as the netns
	# mode shows them.
	if [ -n "$netns" ]; then
		set -- /usr/bin/ip netns exec "$netns" "$@"
	fi
	if ! command -v rdmadoctor >/dev/null; then
		echo 127 >"$d/exit"
		echo "no rdmadoctor in the guest" >"$d/stderr"
	else
		case $kind in
		run)
			# A hung run costs this scenario, not the whole boot. The kernel
			# log lines written meanwhile are kept (kmsg.during) for
			# --kernel-quiet; counting lines leaves the buffer to the rest.
			n0=$(dmesg 2>/dev/null | wc -l)
			timeout "$RDVM_RUN_LIMIT" "$@" >"$d/stdout" 2>"$d/stderr"
			echo $? >"$d/exit"
			dmesg 2>/dev/null | tail -n +$((n0 + 1)) >"$d/kmsg.during"
			;;
		killprobe)
			rdma -j resource >"$d/resource.before.json" 2>&1
			rdvm killprobe --out "$d" --timeout "${RDVM_RUN_LIMIT}s" -- "$@" >"$d/killprobe.log" 2>&1
			echo $? >"$d/killprobe.exit"
			rdma -j resource >"$d/resource.after.json" 2>&1
			;;
		snapshot)
			# The live run, the capture and the replay, all on the same
			# (broken) host before baseline; the replay is the scenario's
			# stdout and exit, the host compares it with live.json.
			if [ -n "$user" ]; then
				echo "meta_error --kind snapshot runs as root (no --user)" >>"$d/meta"
			else
				shift # "rdmadoctor": the replay puts --root before the arguments
				timeout "$RDVM_RUN_LIMIT" rdmadoctor "$@" >"$d/live.json" 2>"$d/live.stderr"
				echo $? >"$d/live.exit"
				if [ "$redact" = 1 ]; then redact=--redact; else redact=""; fi
				timeout "$RDVM_RUN_LIMIT" rdmadoctor snapshot -o "$d/snap.tar.gz" $redact \
					>"$d/snapshot.stdout" 2>"$d/snapshot.stderr"
				echo $? >"$d/snapshot.exit"
				timeout "$RDVM_RUN_LIMIT" rdmadoctor --root "$d/snap.tar.gz" "$@" >"$d/stdout" 2>"$d/stderr"
				echo $? >"$d/exit"
			fi
			;;
		rerun)
			# Three runs with one --state: the first sets the state's
			# marks, the --between lines run, the second is the scenario's
			# stdout and exit, the third (after.json, after.exit) shows what
			# the marks kept from being said twice.
			st="$d/state/rdmadoctor.state.json"
			mkdir -p "$d/state" && chmod 700 "$d/state"
			timeout "$RDVM_RUN_LIMIT" "$@" --state "$st" >"$d/prime.json" 2>"$d/prime.stderr"
			echo $? >"$d/prime.exit"
			if [ -n "$between" ]; then
				(eval "$between") >"$d/between.log" 2>&1
				echo "between_exit $?" >>"$d/meta"
			fi
			timeout "$RDVM_RUN_LIMIT" "$@" --state "$st" >"$d/stdout" 2>"$d/stderr"
			echo $? >"$d/exit"
			timeout "$RDVM_RUN_LIMIT" "$@" --state "$st" >"$d/after.json" 2>"$d/after.stderr"
			echo $? >"$d/after.exit"
			;;
		timing)
			{
				echo "kernel $(uname -r)"
				echo "$(basename "$(readlink -f /usr/lib/x86_64-linux-gnu/libibverbs.so.1)")"
			} >"$d/env"
			rdvm time -n "$runs" -limit "${RDVM_RUN_LIMIT}s" -o "$d/timing.rdmadoctor" \
				${ref:+-ref "$ref" -ref-o "$d/timing.ref"} -- "$@" >"$d/stderr" 2>&1
			echo $? >"$d/exit"
			# Where the time goes, for the timing document: each check's
			# duration in one more run, and one process's package
			# initialisation (every process pays it, the verbs child too).
			timeout "$RDVM_RUN_LIMIT" rdmadoctor --level 1 --format json >"$d/level1.json" 2>/dev/null
			GODEBUG=inittrace=1 timeout "$RDVM_RUN_LIMIT" rdmadoctor --version >/dev/null 2>"$d/inittrace"
			;;
		*)
			echo "meta_error unknown kind $kind" >>"$d/meta"
			;;
		esac
	fi
	echo "observed_exit $(cat "$d/exit" 2>/dev/null)" >>"$d/meta"
	baseline >"$d/repair.log" 2>&1
	echo "repair_exit $?" >>"$d/meta"
	echo "seconds $(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN{printf "%.1f", b-a}')" >>"$d/meta"
	emit "$name" "$d"
}

# run_suite runs every scenario of /rdvm/scenarios.sh, after `rdmadoctor list`
# (the record "list": which checks exist decides what is PENDING).
run_suite() {
	local d
	d=$RESULTS/list
	mkdir -p "$d"
	rdmadoctor list >"$d/stdout" 2>"$d/stderr"
	echo $? >"$d/exit"
	emit list "$d"
	. /rdvm/scenarios.sh
}

# shell_job CMD runs one command (the run-in-guest.sh mode) and sends its
# output and exit code back as the record "shell".
shell_job() {
	local d
	d=$RESULTS/shell
	mkdir -p "$d"
	sh -c "$1" >"$d/output" 2>&1 </dev/null
	echo $? >"$d/exit"
	emit shell "$d"
}
