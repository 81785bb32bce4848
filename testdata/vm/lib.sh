# Host side of the SoftRoCE VM harness, sourced by suite.sh and run-in-guest.sh.
#
# It installs qemu when missing, downloads the guest's Debian packages once into
# .cache/debs (never installs them on the host), unpacks the kernel and the few
# modules SoftRoCE needs, lays out a Debian-like root (merged /usr, ld.so.cache,
# /etc/libibverbs.d, os-release), packs it with the static rdmadoctor binary into
# an initramfs and boots it under qemu. Results come back over the serial
# console as base64 records that `rdvm collect` unpacks.
#
# Everything fails loudly: a missing tool, a failed download or a guest that
# never reports is an error, never a skip.

set -euo pipefail
shopt -s inherit_errexit

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$VM_DIR/../.." && pwd)
CACHE=${RDVM_CACHE:-$VM_DIR/.cache}
LIBDIR=usr/lib/x86_64-linux-gnu

# Guest userspace. The kernel package is resolved at run time from
# linux-image-amd64, so a bookworm-security update is picked up, not pinned.
GUEST_PKGS=(
	busybox-static
	libibverbs1 ibverbs-providers ibverbs-utils librdmacm1 rdmacm-utils
	iproute2 libnl-3-200 libnl-route-3-200
	libmnl0 libelf1 libbpf1 libcap2 zlib1g libbsd0 libmd0
	perftest libibumad3 libpci3
)

# Kernel modules the guest loads, in load order. macvlan and ipvlan carry the
# pod scenarios' net1 (a Multus interface on the RoCE netdev). configfs and crc32_generic
# are not in anyone's depends= line but rdma_cm and rdma_rxe need them (without
# crc32_generic rdma_rxe fails "failed to init crc32 algorithm err:-2").
GUEST_MODULES=(configfs crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs
	iw_cm ib_cm rdma_cm rdma_ucm rdma_rxe dummy macvlan ipvlan)

# What the two-guest pair (pair.sh) loads on top of GUEST_MODULES but dummy:
# the virtio NIC that carries RoCE between the guests (none of the virtio
# modules is built into Debian's kernel) and netem for the lossy-link
# scenario. Their dependencies come from each .ko's depends= as above.
PAIR_MODULES=(virtio_pci virtio_net sch_netem)

# Binaries the guest gets from the packages; the rest of the packages' programs
# are dropped to keep the image small.
GUEST_BINS=(
	usr/bin/ip usr/bin/rdma
	usr/bin/ibv_devices usr/bin/ibv_devinfo usr/bin/ibv_rc_pingpong
	usr/bin/ibv_ud_pingpong usr/bin/ibv_srq_pingpong usr/bin/ibv_asyncwatch
	usr/bin/rping usr/bin/ucmatose usr/bin/rdma_server usr/bin/rdma_client
	usr/sbin/tc usr/bin/ib_send_bw usr/bin/ib_write_bw usr/bin/ib_send_lat usr/bin/ib_write_lat
)

log() { printf 'vm: %s\n' "$*" >&2; }
die() {
	printf 'vm: FATAL: %s\n' "$*" >&2
	exit 1
}

# now_ms prints a monotonic-enough wall clock in milliseconds.
now_ms() { date +%s%3N; }

apt_get() {
	DEBIAN_FRONTEND=noninteractive apt-get -q -o DPkg::Lock::Timeout=600 \
		-o APT::Sandbox::User=root "$@"
}

APT_UPDATED=0
apt_update_once() {
	[ "$APT_UPDATED" = 1 ] && return 0
	log "apt-get update"
	apt_get update -qq >&2 || die "apt-get update failed"
	APT_UPDATED=1
}

# ensure_host_tools installs qemu when it is missing (root only) and checks the
# rest of what the host side runs.
ensure_host_tools() {
	if ! command -v qemu-system-x86_64 >/dev/null; then
		[ "$(id -u)" = 0 ] || die "qemu-system-x86_64 is missing and this is not root: install qemu-system-x86 (apt-get install --no-install-recommends qemu-system-x86)"
		apt_update_once
		log "installing qemu-system-x86"
		apt_get install -y --no-install-recommends qemu-system-x86 >&2 ||
			die "apt-get install qemu-system-x86 failed"
		APT_UPDATED=1
	fi
	local t
	for t in qemu-system-x86_64 apt-get apt-cache dpkg-deb tar ldd ldconfig go timeout gzip; do
		command -v "$t" >/dev/null || die "host tool $t not found"
	done
}

# kernel_pkg prints the versioned kernel package linux-image-amd64 depends on.
kernel_pkg() {
	local k
	k=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1=="Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
	if [ -z "$k" ]; then
		apt_update_once
		k=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '$1=="Depends:" && $2 ~ /^linux-image-[0-9]/ {print $2; exit}')
	fi
	[ -n "$k" ] || die "cannot resolve the kernel package of linux-image-amd64 (apt-cache depends linux-image-amd64)"
	echo "$k"
}

# print_uris PKG... prints apt's "URI FILE SIZE HASH" lines. It runs in an
# empty folder: apt leaves out the packages whose file is already in the
# current one.
print_uris() {
	local tmp out rc=0
	tmp=$(mktemp -d)
	out=$(cd "$tmp" && apt-get download --print-uris "$@" 2>/dev/null) || rc=$?
	rmdir "$tmp"
	printf '%s\n' "$out"
	return "$rc"
}

# fetch_debs makes .cache/debs hold the current candidate .deb of every guest
# package and writes their paths to .cache/debs.list, one a line. Files already
# there are reused; files of older versions are removed.
fetch_debs() {
	local debs=$CACHE/debs kpkg uris want=() missing=() f
	mkdir -p "$debs"
	kpkg=$(kernel_pkg)
	local pkgs=("$kpkg" "${GUEST_PKGS[@]}")
	# --print-uris names each candidate's file without downloading it.
	if ! uris=$(print_uris "${pkgs[@]}"); then
		apt_update_once
		uris=$(print_uris "${pkgs[@]}") || die "apt-get download --print-uris ${pkgs[*]} failed"
	fi
	while read -r _ name _; do
		[ -n "$name" ] || continue
		want+=("$name")
		[ -s "$debs/$name" ] || missing+=("$name")
	done < <(printf '%s\n' "$uris" | tr -d "'")
	[ "${#want[@]}" -eq "${#pkgs[@]}" ] || die "apt-get download --print-uris named ${#want[@]} files for ${#pkgs[@]} packages"
	if [ "${#missing[@]}" -gt 0 ]; then
		log "downloading ${#missing[@]} guest package(s) into ${debs#"$REPO_ROOT"/}"
		if ! (cd "$debs" && apt_get download "${pkgs[@]}" >&2); then
			# The kernel moves with bookworm-security: stale lists point at
			# files the mirror no longer has.
			APT_UPDATED=0
			apt_update_once
			kpkg=$(kernel_pkg)
			pkgs=("$kpkg" "${GUEST_PKGS[@]}")
			(cd "$debs" && apt_get download "${pkgs[@]}" >&2) || die "apt-get download ${pkgs[*]} failed"
			fetch_debs
			return
		fi
	fi
	for f in "$debs"/*.deb; do
		[ -e "$f" ] || continue
		case " ${want[*]} " in *" ${f##*/} "*) ;; *) rm -f "$f" ;; esac
	done
	: >"$CACHE/debs.list"
	for f in "${want[@]}"; do
		[ -s "$debs/$f" ] || die "guest package $f was not downloaded"
		echo "$debs/$f" >>"$CACHE/debs.list"
	done
}

# deb_fsys_extract DEB DIR [PATTERN...] unpacks a package's files into DIR,
# keeping DIR's merged-/usr symlinks (bin -> usr/bin ...) intact.
deb_fsys_extract() {
	local deb=$1 dir=$2
	shift 2
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dir" --keep-directory-symlink --no-same-owner --wildcards "$@"
}

# unpack_kernel DEB prints a cached directory holding boot/vmlinuz-* and the
# module folders SoftRoCE needs; it unpacks once per kernel package file.
KERNEL_PATTERNS=('./boot/vmlinuz-*'
	'*/modules.builtin' '*/modules.order'
	'*/kernel/drivers/infiniband/core/*' '*/kernel/drivers/infiniband/sw/*'
	'*/kernel/net/ipv4/*' '*/kernel/net/ipv6/*' '*/kernel/crypto/*'
	'*/kernel/fs/configfs/*' '*/kernel/drivers/net/dummy.ko*' '*/kernel/lib/*'
	'*/kernel/drivers/net/macvlan.ko*' '*/kernel/drivers/net/ipvlan/*'
	'*/kernel/drivers/net/virtio_net.ko*' '*/kernel/drivers/net/net_failover.ko*'
	'*/kernel/drivers/virtio/*' '*/kernel/net/core/*' '*/kernel/net/sched/*')

unpack_kernel() {
	local deb=$1 dir
	dir=$CACHE/kernel/$(basename "$deb" .deb)
	# .done records what was extracted: a changed pattern list unpacks again.
	if [ "$(cat "$dir/.done" 2>/dev/null)" != "${KERNEL_PATTERNS[*]}" ]; then
		log "unpacking $(basename "$deb") (vmlinuz and the RDMA, tunnel, crypto, configfs, dummy, macvlan, ipvlan, virtio, qdisc modules)"
		rm -rf "$CACHE/kernel"
		mkdir -p "$dir"
		deb_fsys_extract "$deb" "$dir" "${KERNEL_PATTERNS[@]}" || die "unpacking $deb failed"
		printf '%s' "${KERNEL_PATTERNS[*]}" >"$dir/.done"
	fi
	echo "$dir"
}

# kernel_image KDIR prints the image to boot: the ELF vmlinux inside the
# bzImage when it can be extracted (qemu boots it through its PVH entry note,
# and TCG then skips the ~6 s the bzImage's own xz decompressor takes), else
# the vmlinuz itself. The extraction is cached beside the kernel.
kernel_image() {
	local kdir=$1 vmlinuz off
	vmlinuz=$(find "$kdir/boot" -name 'vmlinuz-*' | head -n1)
	[ -n "$vmlinuz" ] || die "no vmlinuz in $kdir"
	if ! is_elf "$kdir/vmlinux"; then
		off=$(LC_ALL=C grep -obUaP '\xFD7zXZ\x00' "$vmlinuz" | head -n1 | cut -d: -f1)
		# xz stops at the end of its stream and complains about the
		# bzImage's trailing data; the output is complete all the same.
		if [ -n "$off" ]; then
			tail -c +$((off + 1)) "$vmlinuz" | xz -dc >"$kdir/vmlinux.tmp" 2>/dev/null || true
		fi
		if is_elf "$kdir/vmlinux.tmp"; then mv "$kdir/vmlinux.tmp" "$kdir/vmlinux"; fi
		rm -f "$kdir/vmlinux.tmp"
	fi
	if is_elf "$kdir/vmlinux"; then echo "$kdir/vmlinux"; else echo "$vmlinuz"; fi
}

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 7f454c46 ]; }

# module_file KDIR NAME prints the .ko(.xz|.zst) of module NAME.
module_file() {
	local f
	f=$(find "$1/lib/modules" -name "$2.ko" -o -name "$2.ko.xz" -o -name "$2.ko.zst" -o -name "$2.ko.gz" | head -n1)
	[ -n "$f" ] || return 1
	echo "$f"
}

# module_depends FILE prints the depends= list of a .ko, one a line.
module_depends() {
	local f=$1
	case $f in
	*.xz) xz -dc "$f" ;;
	*.zst) zstd -dc "$f" ;;
	*.gz) gzip -dc "$f" ;;
	*) cat "$f" ;;
	esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1 | tr ',' '\n' | sed '/^$/d'
}

# install_modules KDIR ROOT copies GUEST_MODULES and everything they depend on
# (uncompressed: busybox insmod wants plain ELF) into ROOT/lib/modules/<ver>/
# and writes ROOT/etc/rdvm-modules, the load order.
install_modules() {
	local kdir=$1 root=$2 kver order=() seen=" " m
	kver=$(basename "$(find "$kdir/lib/modules" -mindepth 1 -maxdepth 1 -type d | head -n1)")
	[ -n "$kver" ] || die "no lib/modules/<version> in $kdir"
	visit() {
		local name=$1 f d
		case $seen in *" $name "*) return ;; esac
		seen="$seen$name "
		if ! f=$(module_file "$kdir" "$name"); then
			grep -q "/$name.ko" "$kdir/lib/modules/$kver/modules.builtin" 2>/dev/null && return
			die "kernel module $name not found in $(basename "$kdir") (neither a .ko nor built in)"
		fi
		for d in $(module_depends "$f"); do visit "$d"; done
		order+=("$name")
		local rel=${f#"$kdir"/} dst
		dst=$root/${rel%.xz}
		dst=${dst%.zst}
		dst=${dst%.gz}
		mkdir -p "$(dirname "$dst")"
		case $f in
		*.xz) xz -dc "$f" >"$dst" ;;
		*.zst) zstd -dc "$f" >"$dst" ;;
		*.gz) gzip -dc "$f" >"$dst" ;;
		*) cp "$f" "$dst" ;;
		esac
	}
	for m in "${GUEST_MODULES[@]}"; do visit "$m"; done
	local single=("${order[@]}")
	for m in "${PAIR_MODULES[@]}"; do visit "$m"; done
	cp "$kdir/lib/modules/$kver/modules.builtin" "$kdir/lib/modules/$kver/modules.order" \
		"$root/lib/modules/$kver/" 2>/dev/null || true
	# A modules.dep in depmod's format, for readers that look for one.
	: >"$root/lib/modules/$kver/modules.dep"
	for m in "${order[@]}"; do
		local f deps=()
		f=$(cd "$root/lib/modules/$kver" && find kernel -name "$m.ko")
		local d df
		for d in $(module_depends "$root/lib/modules/$kver/$f"); do
			df=$(cd "$root/lib/modules/$kver" && find kernel -name "$d.ko")
			[ -n "$df" ] && deps+=("$df")
		done
		echo "$f: ${deps[*]:-}" | sed 's/ $//' >>"$root/lib/modules/$kver/modules.dep"
	done
	printf '%s\n' "${single[@]}" >"$root/etc/rdvm-modules"
	# The pair's guests carry RoCE on virtio's eth0, not on dummy0.
	printf '%s\n' "${order[@]}" | grep -vx dummy >"$root/etc/rdvm-modules.pair"
	echo "$kver" >"$root/etc/rdvm-kernel"
}

# copy_host_file PATH ROOT copies a host file to the same path under ROOT,
# recreating the symlinks on the way (/lib64/ld-linux-x86-64.so.2 is a link).
copy_host_file() {
	local src=$1 root=$2 real t
	real=$(readlink -f "$src")
	if [ ! -e "$root/$real" ]; then
		mkdir -p "$(dirname "$root/$real")"
		cp "$real" "$root/$real"
	fi
	while [ -L "$src" ]; do
		t=$(readlink "$src")
		if [ ! -e "$root/$src" ] && [ ! -L "$root/$src" ]; then
			mkdir -p "$(dirname "$root/$src")"
			ln -s "$t" "$root/$src"
		fi
		case $t in /*) src=$t ;; *) src=$(dirname "$src")/$t ;; esac
	done
}

# close_libraries ROOT [PATH...] copies into ROOT every shared library that ROOT's
# programs and libraries need and ROOT does not have yet (glibc, libgcc_s...),
# taking them from the host, which runs the same Debian release.
close_libraries() {
	local root=$1 f line lib pass
	shift
	local extra=("$@")
	local ldpath=$root/$LIBDIR:$root/$LIBDIR/libibverbs
	for pass in 1 2 3; do
		local added=0
		while IFS= read -r f; do
			# ldd runs the loader in trace mode; it does not run the program.
			while IFS= read -r line; do
				line=${line#"${line%%[![:space:]]*}"}
				case $line in
				*"not found"*) die "$(basename "$f") needs ${line%% *}, which neither the guest packages nor the host have" ;;
				*"=> /"*) lib=${line#*=> }; lib=${lib%% (*} ;;
				/*) lib=${line%% (*} ;;
				*) continue ;;
				esac
				case $lib in "$root"/*) continue ;; esac
				if [ ! -e "$root/$lib" ] || [ ! -e "$root/$(readlink -f "$lib")" ]; then
					copy_host_file "$lib" "$root"
					added=1
				fi
			done < <(LD_LIBRARY_PATH=$ldpath ldd "$f" 2>/dev/null || true)
		done < <(find "$root/usr/bin" "$root/usr/sbin" "$root/usr/local/bin" "$root/$LIBDIR" "${extra[@]}" -type f \( -perm -u+x -o -name '*.so*' \) 2>/dev/null)
		[ "$added" = 0 ] && return 0
	done
}

# write_etc ROOT writes the small /etc files a Debian 12 host has.
write_etc() {
	local root=$1
	mkdir -p "$root/etc/ld.so.conf.d"
	cat >"$root/etc/os-release" <<'EOF'
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
EOF
	mkdir -p "$root/usr/lib"
	cp "$root/etc/os-release" "$root/usr/lib/os-release"
	echo 'include /etc/ld.so.conf.d/*.conf' >"$root/etc/ld.so.conf"
	printf '# Multiarch support\n/usr/local/lib/x86_64-linux-gnu\n/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n' \
		>"$root/etc/ld.so.conf.d/x86_64-linux-gnu.conf"
	echo '/usr/local/lib' >"$root/etc/ld.so.conf.d/libc.conf"
	cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
rdtest:x:1000:1000:unprivileged test user:/home/rdtest:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
EOF
	printf 'root:x:0:\nrdtest:x:1000:\nnogroup:x:65534:\n' >"$root/etc/group"
	# A provisioned RDMA host lets logins lock memory for registration; the
	# unprivileged scenario lowers its own limit below this.
	mkdir -p "$root/etc/security/limits.d"
	printf '# memory registration pins pages\n*\tsoft\tmemlock\tunlimited\n*\thard\tmemlock\tunlimited\n' \
		>"$root/etc/security/limits.d/rdma.conf"
	echo rdvm >"$root/etc/hostname"
	printf '127.0.0.1\tlocalhost\n192.0.2.1\trdvm\n' >"$root/etc/hosts"
	mkdir -p "$root/root" "$root/home/rdtest" "$root/tmp" "$root/proc" "$root/sys" "$root/dev" "$root/run" "$root/var/tmp"
}

# build_binaries OUTDIR builds the static rdmadoctor and rdvm binaries.
# With allow_missing=1 a failing rdmadoctor build is a warning (run-in-guest
# serves other packages' tests too); for the suite it is fatal.
build_binaries() {
	local out=$1 allow_missing=${2:-0}
	mkdir -p "$out"
	(cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -o "$out/rdvm" ./testdata/vm/rdvm) ||
		die "go build ./testdata/vm/rdvm failed"
	rm -f "$out/rdmadoctor"
	if ! (cd "$REPO_ROOT" && CGO_ENABLED=0 go build -trimpath -o "$out/rdmadoctor" ./cmd/rdmadoctor); then
		[ "$allow_missing" = 1 ] || die "CGO_ENABLED=0 go build ./cmd/rdmadoctor failed"
		log "WARNING: go build ./cmd/rdmadoctor failed; the guest has no rdmadoctor"
		rm -f "$out/rdmadoctor"
	fi
}

# build_root DEBS... lays the guest root out in $CACHE/root and sets KDIR, the
# unpacked kernel. Needs BIN_DIR (rdmadoctor, rdvm) set.
build_root() {
	local root=$CACHE/root deb kdeb="" b
	rm -rf "$root"
	mkdir -p "$root/usr/bin" "$root/usr/sbin" "$root/usr/lib64" "$root/$LIBDIR" "$root/usr/local/bin" "$root/etc"
	ln -s usr/bin "$root/bin"
	ln -s usr/sbin "$root/sbin"
	ln -s usr/lib "$root/lib"
	ln -s usr/lib64 "$root/lib64"
	for deb in "$@"; do
		case ${deb##*/} in
		linux-image-*) kdeb=$deb ;;
		*) deb_fsys_extract "$deb" "$root" || die "unpacking $deb failed" ;;
		esac
	done
	[ -n "$kdeb" ] || die "no kernel package among the guest packages"
	# Keep only the programs the guest uses; docs and the rest go.
	rm -rf "$root/usr/share" "$root/usr/include" "$root/etc/init.d" "$root/etc/cron.daily"
	local keep=" ${GUEST_BINS[*]} usr/bin/busybox "
	while IFS= read -r b; do
		case $keep in *" ${b#"$root"/} "*) ;; *) rm -f "$b" ;; esac
	done < <(find "$root/usr/bin" "$root/usr/sbin" \( -type f -o -type l \))
	for b in "${GUEST_BINS[@]}"; do
		[ -x "$root/$b" ] || die "guest program /$b is missing from the packages"
	done
	# busybox applets, where no real program of that name exists (busybox ash
	# prefers its own applets anyway: the harness calls /usr/bin/ip by path).
	"$root/usr/bin/busybox" --list-full | while IFS= read -r b; do
		case $b in usr/bin/* | usr/sbin/* | bin/* | sbin/*) ;; *) continue ;; esac
		b=usr/${b#usr/}
		[ -e "$root/$b" ] || [ -L "$root/$b" ] || ln -s /usr/bin/busybox "$root/$b"
	done
	# ldconfig is glibc's static program: the guest can rebuild its cache.
	cp -L "$(command -v ldconfig)" "$root/usr/sbin/ldconfig"
	cp "$BIN_DIR/rdvm" "$root/usr/local/bin/rdvm"
	[ -e "$BIN_DIR/rdmadoctor" ] && cp "$BIN_DIR/rdmadoctor" "$root/usr/local/bin/rdmadoctor"
	KDIR=$(unpack_kernel "$kdeb")
	write_etc "$root"
	install_modules "$KDIR" "$root"
	close_libraries "$root"
	# The dynamic loader lives at its ABI path /lib64/ld-linux-x86-64.so.2.
	if [ ! -e "$root/usr/lib64/ld-linux-x86-64.so.2" ]; then
		ln -s ../lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/usr/lib64/ld-linux-x86-64.so.2"
	fi
	[ -e "$root/$LIBDIR/ld-linux-x86-64.so.2" ] || die "no dynamic loader in the guest root"
	ldconfig -r "$root" || die "ldconfig -r $root failed"
	# The guest side of the harness.
	mkdir -p "$root/rdvm"
	cp "$VM_DIR/guest/init" "$root/init"
	chmod 755 "$root/init"
	cp "$VM_DIR/guest/lib.sh" "$VM_DIR/scenarios.sh" "$VM_DIR/guest/pair.sh" "$VM_DIR/pair-scenarios.sh" "$root/rdvm/"
	cp "$VM_DIR/guest/pair-init" "$root/rdvm/pair-init"
	chmod 755 "$root/rdvm/pair-init"
}

# pack_initramfs JOBFILE OUT packs $CACHE/root plus the job script into an
# uncompressed newc cpio (qemu copies it; decompressing under TCG costs more
# than it saves).
pack_initramfs() {
	local job=$1 out=$2 root=$CACHE/root
	cp "$job" "$root/rdvm/job.sh"
	(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | "$root/usr/bin/busybox" cpio -o -H newc >"$out" 2>/dev/null) ||
		die "packing the initramfs failed"
}

# boot KDIR INITRD CONSOLE_LOG TIMEOUT_S [KERNEL-ARGS] boots the guest; it
# always ends: the guest powers off when its job is done, and timeout kills
# qemu otherwise. Returns qemu's status (124/137 on timeout).
# TCG by default, as CI machines have no usable KVM; RDVM_ACCEL=kvm for speed.
boot() {
	local kdir=$1 initrd=$2 console=$3 limit=$4 extra=${5:-} vmlinuz accel=${RDVM_ACCEL:-tcg} cpu=qemu64 rc=0
	vmlinuz=$(kernel_image "$kdir")
	[ "$accel" = kvm ] && cpu=host
	: >"$console"
	timeout --kill-after=5 "$limit" qemu-system-x86_64 \
		-accel "$accel" -cpu "$cpu" -m 1024 -smp 2 \
		-display none -monitor none -serial "file:$console" \
		-no-reboot -nic none \
		-kernel "$vmlinuz" -initrd "$initrd" \
		-append "console=ttyS0 panic=-1 quiet loglevel=1 rdinit=/init $extra" \
		</dev/null >"$console.qemu" 2>&1 || rc=$?
	return "$rc"
}

# console_tail LOG prints the last lines of the console after a failure.
console_tail() {
	local n=${2:-60}
	echo "---- last $n lines of the guest console ($1) ----" >&2
	# The base64 records are noise here; the harness's own lines are not.
	tr -d '\r' <"$1" | grep -Ev '^[A-Za-z0-9+/]+=*$' | tail -n "$n" >&2 || true
	if [ -s "$1.qemu" ]; then
		echo "---- qemu ----" >&2
		tail -n 20 "$1.qemu" >&2
	fi
	echo "---- end of console ----" >&2
}

# update_captured_fixture RECORD makes the fixture rxe-vm-captured (its
# archive, testdata/host-archives/rxe-vm-captured.tree, whose sources note is
# kept) the snapshot a snapshot-roundtrip record holds (healthy rxe0, not
# redacted), keeps that run's live report as
# testdata/golden/rxe-vm-captured.live.json (a Go test asserts the replay
# equals it), and rewrites the fixture's golden reports.
update_captured_fixture() {
	local rec=$1 name=rxe-vm-captured archive tmp top
	archive=$REPO_ROOT/testdata/host-archives/$name.tree
	[ -s "$rec/snap.tar.gz" ] || die "--update-captured: no snap.tar.gz in ${rec#"$REPO_ROOT"/}"
	[ "$(cat "$rec/live.exit" 2>/dev/null)" = 0 ] || die "--update-captured: the live run of ${rec##*/} did not exit 0"
	! grep -q '^redact 1' "$rec/meta" || die "--update-captured: ${rec##*/} is a redacted snapshot"
	tmp=$(mktemp -d)
	tar -xzf "$rec/snap.tar.gz" -C "$tmp" --no-same-owner || die "--update-captured: unpacking snap.tar.gz failed"
	top=$(find "$tmp" -mindepth 1 -maxdepth 1)
	[ -f "$top/rdmadoctor.manifest.json" ] || die "--update-captured: snap.tar.gz has no single top directory with a manifest"
	# No empty directory, as in every fixture (the generated ones have none
	# either), and the permissions a fixture has: the Go tests then prove
	# the replay unchanged.
	find "$top" -mindepth 1 -type d -empty -delete
	chmod -R u+rwX,go+rX "$top"
	(cd "$REPO_ROOT" && go run ./sysfs/sysfstest/hosttree pack "$top" "$archive") ||
		die "--update-captured: packing the snapshot into ${archive#"$REPO_ROOT"/} failed"
	rm -rf "$tmp"
	cp "$rec/live.json" "$REPO_ROOT/testdata/golden/$name.live.json"
	(cd "$REPO_ROOT" && go run ./sysfs/sysfstest/hosttree materialize testdata) ||
		die "--update-captured: unpacking ${archive#"$REPO_ROOT"/} into testdata/hosts failed"
	log "updated ${archive#"$REPO_ROOT"/} ($(grep -c '^== file ' "$archive") files) and testdata/golden/$name.live.json; rewriting its golden reports"
	(cd "$REPO_ROOT" && go test -count=1 ./cmd/rdmadoctor -run "TestGoldenReports/^$name\$" -update >&2 &&
		go test -count=1 ./cmd/rdmadoctor -run 'TestInventoryText' -update >&2 &&
		go test -count=1 ./cmd/rdmadoctor -run 'TestGoldenReports|TestCapturedFixture|TestInventoryText' >&2) ||
		die "--update-captured: the fixture's Go tests fail (see above)"
}

# prepare BIN_ALLOW_MISSING: everything up to a packed root, ready to boot.
# Sets KDIR.
prepare() {
	local allow_missing=${1:-0} t0 debs
	t0=$(now_ms)
	ensure_host_tools
	mkdir -p "$CACHE"
	fetch_debs
	mapfile -t debs <"$CACHE/debs.list"
	[ "${#debs[@]}" -gt 0 ] || die "no guest packages"
	BIN_DIR=$CACHE/bin
	build_binaries "$BIN_DIR" "$allow_missing"
	build_root "${debs[@]}"
	log "guest root ready ($(du -sh "$CACHE/root" | cut -f1), kernel $(cat "$CACHE/root/etc/rdvm-kernel")) in $(($(now_ms) - t0)) ms"
}
