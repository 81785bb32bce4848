#!/usr/bin/env bash
# run-in-guest.sh: boot the SoftRoCE VM, bring rxe0 up on dummy0 and run one
# shell command in it; print the command's output and exit with its status.
#
#   bash testdata/vm/run-in-guest.sh [--add HOSTPATH[:GUESTPATH]]... [--timeout S] 'CMD'
#
# The guest has rdmadoctor (when ./cmd/rdmadoctor builds) in /usr/local/bin,
# rdma-core (libibverbs, librxe, ibv_devices, ibv_devinfo, ibv_rc_pingpong...),
# iproute2 as /usr/bin/ip and /usr/bin/rdma, and busybox for the rest. --add
# copies a host file (a `CGO_ENABLED=0 go test -c` binary, say) into the guest,
# to GUESTPATH or /opt/<name>. CMD runs as root under `sh -c` in /.
#
# Exit status: CMD's own, or 125 when the VM could not run it (the reason and
# the console's tail are printed).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

adds=()
limit=${RDVM_TIMEOUT:-240}
while [ $# -gt 0 ]; do
	case $1 in
	--add)
		adds+=("$2")
		shift 2
		;;
	--timeout)
		limit=$2
		shift 2
		;;
	-h | --help)
		awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
		exit 0
		;;
	--)
		shift
		break
		;;
	*) break ;;
	esac
done
[ $# -eq 1 ] || {
	echo "usage: $0 [--add HOSTPATH[:GUESTPATH]]... [--timeout S] 'CMD'" >&2
	exit 2
}
cmd=$1

# A harness failure must not read as the command's own status.
trap 'rc=$?; [ $rc -eq 0 ] || [ -n "${CMD_DONE:-}" ] || exit 125' EXIT

prepare 1
added=()
for a in "${adds[@]}"; do
	src=${a%%:*}
	dst=/opt/$(basename "$src")
	[ "$src" != "$a" ] && dst=${a#*:}
	[ -e "$src" ] || die "--add: no $src"
	mkdir -p "$CACHE/root/$(dirname "$dst")"
	cp -a "$src" "$CACHE/root/$dst"
	added+=("$CACHE/root/$dst")
done
# What the added programs link against comes along (from the host).
if [ "${#added[@]}" -gt 0 ]; then
	close_libraries "$CACHE/root" "${added[@]}"
	ldconfig -r "$CACHE/root"
fi

job=$CACHE/job.shell.sh
# Single-quoted for the guest's ash, each ' written as '\''.
printf "shell_job '%s'\n" "$(printf '%s' "$cmd" | sed "s/'/'\\\\''/g")" >"$job"

initrd=$CACHE/initrd.shell.cpio
pack_initramfs "$job" "$initrd"
console=$CACHE/console.shell.log
log "booting (timeout ${limit}s)"
t0=$(now_ms)
brc=0
boot "$KDIR" "$initrd" "$console" "$limit" || brc=$?
log "guest ran $(($(now_ms) - t0)) ms (qemu status $brc)"
res=$CACHE/results.shell
rm -rf "$res"
"$BIN_DIR/rdvm" collect "$console" "$res"
if [ ! -e "$res/shell/exit" ]; then
	[ "$brc" = 124 ] || [ "$brc" = 137 ] && log "qemu was killed after ${limit}s"
	console_tail "$console"
	die "the guest did not return the command's result"
fi
cat "$res/shell/output"
CMD_DONE=1
exit "$(cat "$res/shell/exit")"
