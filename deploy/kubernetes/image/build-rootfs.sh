#!/usr/bin/env bash
# Assembles the rdmadoctor image's root filesystem from Debian packages, with
# no registry and no base image: the CGO_ENABLED=0 binary (it needs only
# libc's loader, and opens libibverbs at run time) beside Debian's
# libibverbs1 and ibverbs-providers and their run-time dependencies, resolved
# through apt-cache, unpacked with dpkg-deb -x, the loader cache built with
# ldconfig -r. The result is a tarball for `docker import`/`podman import`,
# or for deploy/kubernetes/Dockerfile (FROM scratch, ADD).
#
#   build-rootfs.sh BINARY OUTDIR [DEBCACHE]
#
# writes OUTDIR/rootfs/ and OUTDIR/rdmadoctor-rootfs.tar; .debs are kept in
# DEBCACHE (default .cache/image-debs) and downloaded only when the
# candidate version is not there yet. Run as root (the unpacked files keep
# their owners) on Debian or Ubuntu of the release the image should carry.
#
# PACKAGES: what the image holds besides the binary. coreutils is there for
# the NPD component's init container, which copies the binary out with cp.
# SKIP: dependencies only maintainer scripts use (libibverbs1's postinst
# creates a group with adduser); no script runs here, and adduser would pull
# in debconf, perl and passwd.
set -euo pipefail
PACKAGES=${PACKAGES:-"libibverbs1 ibverbs-providers coreutils"}
SKIP=${SKIP:-"adduser"}

if [ $# -lt 2 ]; then
  echo "usage: $0 BINARY OUTDIR [DEBCACHE]" >&2
  exit 2
fi
bin=$1 out=$2 cache=${3:-.cache/image-debs}
[ -x "$bin" ] || { echo "build-rootfs: $bin is not an executable file" >&2; exit 1; }
for tool in apt-cache apt-get dpkg-deb ldconfig tar; do
  command -v "$tool" >/dev/null || { echo "build-rootfs: $tool not found (Debian or Ubuntu needed)" >&2; exit 1; }
done
if ! apt-cache show --no-all-versions libibverbs1 >/dev/null 2>&1; then
  echo "build-rootfs: apt knows no libibverbs1; running apt-get update" >&2
  apt-get update -qq
fi

# deps PKG...: the Depends and Pre-Depends of each PKG, the first of each
# alternative group, virtual packages (<name>) left out. One apt-cache call
# per batch: each call loads apt's whole cache.
deps() {
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances "$@" |
    awk '/^ +\|?(Pre)?Depends: / { if (!alt && $2 !~ /^</) print $2; alt = ($1 ~ /^\|/); next } { alt = 0 }'
}

# The closure of PACKAGES under deps, minus SKIP, one level at a time.
declare -A seen=()
for s in $SKIP; do seen[$s]=skip; done
level=($PACKAGES)
while [ ${#level[@]} -gt 0 ]; do
  next=()
  for p in "${level[@]}"; do
    p=${p%%:*}   # libc6:amd64 -> libc6
    [ -n "${seen[$p]:-}" ] && continue
    seen[$p]=1
    next+=("$p")
  done
  [ ${#next[@]} -gt 0 ] || break
  mapfile -t level < <(deps "${next[@]}" | sort -u)
done
pkgs=()
for p in "${!seen[@]}"; do [ "${seen[$p]}" = 1 ] && pkgs+=("$p"); done
mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | sort)
echo "build-rootfs: ${#pkgs[@]} packages: ${pkgs[*]}" >&2

# Download what the cache lacks; apt-get download names a file
# NAME_VERSION_ARCH.deb with the epoch's colon written %3a.
mkdir -p "$cache"
mapfile -t cands < <(apt-cache show --no-all-versions "${pkgs[@]}" |
  awk '/^Package: /{p=$2} /^Version: /{v=$2} /^Architecture: /{a=$2} /^$/{if (p) print p, v, a; p=""} END{if (p) print p, v, a}')
[ ${#cands[@]} -eq ${#pkgs[@]} ] || { echo "build-rootfs: apt-cache show gave ${#cands[@]} candidates for ${#pkgs[@]} packages" >&2; exit 1; }
debs=() missing=()
for c in "${cands[@]}"; do
  read -r p ver arch <<<"$c"
  deb="$cache/${p}_${ver//:/%3a}_${arch}.deb"
  debs+=("$deb")
  [ -s "$deb" ] || missing+=("$p=$ver")
done
# One apt-get call for all that is missing: each call loads apt's cache.
if [ ${#missing[@]} -gt 0 ]; then
  (cd "$cache" && apt-get download -qq -o APT::Sandbox::User=root "${missing[@]}") ||
    { echo "build-rootfs: apt-get download ${missing[*]} failed" >&2; exit 1; }
fi
for deb in "${debs[@]}"; do
  [ -s "$deb" ] || { echo "build-rootfs: $deb missing after apt-get download" >&2; exit 1; }
done

rootfs="$out/rootfs"
rm -rf "$rootfs"
mkdir -p "$rootfs"
for deb in "${debs[@]}"; do
  dpkg-deb -x "$deb" "$rootfs" || { echo "build-rootfs: dpkg-deb -x $deb failed" >&2; exit 1; }
done
# No package's documentation is needed at run time; the licences stay.
rm -rf "$rootfs/usr/share/doc"/*/changelog* "$rootfs/usr/share/man" "$rootfs/usr/share/info" "$rootfs/usr/share/locale"
# libc-bin, which ships /etc/ld.so.conf, is not in the image: the one line
# that makes ldconfig read libc6's multiarch directories.
mkdir -p "$rootfs/etc"
echo 'include /etc/ld.so.conf.d/*.conf' >"$rootfs/etc/ld.so.conf"
ldconfig -r "$rootfs"
install -D -m 0755 "$bin" "$rootfs/usr/local/bin/rdmadoctor"
# Mount points the runtime fills, and the state directory of the DaemonSet.
mkdir -p "$rootfs"/{dev,proc,sys,run,var/lib/rdmadoctor}
install -d -m 1777 "$rootfs/tmp"

# The Dockerfile's build context is OUTDIR: the tarball, not the tree.
echo rootfs >"$out/.dockerignore"
tar --sort=name --mtime="@${SOURCE_DATE_EPOCH:-0}" --owner=0 --group=0 --numeric-owner \
  -C "$rootfs" -cf "$out/rdmadoctor-rootfs.tar" .
echo "build-rootfs: $out/rdmadoctor-rootfs.tar ($(du -sh "$rootfs" | cut -f1) unpacked)" >&2
