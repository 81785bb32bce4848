# Guest side of the two-guest pair (busybox ash), sourced by /rdvm/pair-init
# after /rdvm/lib.sh, whose helpers (mod_load, uverbs_nodes, wait_active,
# say, uptime_s) it reuses.
#
# Node a (192.0.2.1) runs the client commands, node b (192.0.2.2) the
# servers. The healthy state every scenario starts from: eth0 up at MTU 1500
# with its address, no qdisc but the default, rxe0 on eth0 with port 1 ACTIVE
# and the RoCE v2 GID of the address; pair_baseline restores it.
#
# The control line (ttyS2, a qemu socket chardev joining the two guests)
# carries the barriers and the "server is listening" messages outside the
# network under test, so a scenario that takes the link down or drops frames
# does not cut its own coordination. Every wait on it has a deadline.

NETDEV=eth0
CTL=/dev/ttyS2
RESULTS_TTY=/dev/ttyS1
A_IP=192.0.2.1
B_IP=192.0.2.2
if [ "$NODE" = a ]; then
	IPV4=$A_IP PEER_IP=$B_IP
	IPV4_GID=0000:0000:0000:0000:0000:ffff:c000:0201
else
	IPV4=$B_IP PEER_IP=$A_IP
	IPV4_GID=0000:0000:0000:0000:0000:ffff:c000:0202
fi
# The TCP port of `rdmadoctor peer serve` in the scenarios; the reference
# tools (rdma-core's pingpongs, perftest) use their own default, 18515.
PEER_PORT=18516
REF_PORT=18515
# Both guests' shared token: `peer serve` refuses to start without one on
# a routable address (192.0.2.2), and every `peer serve` and `peer test`
# below reads it from here unless its command line names another
# (peer-wrong-token does).
export RDMADOCTOR_PEER_TOKEN=pair-token
# Seconds one client run may take before it is killed (exit 143).
PAIR_RUN_LIMIT=60
# The first meeting waits for the slower guest's boot; later ones for the
# other side's scenario step.
PAIR_FIRST_MEET=240
PAIR_MEET=$((PAIR_RUN_LIMIT + 60))

# iproute2's ip and tc by path: busybox ash runs its own applets first (and
# busybox tc has no netem).
ipr() { /usr/bin/ip "$@"; }
tcr() { /usr/sbin/tc "$@"; }

mods_load_all() {
	local m
	for m in $(cat /etc/rdvm-modules.pair); do mod_load "$m" || return 1; done
}

pair_net_up() {
	ipr link set lo up
	ipr link show $NETDEV >/dev/null 2>&1 || { say "no $NETDEV (virtio_net did not bind the NIC)"; return 1; }
	[ "$(cat /sys/class/net/$NETDEV/mtu)" = 1500 ] || ipr link set $NETDEV mtu 1500
	ipr link set $NETDEV up
	ipr -4 addr show dev $NETDEV | grep -q "inet $IPV4/" || ipr addr add $IPV4/24 dev $NETDEV
	if ! ipr -6 addr show dev $NETDEV | grep -q 'inet6 fe80'; then
		ipr link set $NETDEV down
		ipr link set $NETDEV up
	fi
}

pair_stack_up() {
	mods_load_all || return 1
	pair_net_up || return 1
	[ -e /sys/class/infiniband/$RXE ] || rdma link add $RXE type rxe netdev $NETDEV || return 1
	uverbs_nodes
	wait_ready 30
}

# pair_baseline undoes what a scenario's breaks did: qdiscs, MTU, link state.
pair_baseline() {
	tcr qdisc del dev $NETDEV root 2>/dev/null
	pair_net_up || return 1
	[ -e /sys/class/infiniband/$RXE ] || rdma link add $RXE type rxe netdev $NETDEV || return 1
	uverbs_nodes
	wait_ready 30
}

now_s() { date +%s; }

# ctl_open makes the control line usable: a holder process owns it as its
# controlling tty (a session leader that opened it later would hang it up
# for everyone when it exits), raw mode without echo (else each guest sends
# the other's lines back), fd 3 stays open for the whole boot, and one
# reader appends everything that arrives to CTL_LOG. The waits below look
# for their line in that file: a shell `read` with a timeout would drop a
# line that arrives in two pieces across its timeout.
CTL_LOG=/tmp/ctl.in
ctl_open() {
	setsid -c sleep 2147483647 <>$CTL >&0 2>&0 &
	sleep 0.2
	stty -F $CTL raw -echo || return 1
	exec 3<>$CTL
	: >$CTL_LOG
	cat <&3 >>$CTL_LOG &
}

# ctl_sync TAG SECONDS: a barrier. SYNC TAG goes out once a second (lines
# written before the peer's qemu connected are lost) until the peer's SYNC
# TAG has arrived; then once more, for a peer that is still waiting.
ctl_sync() {
	local tag=$1 end n=0
	end=$(($(now_s) + ${2:-$PAIR_MEET}))
	while [ "$(now_s)" -lt "$end" ]; do
		[ $((n % 10)) = 0 ] && echo "SYNC $tag" >&3
		if grep -qxF "SYNC $tag" $CTL_LOG; then
			echo "SYNC $tag" >&3
			return 0
		fi
		sleep 0.1
		n=$((n + 1))
	done
	say "control line: no SYNC $tag from node $(peer_node) within ${2:-$PAIR_MEET} s"
	return 1
}

# ctl_msg TAG [TEXT] sends one message; ctl_wait TAG SECONDS prints its TEXT
# ("." when none). A message ends in " EOL": a line still arriving does not
# match.
ctl_msg() {
	local tag=$1
	shift
	echo "MSG $tag ${*:-.} EOL" >&3
}

ctl_wait() {
	local tag=$1 end line
	end=$(($(now_s) + ${2:-$PAIR_MEET}))
	while [ "$(now_s)" -lt "$end" ]; do
		line=$(grep -F "MSG $tag " $CTL_LOG | grep ' EOL$' | head -n 1)
		if [ -n "$line" ]; then
			line=${line#"MSG $tag "}
			echo "${line% EOL}"
			return 0
		fi
		sleep 0.1
	done
	say "control line: no $tag from node $(peer_node) within ${2:-$PAIR_MEET} s"
	return 1
}

peer_node() { if [ "$NODE" = a ]; then echo b; else echo a; fi; }

# wait_listen PORT SECONDS: a TCP listener on PORT (the servers open the
# device and create their QP before they listen).
wait_listen() {
	local i=0
	while [ $i -lt $(($2 * 10)) ]; do
		netstat -ltn 2>/dev/null | grep -q ":$1 " && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# ping_peer SECONDS: the peer answers over eth0 (frames sent before the other
# qemu bound its port are lost, ARP included).
ping_peer() {
	local i=0
	while [ $i -lt "$1" ]; do
		ping -c 1 -W 1 "$PEER_IP" >/dev/null 2>&1 && return 0
		i=$((i + 1))
	done
	return 1
}

# pemit NAME DIR: the record goes to the results port, not the console.
pemit() { emit "$1" "$2" >"$RESULTS_TTY"; }

# pair_scenario NAME [--key value]... [-- PEER-TEST-ARGS...]
#
# Both guests run it in step. Node b runs --serve (default: `rdmadoctor peer
# serve` on $B_IP:$PEER_PORT, once) and waits for its --port to listen (none:
# no server); node a then runs --client (default: `rdmadoctor peer test
# $B_IP:$PEER_PORT` with the arguments after --), --runs times. --a-break and
# --b-break (root, ash) run on their node before; --b-during runs on node b
# --b-after seconds after it let the client go (the link taken down mid-run).
# --server-grace S is how long node b's server may take to end by itself
# after the client (default 15; then it is killed). Every --key value goes
# to both nodes' meta; the host asserts node a's; node b's record is NAME.b
# (its server's output and exit, resource counts).
#
# --round K/N makes this call run K of N: the record is begun by round 1
# and sent by round N, so the reference tools' runs and rdmadoctor's can
# take turns (a host whose load drifts then weighs on both alike).
pair_scenario() {
	local name d abrk="" bbrk="" serve="" port=$PEER_PORT client="" runs=1 during="" after=1 grace=15 t0 i
	local round=1 last=1 meta
	name=$1
	shift
	if [ -n "$RDVM_ONLY" ]; then
		case ",$RDVM_ONLY," in *",$name,"*) ;; *) return 0 ;; esac
	fi
	d=$RESULTS/$name.$NODE
	i=$*
	case " $i " in *" --round "*)
		i=${i#*--round }
		round=${i%%/*} last=${i#*/}
		last=${last%% *}
		;;
	esac
	meta=$d/meta
	if [ "$round" = 1 ]; then
		rm -rf "$d"
		mkdir -p "$d"
		: >"$meta"
	else
		# Later rounds keep round 1's meta: its assertions once.
		meta=/dev/null
	fi
	while [ $# -gt 0 ]; do
		case $1 in
		--)
			shift
			break
			;;
		--*) [ $# -ge 2 ] || { echo "meta_error $1 needs a value" >>"$meta"; break; } ;;
		*)
			echo "meta_error unexpected word $1 (peer test's arguments go after --)" >>"$meta"
			break
			;;
		esac
		case $1 in
		--a-break) abrk=$2 ;;
		--b-break) bbrk=$2 ;;
		--serve) serve=$2 ;;
		--port) port=$2 ;;
		--client) client=$2 ;;
		--runs) runs=$2 ;;
		--b-during) during=$2 ;;
		--b-after) after=$2 ;;
		--server-grace) grace=$2 ;;
		esac
		printf '%s %s\n' "${1#--}" "$(printf '%s' "$2" | tr '\n\t' '  ')" >>"$meta"
		shift 2
	done
	[ -n "$serve" ] || serve="rdmadoctor peer serve --listen $B_IP:$PEER_PORT --once"
	[ -n "$client" ] || client="rdmadoctor peer test $B_IP:$PEER_PORT $*"
	printf 'args %s\n' "$*" >>"$meta"
	echo "run_limit $PAIR_RUN_LIMIT" >>"$meta"
	[ "$last" = 1 ] || runs=$last
	echo "runs $runs" >>"$meta"
	echo "pair 1" >>"$meta"
	ctl_sync "$name.begin.$round" || { echo "meta_error control line: no begin barrier" >>"$d/meta"; pemit "$(rec_name "$name")" "$d"; return 1; }
	say "pair scenario $name (node $NODE, round $round of $last)"
	t0=$(uptime_s)
	[ "$round" = 1 ] && rdma -j resource >"$d/resource.before.json" 2>&1
	local brk=$abrk
	[ "$NODE" = b ] && brk=$bbrk
	if [ -n "$brk" ]; then
		(eval "$brk") >"$d/break.log" 2>&1
		echo "break_exit $?" >>"$d/meta"
	fi
	# One round runs its own run; a scenario without rounds all of them.
	i=1
	[ "$last" = 1 ] || { i=$round runs=$round; }
	while [ "$i" -le "$runs" ]; do
		if [ "$NODE" = a ]; then
			pair_client_run "$name" "$d" "$i" "$client"
		else
			pair_server_run "$name" "$d" "$i" "$serve" "$port" "$during" "$after" "$grace"
		fi
		i=$((i + 1))
	done
	pair_baseline >"$d/repair.log" 2>&1
	echo "repair_exit $?" >>"$d/meta"
	rdma -j resource >"$d/resource.after.json" 2>&1
	ctl_sync "$name.end.$round" || echo "meta_error control line: no end barrier" >>"$d/meta"
	echo "seconds $(awk -v a="$t0" -v b="$(uptime_s)" 'BEGIN{printf "%.1f", b-a}')" >>"$d/meta"
	[ "$round" = "$last" ] || return 0
	pemit "$(rec_name "$name")" "$d"
}

# Node a's record is the scenario's name; node b's has ".b" after it.
rec_name() { if [ "$NODE" = a ]; then echo "$1"; else echo "$1.b"; fi; }

# pair_client_run NAME DIR I CMD: wait for node b's go, run CMD, tell b.
# Run I's files are stdout, stderr, exit for I=1 and stdout.I ... after.
pair_client_run() {
	local name=$1 d=$2 i=$3 cmd=$4 sfx="" go t0 t1
	[ "$i" = 1 ] || sfx=.$i
	if ! go=$(ctl_wait "$name.go.$i"); then
		echo "meta_error control line: node b never said go (run $i)" >>"$d/meta"
		echo 125 >"$d/exit$sfx"
		return 1
	fi
	[ "$go" = ready ] || echo "server_problem $go" >>"$d/meta"
	t0=$(uptime_s)
	# The command may use the helpers of this file (hostile_client).
	timeout "$PAIR_RUN_LIMIT" sh -c ". /rdvm/lib.sh; . /rdvm/pair.sh; $cmd" >"$d/stdout$sfx" 2>"$d/stderr$sfx" </dev/null
	echo $? >"$d/exit$sfx"
	t1=$(uptime_s)
	echo "client_seconds $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')" >>"$d/meta"
	ctl_msg "$name.done.$i"
}

# pair_server_run NAME DIR I CMD PORT DURING AFTER GRACE: start the server
# (none: nobody listens), let node a go once it listens, run DURING, wait
# for a's done, then give the server GRACE s to end by itself before
# killing it (server_killed in the meta).
pair_server_run() {
	local name=$1 d=$2 i=$3 cmd=$4 port=$5 during=$6 after=$7 grace=$8 sfx="" pid="" n rc
	[ "$i" = 1 ] || sfx=.$i
	if [ "$cmd" = none ]; then
		ctl_msg "$name.go.$i" ready
	else
		sh -c "exec $cmd" >"$d/stdout$sfx" 2>"$d/stderr$sfx" </dev/null &
		pid=$!
		if wait_listen "$port" 30; then
			ctl_msg "$name.go.$i" ready
		else
			ctl_msg "$name.go.$i" "server not listening on $port after 30 s"
		fi
	fi
	if [ -n "$during" ]; then
		SERVER_LOG=$d/stderr$sfx
		sleep "$after"
		(eval "$during") >>"$d/during.log" 2>&1
		echo "during_exit $?" >>"$d/meta"
	fi
	ctl_wait "$name.done.$i" >/dev/null || echo "meta_error control line: node a never said done (run $i)" >>"$d/meta"
	[ -n "$pid" ] || return 0
	n=0
	while kill -0 "$pid" 2>/dev/null && [ $n -lt $((grace * 10)) ]; do
		sleep 0.1
		n=$((n + 1))
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "server_killed 1" >>"$d/meta"
		kill "$pid"
	fi
	wait "$pid"
	rc=$?
	echo "$rc" >"$d/exit$sfx"
}

# run_pair: the first meeting, the peer's address answering, `rdmadoctor
# list` (node a), then every scenario of /rdvm/pair-scenarios.sh.
run_pair() {
	local d
	ctl_open || { say "RDVM-FATAL: cannot open the control line $CTL"; return 1; }
	if ! ctl_sync boot "$PAIR_FIRST_MEET"; then
		say "RDVM-FATAL: node $(peer_node) never came to the control line"
		return 1
	fi
	if ! ping_peer 30; then
		say "RDVM-FATAL: node $(peer_node) ($PEER_IP) does not answer ping over $NETDEV"
		return 1
	fi
	ctl_sync net || return 1
	say "node $NODE: peer reachable after $(uptime_s) s"
	if [ "$NODE" = a ]; then
		d=$RESULTS/list
		mkdir -p "$d"
		rdmadoctor list >"$d/stdout" 2>"$d/stderr"
		echo $? >"$d/exit"
		pemit list "$d"
	fi
	. /rdvm/pair-scenarios.sh
}

# server_logged TEXT SECONDS (in --b-during): wait until the server's output
# holds TEXT, so a break lands at a known point of the session.
server_logged() {
	local i=0
	while [ $i -lt $(($2 * 10)) ]; do
		grep -qF "$1" "$SERVER_LOG" 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# hostile_client ARGS...: what `peer serve` must survive, then a real `peer
# test ARGS` (its report is the scenario's stdout, its status the exit):
# random bytes, a length prefix past the frame limit, a frame of an unknown
# type, a client that connects and says nothing (dropped after the server's
# --io-timeout), a frame cut short.
hostile_client() {
	head -c 4096 /dev/urandom | nc -w 3 $B_IP $PEER_PORT >/dev/null 2>&1
	printf '\177\377\377\377\000\002' | nc -w 3 $B_IP $PEER_PORT >/dev/null 2>&1
	printf '\000\000\000\004\377\377{}' | nc -w 3 $B_IP $PEER_PORT >/dev/null 2>&1
	sleep 4 | nc -w 6 $B_IP $PEER_PORT >/dev/null 2>&1
	printf '\000\000\010\000\000\002{"magic":' | nc -w 3 $B_IP $PEER_PORT >/dev/null 2>&1
	rdmadoctor peer test $B_IP:$PEER_PORT "$@"
}
