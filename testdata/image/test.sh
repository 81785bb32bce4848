#!/usr/bin/env bash
# Tests the image recipe (deploy/kubernetes/image/build-rootfs.sh) without a
# registry or a container runtime: builds the root filesystem from Debian's
# packages (the .debs cached in .cache/image-debs), then under chroot:
#   - level 1 against a fixture host copied into it: healthy exits 0, a port
#     down exits 19 — the binary starts with only the image's libc;
#   - a "live" level-1 run whose /sys and /proc are a fixture's: the
#     libibverbs.install check resolves libibverbs.so.1 through the image's
#     own loader cache and finds the image's files and mlx5 provider;
#   - the NPD component's init container command (cp) runs in the image.
# Needs root (chroot) and apt's lists (build-rootfs.sh updates them).
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "image: FAIL: $*" >&2; exit 1; }
say() { echo "image: $*"; }
if [ "$(id -u)" != 0 ]; then
  [ "${CI:-}" = true ] && fail "needs root (chroot) under CI=true"
  say "SKIP: needs root (chroot, files owned as in the packages)"
  exit 0
fi
for tool in apt-get dpkg-deb python3; do
  command -v "$tool" >/dev/null || { [ "${CI:-}" = true ] && fail "$tool missing"; say "SKIP: $tool missing"; exit 0; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CGO_ENABLED=0 go build -trimpath -o "$work/rdmadoctor" ./cmd/rdmadoctor
go run ./sysfs/sysfstest/hosttree materialize testdata   # the host fixtures (make fixtures)
bash deploy/kubernetes/image/build-rootfs.sh "$work/rdmadoctor" "$work/out" .cache/image-debs
rootfs=$work/out/rootfs tarball=$work/out/rdmadoctor-rootfs.tar
bin=/usr/local/bin/rdmadoctor

# The tarball holds the binary, owned by root, as the Dockerfile's ADD needs.
listing=$(tar -tvf "$tarball")   # not piped into grep -q: its early exit fails tar under pipefail
grep -Eq "^-rwxr-xr-x 0/0 .* \./usr/local/bin/rdmadoctor$" <<<"$listing" ||
  fail "$tarball lacks ./usr/local/bin/rdmadoctor, mode 0755, owner 0/0"

# Every library the verbs child dlopens resolves its own dependencies
# inside the image: the image's loader lists them (no "not found").
shopt -s nullglob
ldsos=("$rootfs"/lib64/ld-linux-*.so.* "$rootfs"/lib/ld-linux*.so.*)
[ ${#ldsos[@]} -gt 0 ] || fail "no dynamic loader in the image"
ldso=${ldsos[0]#"$rootfs"/}
libs=()
for l in "$rootfs"/usr/lib/*/libibverbs.so.1 "$rootfs"/usr/lib/*/libibverbs/*.so "$rootfs$bin"; do libs+=("${l#"$rootfs"/}"); done
[ ${#libs[@]} -gt 3 ] || fail "the image holds ${#libs[@]} of libibverbs and its providers: ${libs[*]}"
for l in "${libs[@]}"; do
  out=$(chroot "$rootfs" "/$ldso" --list "/$l" 2>&1) || fail "/$ldso --list /$l in the image: $out"
  ! grep -q "not found" <<<"$out" || fail "/$l in the image: $out"
done
say "libibverbs, its $((${#libs[@]} - 2)) providers and the binary: every dependency resolves inside the image"

# run FIXTURE WANT: the fixture at /fixture in the image, judged at level 1.
run() {
  rm -rf "$rootfs/fixture"
  cp -a "testdata/hosts/$1" "$rootfs/fixture"
  local code=0
  chroot "$rootfs" "$bin" --root /fixture --level 1 --format json >"$work/$1.json" 2>"$work/$1.err" || code=$?
  [ "$code" = "$2" ] || fail "chroot $bin --root /fixture ($1): exit $code, want $2: $(cat "$work/$1.err")"
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r["exit_code"] != int(sys.argv[2]))' "$work/$1.json" "$2" ||
    fail "$1: the JSON report's exit_code is not $2"
  say "chroot level 1 on $1: exit $code"
}
run cx5-roce-healthy 0
run port-down 19
rm -rf "$rootfs/fixture"

# Live inside the image: /sys and /proc are the healthy fixture's, /etc and
# /usr the image's. libibverbs.install must pass on the image's own files.
cp -a testdata/hosts/cx5-roce-healthy/sys/. "$rootfs/sys/"
cp -a testdata/hosts/cx5-roce-healthy/proc/. "$rootfs/proc/"
chroot "$rootfs" "$bin" --level 1 --format json >"$work/live.json" 2>"$work/live.err" || true
cache_entries=$(ldconfig -p -C "$rootfs/etc/ld.so.cache" | sed -n '1s/^\([0-9]*\) libs found.*/\1/p')
ibverbs_deb=$(ls .cache/image-debs/libibverbs1_*.deb)
python3 - "$work/live.json" "$rootfs" "$cache_entries" <<'PY' || fail "libibverbs.install inside the image: see above ($(cat "$work/live.err"))"
import json, os, sys
rep, rootfs, entries = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
c = next(c for c in rep["checks"] if c["id"] == "libibverbs.install")
ev = c["evidence"]
problems = []
if c["status"] != "pass":
    problems.append(f"status {c['status']}: {c['summary']}")
lib = ev.get("library", {})
if lib.get("source") != "/etc/ld.so.cache":
    problems.append(f"library found through {lib.get('source')!r}, not the image's /etc/ld.so.cache")
if ev.get("ld_cache", {}).get("entries") != entries:
    problems.append(f"loader cache of {ev.get('ld_cache')} entries, the image's has {entries}")
f = lib.get("file", "")
if not f or not os.path.isfile(rootfs + f) or os.path.islink(rootfs + f):
    problems.append(f"library file {f!r} is not a file in the image")
for n in ev.get("providers", {}).get("needed", []):
    for p in n.get("files", []):
        if not os.path.isfile(rootfs + p):
            problems.append(f"provider {p} is not in the image")
if not ev.get("providers", {}).get("needed"):
    problems.append("no provider judged")
for p in problems:
    print("image: libibverbs.install:", p, file=sys.stderr)
print(f"image: libibverbs.install inside the image: {lib.get('path')} -> {f} via {lib.get('source')} ({entries} entries)")
sys.exit(1 if problems else 0)
PY
dpkg-deb -c "$ibverbs_deb" | awk '{print substr($6, 2)}' | grep -x "$(python3 -c 'import json,sys; print(next(c for c in json.load(open(sys.argv[1]))["checks"] if c["id"]=="libibverbs.install")["evidence"]["library"]["file"])' "$work/live.json")" >/dev/null ||
  fail "the library libibverbs.install found is not a file of $ibverbs_deb"

# The NPD component's init container copies the binary out with its image's
# command; it must exist there and work.
patch=deploy/kubernetes/npd/npd-daemonset-patch.yaml
if [ -f "$patch" ]; then
  cmd=$(sed -n 's/^ *command: *\[\(.*\)\] *$/\1/p' "$patch" | head -1 | tr -d '"' | tr ',' ' ')
  read -r tool src _ <<<"$cmd"
  [ -n "$tool" ] || fail "no init container command in $patch"
  mkdir -p "$rootfs/rdmadoctor-out"
  chroot "$rootfs" env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$tool" "$src" /rdmadoctor-out/rdmadoctor ||
    fail "$patch's init command '$tool $src' does not run in the image"
  cmp -s "$rootfs$bin" "$rootfs/rdmadoctor-out/rdmadoctor" || fail "the init command's copy differs from $bin"
  say "the NPD init container's '$tool $src' runs in the image"
fi
say "ok: $(du -h "$tarball" | cut -f1) tarball from $(ls .cache/image-debs/*.deb | wc -l) cached .debs"
