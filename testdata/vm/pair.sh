#!/usr/bin/env bash
# pair.sh: the two-host tier of the SoftRoCE VM suite. Two guests of the
# same image (lib.sh's root, booted with rdinit=/rdvm/pair-init), each with
# rdma_rxe on a virtio NIC, joined by a qemu dgram netdev on the host's
# loopback (nothing else is reachable from them), run pair-scenarios.sh in
# step and are judged on the host by `rdvm verify`.
#
#   bash testdata/vm/pair.sh [--only NAME[,NAME]] [--timeout S] [--update-timing]
#
# suite.sh sources this file and calls pair_suite with the initramfs it
# already packed, right after the single guest; run on its own it prepares
# the image first. Exit status 0 only when both guests ran to their end and
# no scenario failed.
set -euo pipefail
PAIR_SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$PAIR_SELF_DIR/lib.sh"

# free_udp_port prints a random UDP port of 127.0.0.1 that nothing is bound
# to now (qemu exits at once if its port is taken; pair_boot then retries).
free_udp_port() {
	local p i
	for i in $(seq 1 50); do
		p=$((20000 + RANDOM % 40000))
		[ -z "$(ss -Hlun "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
	done
	die "no free UDP port on 127.0.0.1 after 50 tries"
}

# pair_qemu NODE LPORT RPORT CHARDEV OUTPREFIX LIMIT INITRD EXTRA: one guest.
# -smp 1: two 2-vCPU guests on a 2-core host halve the RDMA figures.
# -nodefaults leaves no NIC but the one joined to the other guest; romfile=
# skips the iPXE option ROM that -kernel does not need.
pair_qemu() {
	local node=$1 lport=$2 rport=$3 chardev=$4 out=$5 limit=$6 initrd=$7 extra=$8 image=$9 mac accel=${RDVM_ACCEL:-tcg} cpu=qemu64
	[ "$accel" = kvm ] && cpu=host
	mac=52:54:00:00:02:0$([ "$node" = a ] && echo 1 || echo 2)
	: >"$out.console"
	: >"$out.results"
	timeout --kill-after=5 "$limit" qemu-system-x86_64 \
		-accel "$accel" -cpu "$cpu" -m 768 -smp 1 -nodefaults -display none -no-reboot \
		-netdev "dgram,id=n0,local.type=inet,local.host=127.0.0.1,local.port=$lport,remote.type=inet,remote.host=127.0.0.1,remote.port=$rport" \
		-device "virtio-net-pci,netdev=n0,mac=$mac,romfile=" \
		-chardev "$chardev" \
		-serial "file:$out.console" -serial "file:$out.results" -serial chardev:ctl \
		-kernel "$image" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 quiet loglevel=1 rdinit=/rdvm/pair-init rdvm.node=$node $extra" \
		</dev/null >"$out.qemu" 2>&1
}

# pair_boot INITRD OUTDIR LIMIT EXTRA boots both guests concurrently and
# waits for both; node b starts once node a's control socket exists (its
# chardev connects to it). Sets PAIR_RC_A and PAIR_RC_B.
pair_boot() {
	local initrd=$1 out=$2 limit=$3 extra=$4 pa pb sock i pida pidb try image
	image=$(kernel_image "$KDIR")
	for try in 1 2 3; do
		pa=$(free_udp_port)
		pb=$(free_udp_port)
		[ "$pa" != "$pb" ] || continue
		sock=$out/ctl.sock
		rm -f "$sock"
		PAIR_RC_A=0 PAIR_RC_B=0
		pair_qemu a "$pa" "$pb" "socket,id=ctl,path=$sock,server=on,wait=off" "$out/a" "$limit" "$initrd" "$extra" "$image" &
		pida=$!
		for i in $(seq 1 100); do
			[ -S "$sock" ] && break
			kill -0 "$pida" 2>/dev/null || break
			sleep 0.1
		done
		if [ ! -S "$sock" ]; then
			wait "$pida" || PAIR_RC_A=$?
			grep -q 'Address already in use' "$out/a.qemu" && continue
			die "node a's qemu did not start (status $PAIR_RC_A): $(tail -n 3 "$out/a.qemu")"
		fi
		pair_qemu b "$pb" "$pa" "socket,id=ctl,path=$sock,reconnect=1" "$out/b" "$limit" "$initrd" "$extra" "$image" &
		pidb=$!
		wait "$pidb" || PAIR_RC_B=$?
		wait "$pida" || PAIR_RC_A=$?
		if [ "$PAIR_RC_B" = 1 ] && grep -q 'Address already in use' "$out/b.qemu"; then
			log "node b's UDP port $pb was taken; booting the pair again"
			continue
		fi
		return 0
	done
	die "could not boot the pair: UDP ports kept being taken"
}

# pair_suite INITRD LIMIT ONLY UPDATE_TIMING: boots the pair, collects both
# guests' records into one results folder and judges them. Returns 1 when
# anything failed.
pair_suite() {
	local initrd=$1 limit=$2 only=$3 update_timing=$4 out res t0 t1 vrc=0 timing_md=()
	out=$CACHE/pair
	rm -rf "$out"
	mkdir -p "$out"
	t0=$(now_ms)
	log "pair: booting two guests joined over 127.0.0.1 (timeout ${limit}s); consoles in ${out#"$REPO_ROOT"/}"
	pair_boot "$initrd" "$out" "$limit" "${only:+rdvm.only=$only}"
	t1=$(now_ms)
	log "pair: guests ran $(((t1 - t0) / 1000)) s (qemu status a $PAIR_RC_A, b $PAIR_RC_B)"
	res=$CACHE/results.pair
	rm -rf "$res" "$res.b"
	"$BIN_DIR/rdvm" collect "$out/a.results" "$res" || die "could not read node a's results"
	"$BIN_DIR/rdvm" collect "$out/b.results" "$res.b" || die "could not read node b's results"
	local problems=0 r
	if [ ! -e "$res.b/.done" ]; then
		echo "vm: FAIL: pair node b never reached its end (no @@RDVM-DONE@@ on its results port)"
		problems=1
	fi
	for r in "$res.b"/*.b; do
		[ -d "$r" ] && mv "$r" "$res/"
	done
	[ "$update_timing" = 1 ] && timing_md=(--pair-md "$VM_DIR/TIMING.md")
	"$BIN_DIR/rdvm" verify --strict="${strict:-${RDVM_STRICT:-0}}" ${only:+--only "$only"} --scenarios "$VM_DIR/pair-scenarios.sh" \
		"${timing_md[@]}" "$res" || vrc=$?
	if [ "$vrc" != 0 ] || [ "$problems" != 0 ] || [ "$PAIR_RC_A" != 0 ] || [ "$PAIR_RC_B" != 0 ]; then
		console_tail "$out/a.console" 40
		console_tail "$out/b.console" 40
		return 1
	fi
	log "pair: wall time $((($(now_ms) - t0) / 1000)) s; results in ${res#"$REPO_ROOT"/}"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	only="" limit=${RDVM_PAIR_TIMEOUT:-480} update_timing=0
	while [ $# -gt 0 ]; do
		case $1 in
		--only)
			only=$2
			shift 2
			;;
		--timeout)
			limit=$2
			shift 2
			;;
		--update-timing)
			update_timing=1
			shift
			;;
		-h | --help)
			awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
			exit 0
			;;
		*)
			echo "pair.sh: unknown argument $1 (see --help)" >&2
			exit 2
			;;
		esac
	done
	prepare 0
	echo 'run_suite' >"$CACHE/job.pair.sh"
	pack_initramfs "$CACHE/job.pair.sh" "$CACHE/initrd.pair.cpio"
	pair_suite "$CACHE/initrd.pair.cpio" "$limit" "$only" "$update_timing"
fi
