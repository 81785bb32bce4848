#!/usr/bin/env bash
# Tests the packages `make package` built in dist/: the .deb's and the .rpm's
# file lists, lintian (where installed), and as root a real install: dpkg -i,
# the binary runs, the units verify clean with the real binary and are not
# enabled, dpkg -r leaves none of the package's files behind (only what the
# service wrote: its state and textfile) and dpkg --purge leaves nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
fail() { echo "packaging: FAIL: $*" >&2; exit 1; }
say() { echo "packaging: $*"; }
shopt -s nullglob
debs=(dist/rdmadoctor_*.deb) rpms=(dist/rdmadoctor-*.rpm)
[ ${#debs[@]} = 1 ] && [ ${#rpms[@]} = 1 ] || fail "want one .deb and one .rpm in dist/ (make package), found ${debs[*]} ${rpms[*]}"
deb=${debs[0]} rpm=${rpms[0]}

common="/usr/bin/rdmadoctor
/usr/share/doc/rdmadoctor/README.md
$(for f in docs/*.md; do echo "/usr/share/doc/rdmadoctor/$f"; done)
/usr/share/rdmadoctor/prometheus/rdmadoctor.rules.yml
/usr/share/man/man1/rdmadoctor.1.gz
/usr/share/man/man5/rdmadoctor-expect.5.gz
/usr/share/bash-completion/completions/rdmadoctor
/usr/share/zsh/vendor-completions/_rdmadoctor
/usr/share/fish/vendor_completions.d/rdmadoctor.fish
/var/lib/node_exporter/textfile_collector
/var/lib/rdmadoctor"
want_deb=$(printf '%s\n' "$common" /lib/systemd/system/rdmadoctor.service /lib/systemd/system/rdmadoctor.timer \
  /usr/share/doc/rdmadoctor/copyright /usr/share/doc/rdmadoctor/changelog.gz /usr/share/lintian/overrides/rdmadoctor | sort)
want_rpm=$(printf '%s\n' "$common" /usr/lib/systemd/system/rdmadoctor.service /usr/lib/systemd/system/rdmadoctor.timer \
  /usr/share/licenses/rdmadoctor/LICENSE | sort)

# The .deb's leaves: files, and directories that hold nothing else.
deb_leaves() {
  dpkg-deb -c "$deb" | awk '{print substr($6, 2)}' | sed 's|/$||' | sort | awk 'NR > 1 && index($0, prev "/") != 1 {print prev} {prev = $0} END {print prev}'
}
got=$(deb_leaves)
[ "$got" = "$want_deb" ] || fail "$deb holds:
$got
want:
$want_deb"
say "$deb: $(echo "$got" | wc -l) paths as expected"
dpkg-deb -f "$deb" Package Version Depends | grep -q '^Depends: libc6' || fail "$deb does not depend on libc6"

if command -v rpm >/dev/null 2>&1; then
  got=$(rpm -qpl "$rpm" 2>/dev/null | sort)
  [ "$got" = "$want_rpm" ] || fail "$rpm holds:
$got
want:
$want_rpm"
  rpm -qpR "$rpm" 2>/dev/null | grep -qx glibc || fail "$rpm does not require glibc"
  say "$rpm: $(echo "$got" | wc -l) paths as expected"
else
  say "$rpm: not listed (rpm is not installed: apt-get install rpm)"
fi

if command -v lintian >/dev/null 2>&1; then
  rc=0; out=$(lintian --fail-on error,warning "$deb" 2>&1) || rc=$?
  out=$(grep -v 'running with root privileges' <<<"$out" || true)
  [ $rc = 0 ] && [ -z "$out" ] || fail "lintian (exit $rc): $out"
  say "lintian: clean"
else
  say "lintian: not run (not installed: apt-get install lintian)"
fi

if [ "$(id -u)" != 0 ]; then
  say "install test skipped: dpkg -i needs root"
  exit 0
fi
if dpkg-query -W -f '${db:Status-Status}' rdmadoctor 2>/dev/null | grep -qv not-installed; then
  say "install test skipped: a rdmadoctor package is already installed here and is left alone"
  exit 0
fi
before=$(for p in $want_deb; do [ -e "$p" ] && echo "$p"; done; true)
dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb"
trap 'dpkg --purge rdmadoctor >/dev/null 2>&1 || true' EXIT
# The first line is the version; the lines after it name the commit, the Go
# version and the libibverbs the loader would pick.
ver=$(/usr/bin/rdmadoctor --version | head -n 1) || fail "/usr/bin/rdmadoctor --version"
want_ver=$(dpkg-deb -f "$deb" Version | sed 's/~/-/')
[ "$ver" = "rdmadoctor $want_ver" ] || fail "--version says '$ver', want 'rdmadoctor $want_ver'"
say "installed: $ver"
# The man pages render without a warning; the bash completion loads.
if command -v groff >/dev/null 2>&1; then
  for m in /usr/share/man/man1/rdmadoctor.1.gz /usr/share/man/man5/rdmadoctor-expect.5.gz; do
    warn=$(zcat "$m" | groff -man -Tutf8 -ww -z 2>&1) || fail "groff on $m failed: $warn"
    [ -z "$warn" ] || fail "groff warns on $m: $warn"
  done
  say "man pages render clean"
fi
bash -c 'source /usr/share/bash-completion/completions/rdmadoctor && complete -p rdmadoctor' >/dev/null \
  || fail "the installed bash completion does not register rdmadoctor"
say "bash completion registers"
if command -v systemd-analyze >/dev/null 2>&1; then
  err=$(systemd-analyze verify /lib/systemd/system/rdmadoctor.service /lib/systemd/system/rdmadoctor.timer 2>&1 >/dev/null) || true
  [ -z "$err" ] || fail "systemd-analyze verify on the installed units: $err"
  say "installed units verify clean"
fi
[ ! -e /etc/systemd/system/timers.target.wants/rdmadoctor.timer ] || fail "the package enabled rdmadoctor.timer"
new_paths() { for p in "$@"; do [ -e "$p" ] && ! grep -qx "$p" <<<"$before" && echo "$p"; done; true; }
# What a run of the service writes: kept by dpkg -r, removed by purge.
written="/var/lib/rdmadoctor/state.json /var/lib/rdmadoctor/state.json.lock /var/lib/node_exporter/textfile_collector/rdmadoctor.prom"
for f in $written; do [ -e "$f" ] || { echo '{}' >"$f"; before=$(printf '%s\n' "$before" | grep -vx "$f" || true); }; done
dpkg -r rdmadoctor >/dev/null || fail "dpkg -r rdmadoctor"
left=$(new_paths $want_deb $written | sort)
want_left=$(printf '%s\n' $written /var/lib/rdmadoctor /var/lib/node_exporter/textfile_collector | sort)
[ "$left" = "$(new_paths $want_left | sort)" ] && [ -n "$left" ] || fail "dpkg -r left behind:
$left
want only the service's files and their directories"
dpkg --purge rdmadoctor >/dev/null || fail "dpkg --purge rdmadoctor"
left=$(new_paths $want_deb $written)
[ -z "$left" ] || fail "dpkg --purge left behind: $left"
dpkg-query -W rdmadoctor >/dev/null 2>&1 && fail "rdmadoctor still known to dpkg after purge"
trap - EXIT
say "removed: dpkg -r kept only the service's state and textfile, dpkg --purge left nothing"
