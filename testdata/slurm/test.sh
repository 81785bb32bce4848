#!/usr/bin/env bash
# Runs `rdmadoctor slurm healthcheck|prolog` and deploy/slurm/ under Debian's real Slurm:
# munged, slurmctld and three slurmd on this one machine, each node reading its own host
# fixture. Debian builds slurmd without --enable-multiple-slurmd, so each slurmd runs in its
# own network and UTS namespace (its own address on a bridge, its own hostname = its
# NodeName), as one slurmd per host runs in a real cluster; slurmctld, munged and the client
# commands share a fourth namespace that holds the bridge, so nothing of the host's network
# is touched and no port of the host is used.
#
# bash testdata/slurm/test.sh [BIN]   (as root; BIN defaults to bin/rdmadoctor)
#   HEALTH_CHECK_INTERVAL=N  slurm.conf's interval (5 s); KEEP=1 keeps the logs of a failed run;
#   PAUSE=N waits N s once the cluster is up, to look at it by hand.
#
# Each daemon also has a mount namespace of its own in which the test's configuration directory
# is bound over /etc/slurm: slurmd, and the scontrol that rdmadoctor runs from the health
# check with the environment slurmd gives it (no SLURM_CONF), find slurm.conf where a real
# node keeps it. Each slurmd's /var/lib is a directory of the node's own, empty at the start,
# as each host has its own disk: the shipped health check keeps its state at its own path,
# /var/lib/rdmadoctor/state.json, and creates the directory on its first run.
#
# Every process the test starts lives in one of its namespaces; on exit, whatever happens, the
# daemons are stopped by their pid files and anything left in the namespaces is killed by pid
# before the namespaces are deleted.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
t0=$(date +%s.%N)
say() { printf 'slurm-test: %s\n' "$*"; }
fail() {
  printf 'slurm-test: FAIL: %s\n' "$*" >&2
  [ -n "${W:-}" ] && [ -d "$W/log" ] && for f in "$W"/log/*; do
    printf -- '--- %s (last 15 lines)\n' "${f##*/}" >&2
    tail -n 15 "$f" >&2
  done
  exit 1
}
skip() {
  if [ -n "${CI:-}" ]; then fail "$* (CI is set: a missing piece fails the test)"; fi
  say "SKIP: $*"
  exit 0
}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

bin=$(realpath "${1:-bin/rdmadoctor}")
[ -x "$bin" ] || fail "no rdmadoctor binary at $bin (make build)"
# The host fixtures are made, not committed (make fixtures; cheap when they are current).
if command -v go >/dev/null 2>&1; then go run ./sysfs/sysfstest/hosttree materialize testdata || fail "make fixtures failed"; fi
[ -d testdata/hosts/port-down ] || fail "testdata/hosts is not made (make fixtures)"
[ "$(id -u)" = 0 ] || skip "needs root (network and UTS namespaces, slurmd as root)"
[ -d /etc/slurm ] || skip "/etc/slurm is missing (apt-get install slurm-client)"
for t in munged slurmctld slurmd scontrol sinfo srun sbatch squeue scancel ip unshare nsenter flock timeout python3; do
  command -v "$t" >/dev/null 2>&1 || skip "$t is not installed (apt-get install slurmctld slurmd slurm-client munge iproute2)"
done

W=$(mktemp -d)
chmod 0755 "$W"
tag=rds$$ # namespace names: unique per run
ctl=$tag-ctl
nodes=(node1 node2 node3)
net=10.231.77

cleanup() {
  local rc=$?
  set +e
  if [ -f "$W/etc/slurm.conf" ]; then
    timeout 10 nsenter --net=/run/netns/"$ctl" env SLURM_CONF="$W/etc/slurm.conf" scancel --quiet --user=root >/dev/null 2>&1
  fi
  # The daemons by their pid files, TERM then KILL, bounded.
  local pids=()
  local ours=" $ctl ${nodes[*]/#/$tag-} " p
  for f in "$W"/run/*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    # Only a process in one of our namespaces: a stale pid file names no one else.
    [[ "$p" =~ ^[0-9]+$ ]] && [[ "$ours" == *" $(ip netns identify "$p" 2>/dev/null) "* ]] && pids+=("$p")
  done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  # Then whatever is left in our namespaces (slurmstepd, job steps, health checks): every
  # process there is one this test started.
  for ns in "$ctl" "${nodes[@]/#/$tag-}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
  done
  for ns in "$ctl" "${nodes[@]/#/$tag-}"; do
    ip netns del "$ns" 2>/dev/null
  done
  if [ "$rc" = 0 ] || [ -z "${KEEP:-}" ]; then rm -rf "$W"; else say "kept $W"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# in_ctl runs a command in the controller's namespace, as a client of this cluster.
in_ctl() { nsenter --net=/run/netns/"$ctl" env SLURM_CONF="$W/etc/slurm.conf" "$@"; }
mkdir -p "$W"/{etc,run,log,munge,ctld,spool,nodes,sweep}

# --- network: a bridge in the controller's namespace, one veth per node ----------------------
ip netns add "$ctl"
ip -n "$ctl" link set lo up
ip -n "$ctl" link add rdbr type bridge
ip -n "$ctl" addr add "$net.1/24" dev rdbr
ip -n "$ctl" link set rdbr up
i=10
for n in "${nodes[@]}"; do
  i=$((i + 1))
  ip netns add "$tag-$n"
  ip -n "$tag-$n" link set lo up
  ip link add "v$n" netns "$ctl" type veth peer name eth0 netns "$tag-$n"
  ip -n "$ctl" link set "v$n" master rdbr up
  ip -n "$tag-$n" addr add "$net.$i/24" dev eth0
  ip -n "$tag-$n" link set eth0 up
done

# --- the nodes' hosts: node1 and node2 healthy, node3 with a port down -------------------------
# Each node reads $W/nodes/<node>/root, a link swapped atomically (rename) to change its host.
fixture() { # fixture NODE HOST: point NODE at testdata/hosts/HOST (or at HOST, a path)
  local host=$2
  [[ "$host" == /* ]] || host=$repo/testdata/hosts/$host
  ln -sfn "$host" "$W/nodes/$1/root.new"
  mv -T "$W/nodes/$1/root.new" "$W/nodes/$1/root"
}
for n in "${nodes[@]}"; do mkdir -p "$W/nodes/$n/varlib" "$W/spool/$n"; done
fixture node1 cx5-roce-healthy
fixture node2 cx6-ib-healthy
fixture node3 port-down

# --- the HealthCheckProgram and Prolog: the shipped wrappers, run through a shim ----------------
# The shim is the only piece the test adds between slurmd and deploy/slurm/: it records the
# environment slurmd gave (before anything is added to it), logs the run, and calls the
# shipped wrapper unchanged with this node's fixture (--root), an act lock of the node's own
# (the three slurmd share one file system, where three hosts would each have their /run) and,
# when the test asks, extra flags (flags.<mode>). The health check's state is the wrapper's
# own --state, in the node's own /var/lib ($W/nodes/<node>/varlib here).
mkdir -p "$W/shims"
for mode in healthcheck prolog; do
  cat >"$W/shims/slurm-$mode" <<SHIM
#!/bin/sh
d=$W/nodes/\$SLURMD_NODENAME
/usr/bin/env >"\$d/env.$mode"
echo "\$(/bin/date +%s.%N) start \$\$" >>"\$d/$mode.log"
RDMADOCTOR=$bin $repo/deploy/slurm/slurm-$mode --root "\$d/root" --lock-file "\$d/act.lock" \$(/bin/cat "\$d/flags.$mode" 2>/dev/null) >"\$d/out.$mode.\$\$" 2>&1
rc=\$?
echo "\$(/bin/date +%s.%N) end \$\$ \$rc" >>"\$d/$mode.log"
/bin/cat "\$d/out.$mode.\$\$"
exit \$rc
SHIM
  chmod 0755 "$W/shims/slurm-$mode"
done

# --- munge -----------------------------------------------------------------------------------
dd if=/dev/urandom of="$W/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$W/munge/munge.key"
chmod 0755 "$W/munge"

# --- slurm.conf: a minimal cluster, then the shipped snippet with only its paths and interval
# changed (asserted below) -------------------------------------------------------------------
hci=${HEALTH_CHECK_INTERVAL:-5}
cat >"$W/etc/slurm.conf" <<EOF2
ClusterName=rdtest
SlurmctldHost=ctl($net.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$W/munge/munge.socket
StateSaveLocation=$W/ctld
SlurmdSpoolDir=$W/spool/%n
SlurmctldPidFile=$W/run/slurmctld.pid
SlurmdPidFile=$W/run/slurmd-%n.pid
SlurmctldLogFile=$W/log/slurmctld.log
SlurmdLogFile=$W/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdTimeout=300
InactiveLimit=0
MinJobAge=300
NodeName=node1 NodeAddr=$net.11 CPUs=1 State=UNKNOWN
NodeName=node2 NodeAddr=$net.12 CPUs=1 State=UNKNOWN
NodeName=node3 NodeAddr=$net.13 CPUs=1 State=UNKNOWN
PartitionName=rdt Nodes=node[1-3] Default=YES MaxTime=INFINITE State=UP
EOF2
: >"$W/etc/plugstack.conf"
sed -e "s|/usr/libexec/rdmadoctor/|$W/shims/|" -e "s|^HealthCheckInterval=300$|HealthCheckInterval=$hci|" \
  deploy/slurm/slurm.conf.rdmadoctor >>"$W/etc/slurm.conf"

# show NODE: what `scontrol show node NODE` prints; state and reason: its State= and Reason=.
show() { in_ctl scontrol show node "$1"; }
state() { show "$1" | sed -n 's/^ *State=\([^ ]*\).*/\1/p'; }
reason() { show "$1" | sed -n 's/^ *Reason=//p'; }
# until SECONDS WHAT CMD...: retry CMD every 0.5 s for at most SECONDS. WHAT is expanded when
# the time is up (give it in single quotes), so it tells the state then.
until_ok() {
  local limit=$1 what=$2
  shift 2
  local end=$(($(date +%s) + limit))
  until "$@" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$end" ]; then
      eval "what=\"$what\""
      fail "after ${limit}s: $what"
    fi
    sleep 0.5
  done
}
idle() { [ "$(state "$1")" = IDLE ]; }

# --- daemons ---------------------------------------------------------------------------------
# daemon NETNS HOSTNAME HIDE VARLIB CMD...: start CMD (which daemonizes) in network namespace
# NETNS and new UTS and mount namespaces, with HOSTNAME and the test's /etc/slurm, directory HIDE
# (unless "") covered by an empty tmpfs: the sweep's output directory is the submit host's
# alone, as on a cluster without a shared file system; and directory VARLIB (unless "") bound
# over /var/lib.
daemon() {
  local ns=$1 host=$2 hide=$3 varlib=$4
  shift 4
  nsenter --net=/run/netns/"$ns" unshare --uts --mount --propagation private \
    sh -c 'mount --bind "$1" /etc/slurm && { [ -z "$3" ] || mount -t tmpfs rdslurm-hidden "$3"; } &&
      { [ -z "$4" ] || mount --bind "$4" /var/lib; } && hostname "$2" && shift 4 && exec "$@"' \
    sh "$W/etc" "$host" "$hide" "$varlib" "$@"
}
t_up=$(date +%s.%N)
nsenter --net=/run/netns/"$ctl" munged --key-file="$W/munge/munge.key" --socket="$W/munge/munge.socket" \
  --pid-file="$W/run/munged.pid" --log-file="$W/log/munged.log" --seed-file="$W/munge/seed" --force \
  || fail "munged did not start"
daemon "$ctl" ctl "" "" slurmctld -c \
  || fail "slurmctld did not start"
# Before any slurmd: its first health check asks slurmctld for the node's state.
until_ok 30 'slurmctld does not answer: $(in_ctl scontrol ping 2>&1)' in_ctl scontrol ping
for n in "${nodes[@]}"; do
  daemon "$tag-$n" "$n" "$W/sweep" "$W/nodes/$n/varlib" slurmd \
    || fail "slurmd $n did not start"
done

for n in node1 node2; do until_ok 60 '$n is not IDLE (State=$(state $n))' idle "$n"; done
say "daemons up, node1 and node2 idle: $(elapsed "$t_up")"
if [ -n "${PAUSE:-}" ]; then say "paused; W=$W ctl=$ctl"; sleep "$PAUSE" & wait $!; fi

# --- the slurm.conf lines are the shipped ones -------------------------------------------------
# Only the wrappers' directory and the interval differ from deploy/slurm/slurm.conf.rdmadoctor.
# The lines of each side of the difference, by key: each of the three once on each side.
changed=$(diff <(grep -v '^#' deploy/slurm/slurm.conf.rdmadoctor | grep .) <(sed -n '/^# rdmadoctor in Slurm/,$p' "$W/etc/slurm.conf" | grep -v '^#' | grep .) |
  sed -n 's/^\([<>]\) \([A-Za-z]*\)=.*/\1\2/p' | LC_ALL=C sort | tr '\n' ' ' || true)
[ "$changed" = "<HealthCheckInterval <HealthCheckProgram <Prolog >HealthCheckInterval >HealthCheckProgram >Prolog " ] \
  || fail "the slurm.conf lines differ from deploy/slurm/slurm.conf.rdmadoctor in '$changed', want HealthCheckProgram, HealthCheckInterval and Prolog only"
cfg=$(in_ctl scontrol show config)
for want in "HealthCheckInterval *= $hci sec" "HealthCheckNodeState *= CYCLE,ANY" "HealthCheckProgram *= $W/shims/slurm-healthcheck" \
  "Prolog *= $W/shims/slurm-prolog" "PrologFlags *= Alloc" "PropagateResourceLimitsExcept *= MEMLOCK"; do
  grep -Eq "^$want\$" <<<"$cfg" || fail "slurmctld's configuration lacks '$want'"
done

# runs NODE MODE: how many runs of MODE slurmd has finished on NODE.
runs() { grep -c ' end ' "$W/nodes/$1/$2.log" 2>/dev/null || true; }
# last_out NODE MODE: the output of the last finished run.
last_out() {
  local pid
  pid=$(awk '$2 == "end" { p = $3 } END { print p }' "$W/nodes/$1/$2.log")
  cat "$W/nodes/$1/out.$2.$pid"
}
# after_runs K NODE: wait until slurmd has run K more health checks on NODE.
after_runs() {
  local k=$1 n=$2 base
  base=$(runs "$n" healthcheck)
  more() { [ "$(runs "$n" healthcheck)" -ge $((base + k)) ]; }
  until_ok $((k * hci + 30)) 'slurmd ran fewer than $k health checks on $n in $((k * hci + 30))s' more
}
ours() { [[ "$(reason "$1")" == "rdmadoctor: $2"* ]] && [[ "$(state "$1")" == *DRAIN* ]]; }
# kept NODE EXPR: EXPR (Python, of s) on the state the node's health check keeps at the shipped
# wrapper's --state, /var/lib/rdmadoctor/state.json on that node.
kept() {
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' \
    "$W/nodes/$1/varlib/rdmadoctor/state.json" "$2"
}
# expect NODE STATE REASON: State= and Reason= (without Slurm's [user@time]) exactly.
expect() {
  local st rs
  st=$(state "$1")
  rs=$(reason "$1" | sed 's/ \[[^][]*@[^][]*\]$//')
  [ "$st" = "$2" ] && [ "$rs" = "$3" ] || fail "$1: State=$st Reason='$rs'; want State=$2 Reason='$3'"
}

# --- 1. the health check drains the faulty node, with its reason; the healthy stay idle -------
until_ok $((3 * hci + 30)) 'node3 (port down) was not drained by rdmadoctor: State=$(state node3) Reason=$(reason node3)' ours node3 "port.state/admin-down(19) "
r3=$(reason node3 | sed 's/ \[[^][]*@[^][]*\]$//')
[[ "$r3" =~ ^rdmadoctor:\ port\.state/admin-down\(19\)\ mlx5_1\ port\ 1\ DOWN ]] && [ ${#r3} -le 120 ] && [[ "$r3" != *\"* ]] \
  || fail "node3's reason '$r3' is not rdmadoctor's port.state line of at most 120 bytes"
# Slurm keeps the reason rdmadoctor gave, byte for byte.
given=$(grep -h -o 'drained: rdmadoctor: .*' "$W"/nodes/node3/out.healthcheck.* | head -n 1)
[ "${given#drained: }" = "$r3" ] || fail "rdmadoctor drained node3 with '${given#drained: }', scontrol shows '$r3'"
in_ctl sinfo -R -h -o '%n|%E' | grep -qxF "node3|$r3" || fail "sinfo -R does not list node3 with '$r3': $(in_ctl sinfo -R -h -o '%n|%E')"
[[ "$(state node3)" = IDLE+DRAIN ]] || fail "node3: State=$(state node3), want IDLE+DRAIN"
after_runs 2 node1
expect node1 IDLE ""
expect node2 IDLE ""
grep -q 'not drained by rdmadoctor (State=IDLE): nothing to resume' <(last_out node1 healthcheck) || fail "node1's health check said: $(last_out node1 healthcheck)"
# What slurmd gives a HealthCheckProgram: SLURMD_NODENAME and no PATH (the shell adds PWD).
for n in "${nodes[@]}"; do
  env_hc=$(grep -v '^PWD=' "$W/nodes/$n/env.healthcheck")
  [ "$env_hc" = "SLURMD_NODENAME=$n" ] || fail "slurmd ran the health check on $n with the environment '$env_hc', want SLURMD_NODENAME=$n only"
done
# slurmd's first health check runs at its start, before the node registers: UNKNOWN, left alone.
first3=$(awk '$2 == "end" { print $3; exit }' "$W/nodes/node3/healthcheck.log")
grep -q 'not drained: the node is UNKNOWN (State=UNKNOWN)' "$W/nodes/node3/out.healthcheck.$first3" \
  || fail "node3's first health check said: $(cat "$W/nodes/node3/out.healthcheck.$first3")"
# The shipped wrapper's --state: created on each node's first run, the drain recorded.
for n in "${nodes[@]}"; do
  [ "$(kept "$n" 's["schema"]')" = rdmadoctor.state/v2 ] || fail "$n: no rdmadoctor.state/v2 at the wrapper's --state /var/lib/rdmadoctor/state.json"
done
[ "$(kept node3 's["drain"]["checks"]')" = "['port.state']" ] || fail "node3's state records the drain as: $(kept node3 's.get("drain")')"
say "1. health check: node3 drained with '$r3'; node1, node2 idle; environment SLURMD_NODENAME only; the wrapper's state kept the drain"

# --- 2. auto-resume: node3's port comes back, the next health check resumes it ---------------
fixture node3 cx5-roce-healthy
until_ok $((3 * hci + 30)) 'node3 was not resumed once healthy: State=$(state node3) Reason=$(reason node3)' idle node3
expect node3 IDLE ""
grep -q "resumed (drained by rdmadoctor: \"rdmadoctor: port.state/admin-down(19) " "$W"/nodes/node3/out.healthcheck.* || fail "no health check on node3 says it resumed the node"
[ "$(kept node3 's.get("drain")')" = None ] || fail "node3 resumed, but its state still records a drain: $(kept node3 's.get("drain")')"
say "2. auto-resume: node3 idle again after its fixture turned healthy"

# --- 3. another reason, DOWN and MAINT are never touched --------------------------------------
# node2 healthy but drained by hand: not resumed. node3 broken and drained by hand: the reason
# stays. node1 broken and DOWN, then broken and in a maintenance reservation: not drained.
# Each node is drained or downed first and broken after, so no health check drains it before.
in_ctl scontrol update nodename=node2 state=drain reason="cable swap, ticket 4711"
in_ctl scontrol update nodename=node3 state=drain reason="NHC: ib0 down"
fixture node3 port-down
in_ctl scontrol update nodename=node1 state=down reason="admin: reseating the HCA"
fixture node1 port-down
for n in "${nodes[@]}"; do after_runs 2 "$n"; done
expect node2 IDLE+DRAIN "cable swap, ticket 4711"
grep -q 'not drained by rdmadoctor (State=IDLE+DRAIN): nothing to resume' <(last_out node2 healthcheck) || fail "node2's health check said: $(last_out node2 healthcheck)"
expect node3 IDLE+DRAIN "NHC: ib0 down"
grep -q 'not drained again: already drained (State=IDLE+DRAIN) for another reason, kept: "NHC: ib0 down"' <(last_out node3 healthcheck) || fail "node3's health check said: $(last_out node3 healthcheck)"
expect node1 DOWN "admin: reseating the HCA"
grep -q 'not drained: the node is DOWN (State=DOWN)' <(last_out node1 healthcheck) || fail "node1's health check said: $(last_out node1 healthcheck)"
fixture node1 cx5-roce-healthy
in_ctl scontrol update nodename=node1 state=resume
until_ok 30 'node1 did not come back from DOWN: State=$(state node1)' idle node1
# A broken node in maintenance: slurmd still runs the check there, and it must not drain.
in_ctl scontrol create reservation reservationname=rdmaint starttime=now duration=10 nodes=node1 users=root flags=maint >/dev/null
until_ok 30 'node1 is not in MAINT: State=$(state node1)' eval '[[ "$(state node1)" == *MAINT* ]]'
fixture node1 port-down
after_runs 2 node1
st1=$(state node1)
[[ "$st1" == *MAINT* && "$st1" != *DRAIN* ]] || fail "node1 in maintenance: State=$st1, want MAINT without DRAIN"
grep -q 'not drained: the node is MAINT' <(last_out node1 healthcheck) || fail "node1's health check in maintenance said: $(last_out node1 healthcheck)"
in_ctl scontrol delete reservationname=rdmaint
for n in "${nodes[@]}"; do fixture "$n" cx5-roce-healthy; done
in_ctl scontrol update nodename=node2,node3 state=resume
for n in "${nodes[@]}"; do until_ok 30 '$n is not IDLE after resume: State=$(state $n)' idle "$n"; done
say "3. another reason kept (node2 healthy, node3 broken), DOWN and MAINT left alone (node1 broken)"

# --- 4. prolog: a job lands on a node that broke since its last health check ----------------
# node2's port goes down and a job is sent there: the prolog finds it, drains with
# rdmadoctor's reason and exits 1; slurmctld requeues the job held and keeps the reason (no
# "Prolog error"). Meanwhile the test holds node2's state lock, so the health checks slurmd
# starts there exit at once (5.) and cannot drain the node before the job lands.
nsenter --net=/run/netns/"$ctl" flock --close "$W/nodes/node2/varlib/rdmadoctor/state.json.lock" sleep 300 &
holder=$!
busy2() { grep -q ' end [0-9]* 3$' "$W/nodes/node2/healthcheck.log"; }
until_ok $((2 * hci + 30)) 'no health check on node2 found the lock the test holds' busy2
fixture node2 port-down
job=$(in_ctl sbatch --parsable -w node2 -o /dev/null -e /dev/null --wrap 'sleep 300')
held() { in_ctl scontrol show job "$job" | grep -Eq 'JobState=PENDING Reason=launch_failed_requeued_held'; }
until_ok 30 'job $job is not requeued held: $(in_ctl scontrol show job "$job" | grep -E "JobState|Restarts")' held
grep -q ' end [0-9]* 1$' "$W/nodes/node2/prolog.log" || fail "the prolog on node2 did not exit 1: $(cat "$W/nodes/node2/prolog.log" 2>/dev/null)"
grep -q 'drained: rdmadoctor: port.state/admin-down(19) ' <(last_out node2 prolog) || fail "node2's prolog said: $(last_out node2 prolog)"
ours node2 "port.state/admin-down(19) " || fail "node2 after the prolog failed: State=$(state node2) Reason=$(reason node2), want rdmadoctor's reason"
grep -q "JobId=$job" <(grep 'Prolog launch failure' "$W/log/slurmctld.log") || fail "slurmctld did not log the prolog failure of job $job"
[ "$(in_ctl squeue -h -j "$job" -o '%T|%r')" = "PENDING|launch failed requeued held" ] || fail "squeue: $(in_ctl squeue -h -j "$job" -o '%T|%r')"
grep -Eq '^SLURM_JOB_ID='"$job"'$' "$W/nodes/node2/env.prolog" && grep -q '^SLURMD_NODENAME=node2$' "$W/nodes/node2/env.prolog" \
  || fail "the prolog's environment lacks SLURM_JOB_ID or SLURMD_NODENAME: $(cat "$W/nodes/node2/env.prolog")"
r2=$(reason node2 | sed 's/ \[[^][]*@[^][]*\]$//')
in_ctl scancel "$job"
# flock holds the lock until its sleep ends: end the sleep, by its pid.
kill $(cat "/proc/$holder/task/$holder/children") 2>/dev/null || true
wait "$holder" 2>/dev/null || true
fixture node2 cx5-roce-healthy
until_ok $((3 * hci + 30)) 'node2 was not resumed once healthy: State=$(state node2) Reason=$(reason node2)' idle node2
say "4. prolog: job $job requeued held (launch failed requeued held), node2 drained with '$r2', resumed once healthy"

# --- 5. the lock: slurmd starts a health check while the last one still runs ----------------
# --interval makes node1's runs take 8 s, slurmd starts one every ${hci} s: the overlapping run
# finds the state's lock held and exits at once, saying so; slurmd logs it.
echo "--interval 8s" >"$W/nodes/node1/flags.healthcheck"
busy() { grep -l 'another rdmadoctor run holds' "$W"/nodes/node1/out.healthcheck.* 2>/dev/null | head -n 1; }
until_ok $((4 * hci + 40)) 'no health check on node1 found another one running' eval '[ -n "$(busy)" ]'
bpid=$(busy)
bpid=${bpid##*.}
rm -f "$W/nodes/node1/flags.healthcheck"
read -r b_start b_end b_rc < <(awk -v p="$bpid" '$3 == p && $2 == "start" { s = $1 } $3 == p && $2 == "end" { e = $1; rc = $4 } END { print s, e, rc }' "$W/nodes/node1/healthcheck.log")
# The run it met: started before it, ended after it (once the runs started before it end).
started_before_ended() {
  awk -v be="$b_end" '$2 == "start" && $1 + 0 < be + 0 { s[$3] = 1 } $2 == "end" { delete s[$3] }
    END { for (q in s) exit 1 }' "$W/nodes/node1/healthcheck.log"
}
until_ok 30 "the runs on node1 that started before the busy one did not end" started_before_ended
awk -v p="$bpid" -v bs="$b_start" -v be="$b_end" '$2 == "start" { s[$3] = $1 + 0 } $2 == "end" { e[$3] = $1 + 0 }
  END { for (q in s) if (q != p && s[q] < bs + 0 && e[q] > be + 0) found = 1; exit !found }' "$W/nodes/node1/healthcheck.log" \
  || fail "the busy run on node1 ($bpid, $b_start-$b_end) overlapped no other run: $(cat "$W/nodes/node1/healthcheck.log")"
awk -v a="$b_start" -v b="$b_end" 'BEGIN { exit !(b - a < 2) }' || fail "the busy run on node1 took $(awk -v a="$b_start" -v b="$b_end" 'BEGIN { print b - a }') s, want an exit at once"
[ "$b_rc" = 3 ] || fail "the busy run on node1 exited $b_rc, want 3 (slurmd logs the output of a run that exits non-zero)"
grep -q 'health_check failed: rc:3 output:.*another rdmadoctor run holds' "$W/log/slurmd-node1.log" || fail "slurmd did not log the busy run's message"
expect node1 IDLE ""
say "5. lock: a health check slurmd started during an 8 s run exited 3 in $(awk -v a="$b_start" -v b="$b_end" 'BEGIN { printf "%.2f", b - a }') s: $(grep -o 'another rdmadoctor run holds.*(exit 3)' "$W/nodes/node1/out.healthcheck.$bpid" | sed "s|$W|W|")"

# --- 6. the sweep: deploy/slurm/rdmadoctor-sweep over srun -N3 ------------------------------
# RDMADOCTOR names the binary on the nodes: here a shim that gives each node its own fixture.
# The nodes see an empty tmpfs at the sweep's directory: the reports must come back through
# srun, not through a shared file system.
cat >"$W/shims/rdmadoctor-node" <<SHIM
#!/bin/sh
exec $bin --root "$W/nodes/\$SLURMD_NODENAME/sweep-root" "\$@"
SHIM
chmod 0755 "$W/shims/rdmadoctor-node"
ln -s "$repo/testdata/hosts/cx5-roce-healthy" "$W/nodes/node1/sweep-root"
ln -s "$repo/testdata/hosts/cx6-ib-healthy" "$W/nodes/node2/sweep-root"
ln -s "$repo/testdata/hosts/port-down" "$W/nodes/node3/sweep-root"
for n in "${nodes[@]}"; do until_ok 30 '$n is not IDLE before the sweep: State=$(state $n)' idle "$n"; done
t_sweep=$(date +%s.%N)
sum=$(in_ctl env RDMADOCTOR="$W/shims/rdmadoctor-node" SUMMARIZE="$bin" ARGS="--level 1" \
  timeout 120 sh deploy/slurm/rdmadoctor-sweep "$W/sweep" -N3) || fail "rdmadoctor-sweep -N3 failed: $sum"
ls -A "$W/sweep" >"$W/sweep.ls"
[ "$(cat "$W/sweep.ls")" = "$(printf 'node1.json\nnode2.json\nnode3.json\nsrun.err')" ] \
  || fail "the sweep left $(tr '\n' ' ' <"$W/sweep.ls"), want node1.json node2.json node3.json srun.err"
# srun's own message: node3's rdmadoctor exited with the root cause's code.
grep -q 'node3: task 2: Exited with exit code 19' "$W/sweep/srun.err" || fail "srun.err: $(cat "$W/sweep/srun.err")"
for n in "${nodes[@]}"; do
  python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(r["schema"] != "rdmadoctor.report/v1")' "$W/sweep/$n.json" \
    || fail "$n.json is not a report: $(head -c 300 "$W/sweep/$n.json")"
done
grep -Eq '^  exit 0 +healthy +2 +' <<<"$sum" && grep -Eq '^  exit 19 +port.state +1 +cx5-node01 \(node3\.json\)$' <<<"$sum" \
  || fail "the sweep's summary does not have node1, node2 healthy and node3 at port.state:
$sum"
say "6. sweep: srun -N3 wrote node1.json node2.json node3.json in $(elapsed "$t_sweep"); summarize: $(grep -E '^  exit' <<<"$sum" | tr -s ' ' | tr '\n' ';')"

# --- 7. a verdict proves only what was looked at, on the three nodes at once ----------------
# node1 can look at everything but gpu.acs (its fixture shows the 64 bytes of PCI config space
# an unprivileged reader gets): unknown, never drained — until --unknown-drain-after 3 says
# three unknown runs are enough; resumed once gpu.acs passes.
# node3 is drained for port.state, its port comes back, but its health checks run only
# --check kernel.version: it stays drained; the full level-1 run then resumes it.
# node2 is drained for probe.send_poll (level 2), as a level-2 prolog would: level-1 health
# checks, healthy in all they ran, leave it drained.
t7=$(date +%s.%N)
cp -a "$repo/testdata/hosts/hgx-8gpu-healthy" "$W/hgx-config-64"
find "$W/hgx-config-64/sys/devices" -name config -type f -exec truncate -s 64 {} +
fixture node1 "$W/hgx-config-64"
fixture node3 port-down
send_poll='rdmadoctor: probe.send_poll(32) mlx5_0 port 1: no completion within the deadline'
in_ctl scontrol update nodename=node2 state=drain reason="$send_poll"
until_ok $((3 * hci + 30)) 'node3 (port down) was not drained: State=$(state node3) Reason=$(reason node3)' ours node3 "port.state/admin-down(19) "
r3=$(reason node3 | sed 's/ \[[^][]*@[^][]*\]$//')
# The port is back, but only kernel.version is run: the flags first; the host once every run
# that started before them has ended (the shim reads the flags after it logs its start), so
# that no run sees the fixed host without the flags.
echo '--check kernel.version' >"$W/nodes/node3/flags.healthcheck"
t_flags=$(date +%s.%N)
settled() { awk -v t="$t_flags" '$2 == "start" && $1 + 0 < t + 0 { s[$3] = 1 } $2 == "end" { delete s[$3] }
  END { for (q in s) exit 1 }' "$W/nodes/node3/healthcheck.log"; }
until_ok 30 'the runs on node3 that started before its flags did not end' settled
fixture node3 cx5-roce-healthy
for n in node2 node3; do after_runs 2 "$n"; done
unknown2() { [ "$(kept node1 's["unknown_runs"]')" -ge 2 ]; }
until_ok $((3 * hci + 30)) 'node1 (only gpu.acs in error) had fewer than 2 unknown runs in a row: State=$(state node1)' unknown2
expect node1 IDLE ""
grep -q 'could not judge: gpu.acs/config-unreadable(25) error: .*; the node is neither drained nor resumed' <(last_out node1 healthcheck) \
  || fail "node1's health check (only gpu.acs in error) said: $(last_out node1 healthcheck)"
[ "$(awk '$2 == "end" { rc = $4 } END { print rc }' "$W/nodes/node1/healthcheck.log")" = 1 ] || fail "node1's health check on an unknown verdict did not exit 1"
grep -q 'health_check failed: rc:1 output:.*could not judge: gpu.acs/config-unreadable(25)' "$W/log/slurmd-node1.log" || fail "slurmd did not log node1's unknown verdict"
[ "$(kept node1 's["unknown_runs"] >= 2 and [c["status"] for c in s["checks"] if c["status"] not in ("pass", "skip")] == ["error"]')" = True ] \
  || fail "node1's state: unknown_runs $(kept node1 's["unknown_runs"]'), want gpu.acs alone in error for 2 runs or more"
expect node3 IDLE+DRAIN "$r3"
grep -q 'port.state/admin-down(19) fail: .*; already drained for it' <(last_out node3 healthcheck) || fail "node3's partial health check said: $(last_out node3 healthcheck)"
[ "$(kept node3 'next(c for c in s["checks"] if c["id"] == "kernel.version")["ran"] > next(c for c in s["checks"] if c["id"] == "port.state")["ran"] and s["drain"]["checks"] == ["port.state"]')" = True ] \
  || fail "node3's state: kernel.version not judged after port.state, or the drain not for port.state: $(kept node3 's.get("drain")')"
expect node2 IDLE+DRAIN "$send_poll"
grep -q 'healthy (.*); not resumed: drained for probe.send_poll, which has not passed; run it (--check probe.send_poll, at its level)' <(last_out node2 healthcheck) \
  || fail "node2's health check said: $(last_out node2 healthcheck)"
# Three unknown runs are enough (node1 has had two or more): drained for gpu.acs with the count.
echo "--unknown-drain-after 3" >"$W/nodes/node1/flags.healthcheck"
until_ok $((2 * hci + 30)) 'node1 was not drained after 3 unknown runs: State=$(state node1) Reason=$(reason node1)' ours node1 "gpu.acs/config-unreadable(25) could not check ("
r1=$(reason node1 | sed 's/ \[[^][]*@[^][]*\]$//')
# The fixes: node1's config space is whole again, node3 runs every level-1 check.
rm -f "$W/nodes/node1/flags.healthcheck" "$W/nodes/node3/flags.healthcheck"
fixture node1 hgx-8gpu-healthy
until_ok $((3 * hci + 30)) 'node3 was not resumed by the full run: State=$(state node3) Reason=$(reason node3)' idle node3
until_ok $((3 * hci + 30)) 'node1 was not resumed once gpu.acs passed: State=$(state node1) Reason=$(reason node1)' idle node1
expect node2 IDLE+DRAIN "$send_poll"
in_ctl scontrol update nodename=node2 state=resume
say "7. only errors: node1 left idle, then '$r1' under --unknown-drain-after 3, resumed once gpu.acs passed; node3 kept drained by --check kernel.version runs, resumed by the full run; node2 drained for probe.send_poll kept drained by level-1 runs ($(elapsed "$t7"))"

say "PASS in $(elapsed "$t0")"
