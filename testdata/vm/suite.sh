#!/usr/bin/env bash
# suite.sh: the real-RDMA-stack tier of rdmadoctor's tests. Boots a Debian
# kernel with SoftRoCE (rdma_rxe) under qemu, runs every scenario of
# scenarios.sh against the static rdmadoctor binary in one boot, and asserts
# each one's exit code, root cause and inventory on the host; then boots the
# same image as two guests joined over the host's loopback (pair.sh) for
# the two-host scenarios of pair-scenarios.sh.
#
#   bash testdata/vm/suite.sh [--only NAME[,NAME]] [--strict] [--timeout S]
#                             [--update-timing] [--update-captured] [--no-pair]
#   bash testdata/vm/suite.sh --shell-cmd 'CMD'    (= run-in-guest.sh 'CMD')
#
# --strict (or RDVM_STRICT=1) counts a PENDING scenario, and a timing ratio
# over RDVM_MAX_RATIO (default 1.5), as a failure.
# The timing table is always in the log; --update-timing also writes it to
# testdata/vm/TIMING.md (a plain run leaves the tree as it was).
# --update-captured replaces the archived fixture rxe-vm-captured
# (testdata/host-archives/rxe-vm-captured.tree) with the snapshot the snapshot-roundtrip scenario took (and its live report,
# testdata/golden/rxe-vm-captured.live.json), then rewrites its golden reports.
# --only takes names of either file; --no-pair (or RDVM_NO_PAIR=1) skips the
# two guests.
# Exit status 0 only when the guests ran to their end and no scenario failed.
set -euo pipefail
VM_SELF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

only="" strict=${RDVM_STRICT:-0} limit=${RDVM_TIMEOUT:-420} update_timing=0 update_captured=0 no_pair=${RDVM_NO_PAIR:-0}
while [ $# -gt 0 ]; do
	case $1 in
	--only)
		only=$2
		shift 2
		;;
	--strict)
		strict=1
		shift
		;;
	--timeout)
		limit=$2
		shift 2
		;;
	--update-timing)
		update_timing=1
		shift
		;;
	--update-captured)
		update_captured=1
		shift
		;;
	--no-pair)
		no_pair=1
		shift
		;;
	--shell-cmd)
		shift
		exec bash "$VM_SELF_DIR/run-in-guest.sh" "$@"
		;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
		exit 0
		;;
	*)
		echo "suite.sh: unknown argument $1 (see --help)" >&2
		exit 2
		;;
	esac
done

. "$VM_SELF_DIR/lib.sh"
. "$VM_SELF_DIR/pair.sh"

# --only NAME,... splits into the single guest's scenarios and the pair's.
single_only="" pair_only=""
for n in ${only//,/ }; do
	if grep -qE "^pair_scenario[[:space:]]+$n([[:space:]]|$)" "$VM_SELF_DIR/pair-scenarios.sh"; then
		pair_only=$pair_only${pair_only:+,}$n
	else
		single_only=$single_only${single_only:+,}$n
	fi
done
run_single=1 run_pair=1
[ "$no_pair" = 1 ] && run_pair=0
if [ -n "$only" ]; then
	[ -n "$single_only" ] || run_single=0
	[ -n "$pair_only" ] || run_pair=0
fi
only=$single_only
[ "$update_captured" = 1 ] && run_single=1

if [ "$update_captured" = 1 ] && [ -n "$only" ]; then
	case ",$only," in *,snapshot-roundtrip,*) ;; *) only="$only,snapshot-roundtrip" ;; esac
fi

t_start=$(now_ms)
log "SoftRoCE VM suite: Debian kernel + rdma_rxe under qemu ($(nproc) host cpus, accel ${RDVM_ACCEL:-tcg})"
(cd "$REPO_ROOT" && go test -count=1 ./testdata/vm/rdvm >&2) || die "the harness's own tests (go test ./testdata/vm/rdvm) failed"
prepare 0
t_prep=$(now_ms)

job=$CACHE/job.suite.sh
echo 'run_suite' >"$job"
initrd=$CACHE/initrd.suite.cpio
pack_initramfs "$job" "$initrd"
single_failed=0
if [ "$run_single" = 1 ]; then
	console=$CACHE/console.suite.log
	log "booting; scenarios run in one boot (timeout ${limit}s); console: ${console#"$REPO_ROOT"/}"
	brc=0
	boot "$KDIR" "$initrd" "$console" "$limit" "${only:+rdvm.only=$only}" || brc=$?
	t_boot=$(now_ms)
	log "guest ran $(((t_boot - t_prep) / 1000)) s (qemu status $brc)"
	if [ "$brc" = 124 ] || [ "$brc" = 137 ]; then
		log "qemu was killed after ${limit}s"
	fi

	res=$CACHE/results.suite
	rm -rf "$res"
	"$BIN_DIR/rdvm" collect "$console" "$res" || die "could not read the console log"
	# The wall time goes first: verify's closing "vm: N passed, N failed, N
	# skipped" stays the last line a CI log reader sees.
	log "wall time $((($(now_ms) - t_start) / 1000)) s: prepare $(((t_prep - t_start) / 1000)) s, guest $(((t_boot - t_prep) / 1000)) s; results in ${res#"$REPO_ROOT"/}"
	vrc=0
	timing_md=()
	[ "$update_timing" = 1 ] && timing_md=(--timing-md "$VM_DIR/TIMING.md")
	"$BIN_DIR/rdvm" verify --strict="$strict" ${only:+--only "$only"} --scenarios "$VM_DIR/scenarios.sh" \
		--max-ratio "${RDVM_MAX_RATIO:-1.5}" \
		"${timing_md[@]}" "$res" || vrc=$?
	if [ "$vrc" != 0 ] || [ "$brc" != 0 ]; then
		console_tail "$console"
		[ "$vrc" != 0 ] || log "FAIL: qemu ended with status $brc"
		single_failed=1
	elif [ "$update_captured" = 1 ]; then
		update_captured_fixture "$res/snapshot-roundtrip"
	fi
fi

# The pair boots the same initramfs right after the single guest (not
# beside it: three emulated CPUs on a small host would halve the RDMA
# figures the pair measures).
pair_failed=0
if [ "$run_pair" = 1 ]; then
	pair_suite "$initrd" "${RDVM_PAIR_TIMEOUT:-480}" "$pair_only" "$update_timing" || pair_failed=1
fi
log "suite wall time $((($(now_ms) - t_start) / 1000)) s"
if [ "$update_timing" = 1 ] && [ "$single_failed$pair_failed" = 00 ]; then
	log "wrote ${VM_DIR#"$REPO_ROOT"/}/TIMING.md"
fi
[ "$single_failed$pair_failed" = 00 ] || exit 1
