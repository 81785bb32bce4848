#!/usr/bin/env bash
# Runs rdmadoctor's InfiniBand control-plane checks (ib.sm, ib.path, ib.far_end, ib.pkey)
# against a simulated fabric and the real programs: Debian's ibsim (the fabric), opensm (the
# SM, attached as one HCA) and infiniband-diags (the reference), with rdmadoctor attached as
# another HCA through ibsim-run (LD_PRELOAD=libumad2sim.so). No RDMA hardware, kernel module or
# privilege is needed to run a fabric; root only installs the packages when they are missing.
#
# bash testdata/ibsim/test.sh [--record] [--only NAME[,NAME]] [BIN]   (BIN: bin/rdmadoctor)
#   --record   rewrite testdata/ibsim/ref/<scenario>/: the reference tools' transcripts and the
#              facts derived from them (review the diff: it is what the simulator shows)
#   KEEP=1     keeps the work directory (logs, live transcripts, reports) of a failed run
#   PAUSE=N    waits N s in each scenario once its fabric is up and broken, to use it by hand
#
# Each scenario of scenarios.sh gets a fabric of its own: ibsim on its topology, its SMs
# started and waited for (bounded), its breakage applied; then the reference tools run as the
# host (their facts must match the scenario's --fact lines and ref/<scenario>/facts), then
# rdmadoctor, whose verdicts are judged by verify.py; then the fabric is torn down. A check not
# yet in `rdmadoctor list` is PENDING, never passed; any real mismatch fails the suite.
set -Eeuo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
here=$repo/testdata/ibsim
t0=$(date +%s.%N)
say() { printf 'ib-test: %s\n' "$*"; }
fail() {
	printf 'ib-test: FAIL: %s\n' "$*" >&2
	if [ -n "${FABRIC_DIR:-}" ] && [ -d "$FABRIC_DIR" ]; then
		local f
		for f in "$FABRIC_DIR"/ibsim.log "$FABRIC_DIR"/sm-*/stdout; do
			[ -f "$f" ] && printf -- '--- %s (last 10 lines)\n' "${f#"$W"/}" >&2 && tail -n 10 "$f" >&2
		done
	fi
	exit 1
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

record=0 only=
while [ $# -gt 0 ]; do
	case $1 in
	--record) record=1 ;;
	--only) only=,$2, && shift ;;
	-*) fail "unknown flag $1" ;;
	*) break ;;
	esac
	shift
done
bin=$(realpath "${1:-bin/rdmadoctor}")
[ -x "$bin" ] || fail "no rdmadoctor binary at $bin (make build)"

W=$(mktemp -d)
# shellcheck source=testdata/ibsim/lib.sh
. "$here/lib.sh"
cleanup() {
	local rc=$?
	set +e
	# A reader that went away (| head) must not stop the teardown half way.
	trap '' PIPE
	fabric_stop
	local left
	left=$(leftovers)
	if [ -n "$left" ]; then
		# Each carries this run's socket name: ours to end, and a failure of the teardown.
		printf 'ib-test: FAIL: processes left after the teardown (killed now): %s\n' "$left" >&2
		# shellcheck disable=SC2086 # a list of pids
		kill -9 $left 2>/dev/null
		rc=1
	fi
	if [ "$rc" = 0 ] || [ -z "${KEEP:-}" ]; then rm -rf "$W"; else say "kept $W"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
trap 'exit 141' PIPE
# A command that fails where the script does not expect it says where.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" exited $?"' ERR

# shellcheck source=testdata/ibsim/verify_selftest.sh
. "$here/verify_selftest.sh"
verify_selftest
ensure_tools
"$bin" list >"$W/list.txt" || fail "rdmadoctor list failed"
awk 'NR > 1 { print $2 }' "$W/list.txt" >"$W/catalog"
present=$(grep -xE 'ib\.(sm|path|far_end|pkey)' "$W/catalog" | paste -sd, - || true)
# One --check with the comma-separated list, as a user runs it.
check_args=()
[ -z "$present" ] || check_args=(--check "$present")
say "checks in the catalog: ${present:-none of ib.sm ib.path ib.far_end ib.pkey (every verdict PENDING)}"

passed=0 pending=0 ran=0

# The steps of a scenario. They read the scenario's options from the locals of scenario()
# (bash's dynamic scope): topo, host, sms, kill_sm, consoles, expect, facts_want.

# fabric_up: the fabric, its SMs (the first MASTER, each next one STANDBY), then the breakage.
fabric_up() {
	fabric_start "$here/topo/$topo"
	local i hca prio parts spec
	for i in "${!sms[@]}"; do
		IFS=: read -r hca prio parts <<<"${sms[$i]}"
		sm_start "$hca" "$prio" "${parts:+$here/partitions/$parts}"
		wait_swept "$host" $((i + 1))
	done
	if [ -n "$kill_sm" ]; then
		kill -9 "$(sm_pid "$kill_sm")" && wait "$(sm_pid "$kill_sm")" 2>/dev/null || true
	fi
	for spec in "${consoles[@]}"; do console "$spec"; done
}

# reference_agrees NAME: the reference transcripts and their facts ($W/NAME.facts), which must
# show the scenario's --fact lines and equal ref/NAME/facts (--record writes both instead).
reference_agrees() {
	local name=$1 refdir=$W/ref/$1 f key got
	[ "$record" = 1 ] && refdir=$here/ref/$name && rm -rf "$refdir"
	reference "$host" "$refdir"
	facts "$refdir" >"$W/$name.facts"
	for f in "${facts_want[@]}"; do
		key=${f%%=*}
		got=$(sed -n "s/^${key//./\\.}=//p" "$W/$name.facts")
		[ "$got" = "${f#*=}" ] || fail "$name: the reference tools show $key='$got', the scenario needs '${f#*=}' (transcripts: $refdir)"
	done
	if [ "$record" = 1 ]; then
		cp "$W/$name.facts" "$here/ref/$name/facts"
		return 0
	fi
	[ -f "$here/ref/$name/facts" ] || fail "$name: no ref/$name/facts (test.sh --record)"
	diff -u "$here/ref/$name/facts" "$W/$name.facts" >"$W/$name.facts.diff" ||
		fail "$name: the reference tools disagree with ref/$name/facts:
$(cat "$W/$name.facts.diff")"
}

# expect_file NAME: expect/$expect less the key lines of checks not in the catalog (a key line
# ends with "# <check ID>"), under the same file name and with the same line numbers, since a
# finding cites FILE:LINE. Prints its path.
expect_file() {
	[ -f "$here/expect/$expect" ] || fail "$1: no expect/$expect"
	mkdir -p "$W/expect.$1"
	awk -v have=",$present," 'match($0, /#[ \t]*ib\.[a-z_]+[ \t]*$/) {
		id = substr($0, RSTART + 1); gsub(/[ \t]/, "", id)
		if (index(have, "," id ",") == 0) { print "# left out: " id " is not in rdmadoctor list"; next }
	} { print }' "$here/expect/$expect" >"$W/expect.$1/$expect"
	echo "$W/expect.$1/$expect"
}

# run_doctor NAME: rdmadoctor as the host with the checks the catalog has, into $W/NAME.json;
# sets doctor_rc and doctor_s (seconds taken, "-" when not run). A scenario with --inventory
# also gets `rdmadoctor inventory` as the host (run_inventory).
run_doctor() {
	local name=$1 t args=("${check_args[@]}" --format json)
	doctor_rc=0 doctor_s=-
	: >"$W/$name.json"
	: >"$W/$name.stderr"
	[[ " ${verdicts[*]} " != *" --inventory "* ]] || run_inventory "$name"
	[ -n "$present" ] || return 0
	[ -z "$expect" ] || args+=(--expect "$(expect_file "$name")")
	t=$(date +%s.%N)
	(cd "$FABRIC_DIR" && env -u LD_PRELOAD SIM_HOST="$host" timeout -k 2 60 ibsim-run "$bin" "${args[@]}") \
		>"$W/$name.json" 2>"$W/$name.stderr" || doctor_rc=$?
	doctor_s=$(elapsed "$t")
	[ "$doctor_rc" != 124 ] && [ "$doctor_rc" != 137 ] || fail "$name: rdmadoctor did not return within 60 s"
}

# scenario NAME [--key value]...: see scenarios.sh.
scenario() {
	local name=$1
	shift
	[ -z "$only" ] || [[ "$only" == *",$name,"* ]] || return 0
	local topo=healthy.net host=Hca2 expect= kill_sm= sms=() consoles=() facts_want=() verdicts=()
	while [ $# -gt 0 ]; do
		case $1 in
		--topo) topo=$2 ;;
		--host) host=$2 ;;
		--sm) sms+=("$2") ;;
		--kill-sm) kill_sm=$2 ;;
		--console) consoles+=("$2") ;;
		--expect) expect=$2 ;;
		--fact) facts_want+=("$2") ;;
		--status | --finding | --mentions | --within | --inventory) verdicts+=("$1" "$2") ;;
		*) fail "$name: unknown scenario option $1" ;;
		esac
		shift 2
	done
	local ts out vrc=0 doctor_rc doctor_s
	ts=$(date +%s.%N)
	ran=$((ran + 1))
	fabric_up
	reference_agrees "$name"
	if [ -n "${PAUSE:-}" ]; then
		say "$name: paused ${PAUSE}s; attach with: IBSIM_SOCKNAME=$IBSIM_SOCKNAME SIM_HOST=$host ibsim-run CMD"
		sleep "$PAUSE"
	fi
	run_doctor "$name"
	fabric_stop
	out=$(python3 "$here/verify.py" "$W/$name.json" "$doctor_rc" "$doctor_s" "$W/catalog" "$W/$name.facts" "${verdicts[@]}") || vrc=$?
	printf '%s\n' "$out" | sed "s/^/  $name: /"
	[ "$vrc" = 0 ] || fail "$name: rdmadoctor disagrees (report: $W/$name.json, stderr: $(head -c 300 "$W/$name.stderr"))"
	if grep -q '^PENDING' <<<"$out"; then pending=$((pending + 1)); else passed=$((passed + 1)); fi
	say "$name: reference $(grep -c . "$W/$name.facts") facts agree; $(grep -c '^PASS' <<<"$out" || true) verdicts pass, $(grep -c '^PENDING' <<<"$out" || true) pending ($(elapsed "$ts") s)"
}

# shellcheck source=testdata/ibsim/scenarios.sh
. "$here/scenarios.sh"
[ "$ran" -gt 0 ] || fail "no scenario matched --only ${only//,/ }"
say "PASS: $ran scenarios, $passed judged in full, $pending with PENDING verdicts (a check not in rdmadoctor list), in $(elapsed "$t0") s"
