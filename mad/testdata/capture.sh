#!/bin/bash
# capture.sh OUTDIR: with ibsim running net.2sw2path4hca and opensm attached
# as Hca1, ask infiniband-diags (as Hca2) with -dd and keep, for each
# question, the answer's MAD as the tool dumped it (NAME.hex) and what the
# tool printed (NAME.txt). The Go tests decode the .hex and compare with
# the .txt values. IBSIM_SOCKNAME must name the simulator's socket.
set -eu
out=${1:?usage: capture.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export SIM_HOST=Hca2
cap() {
	name=$1
	shift
	pick=${PICK:--1}
	(cd "$tmp" && ibsim-run "$@" >"$tmp/out" 2>"$tmp/err") || true
	cat "$tmp/err" "$tmp/out" >"$tmp/all"
	python3 "$here/extract.py" "$tmp/all" "$out/$name.hex" "$pick"
	{ echo "# $*"; grep -v '^[0-9a-f]\{4\}\( [0-9a-f]\{4\}\)*$' "$tmp/out" | grep -v '^SA \(Request\|Response\):$'; } >"$out/$name.txt"
}
cap sminfo sminfo -dd
cap nodeinfo_lid4 smpquery -dd nodeinfo 4
cap nodedesc_lid1 smpquery -dd nodedesc 1
cap portinfo_lid4 smpquery -dd portinfo 4
# smpquery pkeys asks NodeInfo (PartitionCap) first: keep its second answer, block 0.
PICK=1 cap pkeys_lid4 smpquery -dd pkeys 4
cap nodeinfo_dr_0_1 smpquery -dd -D nodeinfo 0,1
cap portinfo_dr_0_1_port1 smpquery -dd -D portinfo 0,1 1
cap perfquery_lid4_port1 perfquery -dd 4 1
cap pathrecord_4_4 saquery -dd PR --src-to-dst 4:4
cap sminforecords saquery -dd SMIR
# ibsim passes one MAD of the table (no RMPP): the first record whole, the next cut short.
cap noderecords saquery -dd NR
