package checks

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// DefaultMinMemlock is the RLIMIT_MEMLOCK below which registration of an
// ordinary working set fails (--min-memlock).
const DefaultMinMemlock = 64 << 20

// The lines of the memlock remedy, one per way a process gets its limit.
const (
	memlockLoginsStar = "- logins and batch jobs (pam_limits): in /etc/security/limits.conf (or a file in /etc/security/limits.d/) put `* soft memlock unlimited` and `* hard memlock unlimited`, then log in again"
	memlockRootClause = "`*` lines never apply to root (limits.conf(5)): for root add `root soft memlock unlimited` / `root hard memlock unlimited`"
	memlockLogins     = memlockLoginsStar + "; " + memlockRootClause + ";"
	memlockServices   = "- systemd services: `LimitMEMLOCK=infinity` in the unit's [Service] section (`systemctl edit <unit>`), then restart the unit; or DefaultLimitMEMLOCK=infinity in /etc/systemd/system.conf, " +
		"then `systemctl daemon-reexec` and restart the unit;"
	// Slurm: a job gets slurmd's limit and, unless slurm.conf keeps MEMLOCK
	// from propagating, the submitting shell's (Slurm FAQ "memlock";
	// read_config: PropagateResourceLimitsExcept decides alone when set).
	memlockSlurm = "- Slurm: jobs get slurmd's limit and, unless slurm.conf keeps MEMLOCK from propagating, the limit of the shell they were submitted from: " +
		"`LimitMEMLOCK=infinity` in slurmd.service (`systemctl edit slurmd`), then `systemctl restart slurmd`; and `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf " +
		"(the same file on every node, login nodes included), then `scontrol reconfigure`;"
	memlockContainers = "- containers: the container runtime sets the limit, not limits.conf: `docker run --ulimit memlock=-1:-1` (podman the same); Kubernetes: the runtime's default " +
		"(containerd passes on its own LimitMEMLOCK, CRI-O its default_ulimits), or grant the capability (`--cap-add IPC_LOCK`; Kubernetes `securityContext.capabilities.add: [\"IPC_LOCK\"]`)."
)

// containerMemlockFix is the fix inside an application container, which
// has no logins: pam_limits never runs there, and the limit is whatever
// the container runtime gave the container. Kubernetes has no rlimit field
// in a pod: containerd's CRI removes rlimits from the default spec, so
// containers inherit containerd's own limits; CRI-O applies default_ulimits.
const containerMemlockFix = "In a container the limit comes from the container runtime, not from /etc/security/limits.conf (a container has no pam_limits logins). " +
	"docker / podman: `--ulimit memlock=-1:-1` (compose: `ulimits: {memlock: -1}`), or docker's daemon.json `\"default-ulimits\": {\"memlock\": {\"Name\": \"memlock\", \"Soft\": -1, \"Hard\": -1}}`. " +
	"Kubernetes sets no rlimits: containers inherit the runtime's — containerd's own limit (`LimitMEMLOCK=infinity` in containerd.service, or process.rlimits in the CRI base_runtime_spec), " +
	"CRI-O's `default_ulimits = [\"memlock=-1:-1\"]` in crio.conf. Or grant the capability, with which the limit does not bind memory registration: " +
	"`securityContext.capabilities.add: [\"IPC_LOCK\"]` (docker/podman: `--cap-add IPC_LOCK`)."

// memlockFix is the whole remedy, for the catalog and where nothing tells
// how the process was started.
const memlockFix = "Raise the limit where the jobs start:\n" + memlockLogins + "\n" + memlockServices + "\n" + memlockSlurm + "\n" + memlockContainers

// memlockByHand says how to read the limit without rdmadoctor.
const memlockByHand = "Look by hand: `ulimit -l` and `ulimit -Hl` in the job's shell (KiB), `grep 'locked memory' /proc/<pid>/limits` of a running job, " +
	"and `grep CapEff /proc/<pid>/status` (bit 14 is CAP_IPC_LOCK; `capsh --decode=<mask>`). Run where /proc is mounted."

func init() {
	register(Check{
		ID: "limits.memlock", Code: 18, Level: 1,
		Title: "the locked-memory limit lets applications register memory",
		Explain: Explanation{
			Judges: "RLIMIT_MEMLOCK of the running process (\"Max locked memory\" in /proc/self/limits) and whether it holds CAP_IPC_LOCK " +
				"(bit 14 of CapEff in /proc/self/status). With the capability the limit does not apply to memory registration; without it the soft " +
				"limit must be unlimited or at least --min-memlock (64 MiB). It also reads the default that users' jobs get — memlock lines of " +
				"/etc/security/limits.conf and limits.d/*.conf, systemd's DefaultLimitMEMLOCK in system.conf and its drop-ins. It warns when the logins' " +
				"default is below the threshold or not configured at all, and when DefaultLimitMEMLOCK is set below the threshold; an unset " +
				"DefaultLimitMEMLOCK is reported, not judged (services then get systemd's built-in default, 8 MiB since systemd 253, and a unit that " +
				"runs RDMA sets LimitMEMLOCK= itself). When the configuration already allows enough but this process has less, it says why that can be " +
				"(`*` lines never apply to root; a systemd unit, a container, slurmd, or a session opened before the change). " +
				"A process that is exempt (root, CAP_IPC_LOCK) also judges what a job gets, and says which file and line decided it: under a running slurmd " +
				"(found in /proc by its name), slurmd's own limit from /proc/PID/limits when slurm.conf keeps MEMLOCK from propagating, else the submitting " +
				"shell's, which slurmstepd lowers to slurmd's hard limit (a low hard limit fails; a low login limit on this node, standing in for the " +
				"submitting host's, warns); with no slurmd running, what slurmd.service would give it; on a host without Slurm, what pam_limits gives an " +
				"ordinary user's login (UID_MIN, in no named group; pam_limits' precedence: user and UID-range lines over groups over `*`, later files " +
				"override at the same rank), the rest kept from sshd's unit or systemd's default (DefaultLimitMEMLOCK, else 8 MiB from systemd 253, " +
				"the kernel's 64 KiB or 8 MiB before). Below --min-memlock fails, unless only some users or groups are raised on purpose. " +
				"On a Slurm node (slurm.conf in /etc/slurm, /etc/slurm-llnl or configless slurmd's /run/slurm/conf; slurmd.service; or a slurm cgroup) it reads " +
				"PropagateResourceLimits(Except) and slurmd.service's LimitMEMLOCK and says whether a job gets the submitting shell's limit (reported, not judged). " +
				"In an application container (docker, podman, a Kubernetes pod — known by its service account mount even with hostPID — or wherever PID 1 is not an init) there are no logins: the login and systemd defaults are reported, not judged, " +
				"and the remedy starts with the container runtime's setting.",
			Why: "ibv_reg_mr pins the pages it registers; the kernel (ib_umem_get) refuses with ENOMEM once the pinned pages would pass RLIMIT_MEMLOCK, " +
				"unless the process has CAP_IPC_LOCK. The kernel default (64 KiB before Linux 5.16, 8 MiB since) is far too small for RDMA buffers, " +
				"so MPI, NCCL and storage clients fail at start-up with \"Cannot allocate memory\".",
		},
		Run: runLimitsMemlock,
	})
}

// limits.memlock's findings: this process's own limit first, then, for a
// process that is exempt (root, CAP_IPC_LOCK), what the jobs it stands for
// get. {remedy} is the memlock remedy ordered by how the process or its
// jobs are started (memlockRemedy, slurmMemlockFix); {exempt} is the
// process's own passing verdict that a jobs' finding goes on from.
var (
	memlockUnreadable = declare(Finding{ID: "limits.memlock/unreadable", Status: report.Error,
		When:    "/proc/self/limits could not be read or parsed",
		Message: "could not read RLIMIT_MEMLOCK: {cause}", Fix: memlockByHand})
	memlockCapHeld = declare(Finding{ID: "limits.memlock/cap-held", Status: report.Pass,
		When:    "the process holds CAP_IPC_LOCK: the limit does not bind memory registration",
		Message: "CAP_IPC_LOCK held: memory registration is not bound by RLIMIT_MEMLOCK (soft {soft})"})
	memlockUnlimited = declare(Finding{ID: "limits.memlock/unlimited", Status: report.Pass,
		When:    "the soft RLIMIT_MEMLOCK is unlimited",
		Message: "RLIMIT_MEMLOCK is unlimited"})
	memlockEnough = declare(Finding{ID: "limits.memlock/enough", Status: report.Pass,
		When:    "the soft RLIMIT_MEMLOCK is at least --min-memlock",
		Message: "RLIMIT_MEMLOCK {soft} ≥ {min}"})
	memlockCapUnreadable = declare(Finding{ID: "limits.memlock/cap-unreadable", Status: report.Error,
		When:    "RLIMIT_MEMLOCK is below --min-memlock and /proc/self/status could not be read or parsed for CAP_IPC_LOCK",
		Message: "RLIMIT_MEMLOCK {soft} is below {min} and CAP_IPC_LOCK could not be read ({cause})", Fix: memlockByHand})
	memlockBelow = declare(Finding{ID: "limits.memlock/below", Status: report.Fail,
		When:    "RLIMIT_MEMLOCK below --min-memlock and no CAP_IPC_LOCK: memory registration fails with ENOMEM",
		Message: memlockBelowMessage, Fix: "{remedy}"})
	memlockBelowContainer = declare(Finding{ID: "limits.memlock/below-in-container", Status: report.Fail,
		When:    "the same, in an application container (docker, podman, Kubernetes): the remedy starts with the container runtime's setting",
		Message: memlockBelowMessage, Fix: "{remedy}"})
	memlockBelowSlurm = declare(Finding{ID: "limits.memlock/below-in-slurm-job", Status: report.Fail,
		When:    "the same, in a Slurm job: the remedy starts with the Slurm fix, with the exact slurm.conf line this node's slurm.conf needs",
		Message: memlockBelowMessage, Fix: "{remedy}"})
	memlockUsersLow = declare(Finding{ID: "limits.memlock/users-low", Status: report.Warn,
		When: "this process has enough, but the default users' logins get is below the threshold or not set, " +
			"or systemd's DefaultLimitMEMLOCK is set below the threshold",
		Message: "{exempt}; but users' jobs get less: {low}", Fix: "{remedy}"})
	memlockLoginLow = declare(Finding{ID: "limits.memlock/login-low", Status: report.Fail,
		When:    "root or CAP_IPC_LOCK is exempt, but an ordinary user's login gets less (pam_limits, sshd, systemd's default)",
		Message: "{exempt}, but an ordinary user's login gets {soft}, below {min}: a job cannot register memory ({source})", Fix: "{remedy}"})
	memlockSlurmdUnknown = declare(Finding{ID: "limits.memlock/slurmd-unreadable", Status: report.Error,
		When:    "root or CAP_IPC_LOCK is exempt, and the running slurmd's /proc/PID/limits could not be read",
		Message: "{exempt}; what jobs started by slurmd get is unknown: {cause}",
		Fix:     "Look by hand: `grep 'locked memory' /proc/$(pgrep -x slurmd)/limits`."})
	memlockSlurmdLow = declare(Finding{ID: "limits.memlock/slurmd-low", Status: report.Fail,
		When:    "root or CAP_IPC_LOCK is exempt, but jobs started by slurmd get slurmd's own limit (slurm.conf keeps MEMLOCK from propagating), which is below the threshold",
		Message: "{exempt}, but jobs started by slurmd get {soft}, below {min}: a job cannot register memory (slurmd's own limit, {source}; MEMLOCK does not propagate: {decided_by})",
		Fix:     "{remedy}"})
	memlockSlurmdHardLow = declare(Finding{ID: "limits.memlock/slurmd-hard-low", Status: report.Fail,
		When:    "root or CAP_IPC_LOCK is exempt, MEMLOCK propagates, but slurmd's hard limit, which caps what propagates, is below the threshold",
		Message: "{exempt}, but jobs started by slurmd get at most {hard}, below {min}: a job cannot register memory (slurmd's hard limit, {source}, caps what propagates from the submitting shell: {decided_by})",
		Fix:     "{remedy}"})
	memlockSlurmShellLow = declare(Finding{ID: "limits.memlock/slurm-shell-low", Status: report.Warn,
		When:    "under Slurm, MEMLOCK propagates and a login on this node gets less than the threshold (the submitting host decides)",
		Message: "{exempt}; jobs started by slurmd get the submitting shell's limit ({decided_by}), {soft} from a login like this node's ({source}): below {min} unless the submitting host gives more",
		Fix:     "{remedy}"})
)

const memlockBelowMessage = "RLIMIT_MEMLOCK {soft} is below {min} and there is no CAP_IPC_LOCK: ibv_reg_mr fails with ENOMEM (\"Cannot allocate memory\") once {soft} is pinned"

// limitJSON is a limit as evidence: bytes, or "unlimited".
func limitJSON(v uint64) any {
	if v == sysfs.Unlimited {
		return "unlimited"
	}
	return v
}

func runLimitsMemlock(_ context.Context, env *Env) Result {
	h := env.Host
	threshold := env.Opts.MinMemlock
	if threshold == 0 {
		threshold = DefaultMinMemlock
	}
	lim, err := h.Memlock()
	if err != nil {
		r := memlockUnreadable.result("", Slots{"cause": err.Error()})
		r.Observed = "RLIMIT_MEMLOCK unknown"
		r.Expected = "a readable /proc/self/limits"
		return r
	}
	hasCap, capText, capLine, capErr := capIPCLock(h)
	ev := map[string]any{
		"soft": limitJSON(lim.Soft), "hard": limitJSON(lim.Hard), "min_bytes": limitJSON(threshold), "cap_ipc_lock": hasCap,
	}
	if capErr != nil {
		ev["cap_ipc_lock"] = nil
	}
	observed := fmt.Sprintf("soft %s, hard %s, CAP_IPC_LOCK %s", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(lim.Hard), capText)
	expected := fmt.Sprintf("soft limit unlimited or ≥ %s, or CAP_IPC_LOCK", sysfs.FormatBytes(threshold))
	details := []string{
		fmt.Sprintf("this process: RLIMIT_MEMLOCK soft %s, hard %s (%s)", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(lim.Hard), h.Display(sysfs.ProcSelfLimits)),
		capLine,
	}

	// Root and CAP_IPC_LOCK are exempt: then what a job gets is judged.
	uid, uidErr := h.ProcessUID()
	rootView := hasCap || (uidErr == nil && uid == 0)
	mc, slurmDetails, slurmEv := memlockContextOf(h, rootView)
	if mc.container != "" {
		ev["container"] = mc.container
	}
	if slurmEv != nil {
		ev["slurm"] = slurmEv
	}
	users, userDetails, pamLow, sdLow, pam := userMemlockDefaults(h, threshold)
	userLow := append(pamLow, sdLow...)
	if mc.app {
		// No logins and no systemd in an application container: the
		// defaults they would give are not judged here.
		details = append(details, fmt.Sprintf("container (%s): the container runtime sets the limit; the login and systemd defaults below are reported, not judged", mc.container))
		userLow = nil
	}
	details = append(details, userDetails...)
	details = append(details, slurmDetails...)
	ev["users_default"] = users

	r, ownDetails := judgeOwnMemlock(h, lim, threshold, hasCap, capErr, mc, pam, ev)
	details = append(details, ownDetails...)
	if r.Status == report.Pass && rootView && !mc.app {
		var jobDetails []string
		r, jobDetails, ev["jobs"] = judgeJobsInto(h, r, mc, threshold)
		details = append(details, jobDetails...)
		userLow = sdLow // what logins get is judged as a job's limit now
	}
	if r.Status == report.Pass && len(userLow) > 0 {
		r = memlockUsersLow.result("", Slots{"exempt": r.Summary, "low": strings.Join(userLow, "; "), "remedy": memlockRemedy(mc, "")})
	}
	r.Observed, r.Expected, r.Details, r.Evidence = observed, expected, details, ev
	return r
}

// capIPCLock says whether this process holds CAP_IPC_LOCK, with which
// ib_umem_get ignores RLIMIT_MEMLOCK: the answer, "yes"/"no"/"unknown",
// a detail line, and why it could not be read.
func capIPCLock(h *sysfs.Host) (bool, string, string, error) {
	caps, err := h.EffectiveCaps()
	if err != nil {
		return false, "unknown", fmt.Sprintf("CAP_IPC_LOCK unknown: %v", err), err
	}
	if caps&(1<<sysfs.CapIPCLock) != 0 {
		return true, "yes", fmt.Sprintf("CAP_IPC_LOCK: yes (CapEff %016x)", caps), nil
	}
	return false, "no", fmt.Sprintf("CAP_IPC_LOCK: no (CapEff %016x)", caps), nil
}

// pamMemlock is what pam_limits gives sessions: the soft value of the `*`
// line and of a `root` line, each with where it was set ("" = no line).
type pamMemlock struct {
	star, root       uint64
	starAt, rootAt   string
	hasStar, hasRoot bool
}

// whyNotConfigured explains a process limit lower than the configuration
// gives: pam_limits' `*` lines skip root, and a process not started by a
// pam_limits login never sees limits.conf. It names the starter when the
// process's cgroup or a container mark says which; otherwise it lists them.
func whyNotConfigured(h *sysfs.Host, pam pamMemlock, threshold uint64) (string, map[string]any) {
	enough := func(v uint64) bool { return v == sysfs.Unlimited || v >= threshold }
	ev := map[string]any{}
	uid, uidErr := h.ProcessUID()
	if uidErr == nil {
		ev["uid"] = uid
	}
	var out []string
	configured := ""
	switch {
	case uidErr == nil && uid == 0 && pam.hasRoot && enough(pam.root):
		configured = pam.rootAt
	case uidErr == nil && uid == 0 && pam.hasStar && enough(pam.star):
		out = append(out, fmt.Sprintf("This process runs as root, and the `*` memlock line at %s (soft %s) does not reach it: "+memlockRootClause+".", pam.starAt, sysfs.FormatBytes(pam.star)))
		ev["reason"] = "wildcard lines do not apply to root"
	case uidErr == nil && uid != 0 && pam.hasStar && enough(pam.star):
		configured = pam.starAt
	}
	if configured == "" {
		if len(out) == 0 {
			return "", ev
		}
		return strings.Join(out, " "), ev
	}
	// The configuration allows enough: this process did not get it through
	// a pam_limits login.
	var starter string
	cg, cgErr := h.SelfCgroup()
	if cgErr == nil && cg != "" {
		ev["cgroup"] = cg
	}
	unit := path.Base(cg)
	switch c := h.Container(); {
	case strings.Contains(cg, "slurm"):
		starter = fmt.Sprintf("it was started by slurmd (cgroup %s), which gives a job slurmd's limit or the submitting shell's, never this node's limits.conf: see the Slurm fix above", cg)
	case c != "":
		starter = fmt.Sprintf("it runs in a container (%s): the runtime sets the limit (`--ulimit memlock=-1:-1`) or grants CAP_IPC_LOCK", c)
	case strings.HasSuffix(unit, ".service"):
		starter = fmt.Sprintf("it was started by the systemd unit %s, which pam_limits never applies to: `LimitMEMLOCK=infinity` in that unit (`systemctl edit %s`), then restart it", unit, unit)
	case strings.HasPrefix(unit, "session-") && strings.HasSuffix(unit, ".scope"):
		starter = "its login session may have been opened before the change: log in again"
	default:
		starter = "it was started by a systemd unit, in a container, by slurmd, or in a session opened before the change (limits.d applies only to new pam_limits logins)"
	}
	ev["reason"] = starter
	out = append(out, fmt.Sprintf("%s already allows enough, but this process has less: %s.", configured, starter))
	return strings.Join(out, " "), ev
}

// userMemlockDefaults reads the memlock default of users' sessions
// (pam_limits) and of systemd services, and returns the evidence, detail
// lines, the findings that fall below min and what pam_limits sets.
func userMemlockDefaults(h *sysfs.Host, threshold uint64) (ev map[string]any, details, pamLow, sdLow []string, pm pamMemlock) {
	pam, details, pamLow, pm := pamMemlockDefault(h, threshold)
	ev = map[string]any{"pam_limits": pam}
	sd, sdDetails, sdLow := systemdMemlockDefault(h, threshold)
	if sd != nil {
		ev["systemd_default"] = sd
	}
	return ev, append(details, sdDetails...), pamLow, sdLow, pm
}

// memlockLines are the memlock lines of limits.conf and limits.d sorted
// out: the last `*` soft and hard lines (a "-" line sets both), the lines
// of other users and groups, and root's soft value.
type memlockLines struct {
	soft, hard *sysfs.LimitsEntry
	others     []string
	pm         pamMemlock
}

// sortMemlockLines sorts the lines out; root is noted apart because
// pam_limits' `*` lines do not apply to it.
func sortMemlockLines(entries []sysfs.LimitsEntry) memlockLines {
	var ml memlockLines
	for i := range entries {
		e := &entries[i]
		if e.NoLimits {
			continue
		}
		if e.Domain == "root" && (e.Type == "soft" || e.Type == "-") {
			if v, err := sysfs.ParseLimitsMemlock(e.Value); err == nil {
				ml.pm.root, ml.pm.rootAt, ml.pm.hasRoot = v, fmt.Sprintf("%s:%d", e.File, e.Line), true
			}
		}
		if e.Domain != "*" {
			ml.others = append(ml.others, fmt.Sprintf("%s %s %s (%s:%d)", e.Domain, e.Type, e.Value, e.File, e.Line))
			continue
		}
		switch e.Type {
		case "soft":
			ml.soft = e
		case "hard":
			ml.hard = e
		case "-":
			ml.soft, ml.hard = e, e
		}
	}
	return ml
}

// pamMemlockDefault judges the memlock default of users' sessions: the `*`
// soft line when there is one; else only some users or groups are raised;
// else no line at all, and logins keep the kernel's built-in default,
// which is too low.
func pamMemlockDefault(h *sysfs.Host, threshold uint64) (map[string]any, []string, []string, pamMemlock) {
	var details, low []string
	entries, read, probs := h.MemlockEntries()
	for _, p := range probs {
		details = append(details, "users' default: "+p.Error())
	}
	ml := sortMemlockLines(entries)
	pam := map[string]any{"files_read": nonNil(read)}
	if len(ml.others) > 0 {
		pam["other_domains"] = ml.others
	}
	switch {
	case ml.soft != nil:
		line, lowLine := ml.judgeStar(pam, threshold)
		details = append(details, line)
		if lowLine != "" {
			low = append(low, lowLine)
		}
	case len(ml.others) > 0:
		details = append(details, "users' sessions (pam_limits): no `*` memlock line; only these users/groups are raised: "+strings.Join(ml.others, ", "))
	default:
		details = append(details, "users' sessions (pam_limits): no memlock line in limits.conf or limits.d — sessions keep the built-in default (8 MiB since Linux 5.16, 64 KiB before)")
		low = append(low, "no memlock default is configured for logins (limits.conf/limits.d), so they keep the built-in 8 MiB or 64 KiB")
	}
	return pam, details, low, ml.pm
}

// judgeStar reads the `*` soft line (and the hard one, for the record): it
// returns the detail line and, when the soft value is below the threshold,
// the finding. A soft value that does not parse is only a detail.
func (ml *memlockLines) judgeStar(pam map[string]any, threshold uint64) (line, low string) {
	soft := ml.soft
	v, err := sysfs.ParseLimitsMemlock(soft.Value)
	if err != nil {
		return fmt.Sprintf("users' default: %s:%d: %v", soft.File, soft.Line, err), ""
	}
	pam["soft"] = limitJSON(v)
	pam["source"] = fmt.Sprintf("%s:%d", soft.File, soft.Line)
	ml.pm.star, ml.pm.starAt, ml.pm.hasStar = v, fmt.Sprintf("%s:%d", soft.File, soft.Line), true
	line = fmt.Sprintf("users' sessions (pam_limits): soft memlock %s from %s:%d", sysfs.FormatBytes(v), soft.File, soft.Line)
	if ml.hard != nil {
		if hv, err := sysfs.ParseLimitsMemlock(ml.hard.Value); err == nil {
			pam["hard"] = limitJSON(hv)
			line += fmt.Sprintf(", hard %s", sysfs.FormatBytes(hv))
		}
	}
	if v != sysfs.Unlimited && v < threshold {
		low = fmt.Sprintf("`* soft memlock` is %s in %s:%d", sysfs.FormatBytes(v), soft.File, soft.Line)
	}
	return line, low
}

// systemdMemlockDefault judges systemd's DefaultLimitMEMLOCK=, when set; it
// returns its evidence (nil when unset or unparsable), detail lines, and
// the finding when its soft value is below the threshold. Unset is only
// reported: a unit that runs RDMA sets LimitMEMLOCK= itself.
func systemdMemlockDefault(h *sysfs.Host, threshold uint64) (map[string]any, []string, []string) {
	var details, low []string
	sd, found, sprobs := h.SystemdDefaultMemlock()
	for _, p := range sprobs {
		details = append(details, "systemd default: "+p.Error())
	}
	if !found {
		details = append(details, "systemd services: DefaultLimitMEMLOCK not set; units without LimitMEMLOCK= get systemd's built-in default "+
			"(8 MiB since systemd 253; before, the kernel's 64 KiB or 8 MiB): reported, not judged — a unit that runs RDMA sets LimitMEMLOCK= itself")
		return nil, details, low
	}
	l, err := sysfs.ParseSystemdLimit(sd.Value)
	if err != nil {
		details = append(details, fmt.Sprintf("systemd DefaultLimitMEMLOCK=%s (%s:%d): %v", sd.Value, sd.File, sd.Line, err))
		return nil, details, low
	}
	ev := map[string]any{"soft": limitJSON(l.Soft), "hard": limitJSON(l.Hard), "source": fmt.Sprintf("%s:%d", sd.File, sd.Line)}
	details = append(details, fmt.Sprintf("systemd services: DefaultLimitMEMLOCK=%s (%s:%d)", sd.Value, sd.File, sd.Line))
	if l.Soft != sysfs.Unlimited && l.Soft < threshold {
		low = append(low, fmt.Sprintf("systemd DefaultLimitMEMLOCK=%s (%s:%d)", sd.Value, sd.File, sd.Line))
	}
	return ev, details, low
}

// memlockContext is how this process got its limit: in an application
// container, under slurmd, or otherwise (a login, a systemd unit).
type memlockContext struct {
	container string // sysfs.Container's answer; "" on a host
	app       bool   // an application container (docker, podman, Kubernetes): no logins
	slurm     *slurmMemlock
}

// slurmMemlock is what decides a Slurm job's limit on this node; nil when
// nothing says the node runs Slurm.
type slurmMemlock struct {
	running    bool   // this process runs under slurmd (its cgroup says so)
	cgroup     string // the process's cgroup
	conf       sysfs.SlurmConf
	confFound  bool
	confErr    error
	propagates bool   // jobs get the submitting shell's MEMLOCK
	decidedBy  string // the setting (or default) that decides it
	unit       sysfs.SystemdSetting
	unitSet    bool // slurmd.service sets LimitMEMLOCK=
	unitFound  bool // slurmd.service exists
}

// appContainerKinds are the container kinds with no init and no logins,
// as sysfs.Container names them. System containers (lxc, systemd-nspawn)
// run an init and pam logins, so limits.conf matters there.
var appContainerKinds = map[string]bool{"docker": true, "podman": true, "kubepods": true, "containerd": true, "libpod": true, "oci": true}

// podServiceAccountDirs are where kubelet mounts a pod's service account.
var podServiceAccountDirs = []string{"/var/run/secrets/kubernetes.io/serviceaccount", "/run/secrets/kubernetes.io/serviceaccount"}

// initNames are the PID 1 programs of a system that runs logins. Anything
// else as PID 1 (an application, tini, dumb-init) is a container's.
var initNames = map[string]bool{"systemd": true, "init": true, "runit": true, "s6-svscan": true, "openrc-init": true, "upstart": true}

// memlockContextOf finds how this process was started and, on a Slurm
// node, reads slurm.conf and slurmd.service.
func memlockContextOf(h *sysfs.Host, rootView bool) (memlockContext, []string, map[string]any) {
	mc := memlockContext{container: h.Container()}
	kind, _, _ := strings.Cut(mc.container, ":")
	mc.app = appContainerKinds[kind]
	if mc.container == "" {
		// kubelet mounts the pod's service account into every container
		// (unless automountServiceAccountToken: false), whatever PID 1 is
		// (a pod with hostPID sees the host's init as PID 1).
		for _, sa := range podServiceAccountDirs {
			if ok, _ := h.Exists(sa); ok {
				mc.container, mc.app = "kubepods: "+sa+" exists", true
				break
			}
		}
	}
	if mc.container == "" {
		// A Kubernetes pod with its own cgroup namespace carries no mark
		// sysfs.Container knows; its PID 1 is the application (or tini),
		// never an init, so there are no logins either.
		if comm, err := h.ReadAttr("/proc/1/comm"); err == nil && !initNames[strings.TrimSpace(comm)] {
			mc.container = fmt.Sprintf("PID 1 is %s, not an init: /proc/1/comm says so", strings.TrimSpace(comm))
			mc.app = true
		}
	}
	cg, _ := h.SelfCgroup()
	s := &slurmMemlock{running: strings.Contains(cg, "slurm"), cgroup: cg}
	s.conf, s.confFound, s.confErr = h.SlurmConfig()
	s.unit, s.unitSet, s.unitFound, _ = h.UnitSetting("slurmd.service", "Service", "LimitMEMLOCK")
	if !s.running && !s.confFound && !s.unitFound {
		return mc, nil, nil
	}
	mc.slurm = s
	ev := map[string]any{"running_under_slurmd": s.running}
	var details []string
	switch {
	case !s.confFound:
		details = append(details, "Slurm: no slurm.conf in "+strings.Join(sysfs.SlurmConfPaths, ", ")+": whether MEMLOCK propagates from the submitting shell is unknown")
	case s.confErr != nil:
		details = append(details, fmt.Sprintf("Slurm: %s could not be read: %v", s.conf.File, s.confErr))
	default:
		s.propagates, s.decidedBy = s.conf.PropagatesMemlock()
		ev["slurm_conf"], ev["propagates_memlock"], ev["decided_by"] = s.conf.File, s.propagates, s.decidedBy
		if s.propagates {
			line := "Slurm: MEMLOCK propagates, so a job gets the limit of the shell it was submitted from (at most slurmd's hard limit): " + s.decidedBy
			if !s.running && (!rootView || mc.app) {
				// Login nodes with an unlimited shell make this work; it
				// is judged in a job, where the limit shows, or by an
				// exempt process for the jobs (judgeJobMemlock).
				line += " — reported, not judged"
			}
			details = append(details, line)
		} else {
			details = append(details, "Slurm: MEMLOCK does not propagate, so a job gets slurmd's own limit: "+s.decidedBy)
		}
		for _, inc := range s.conf.Includes {
			details = append(details, fmt.Sprintf("Slurm: %s includes %s, which is not read here", s.conf.File, inc))
		}
	}
	switch {
	case s.unitSet:
		ev["slurmd_limit_memlock"] = s.unit.Value
		details = append(details, fmt.Sprintf("Slurm: slurmd.service sets LimitMEMLOCK=%s (%s:%d)", s.unit.Value, s.unit.File, s.unit.Line))
	case s.unitFound:
		details = append(details, "Slurm: slurmd.service sets no LimitMEMLOCK: slurmd, and so its jobs, get systemd's default (DefaultLimitMEMLOCK, else the built-in 64 KiB or 8 MiB)")
	}
	return mc, details, ev
}

// slurmMemlockFix is the Slurm remedy for this node: the slurm.conf line
// that stops MEMLOCK from propagating, exactly as it must be written, and
// slurmd's own limit.
func slurmMemlockFix(s *slurmMemlock) string {
	unit := "`LimitMEMLOCK=infinity` in slurmd.service ([Service] section, `systemctl edit slurmd`), then `systemctl restart slurmd`"
	switch {
	case s.unitSet:
		unit += fmt.Sprintf(" (now LimitMEMLOCK=%s at %s:%d)", s.unit.Value, s.unit.File, s.unit.Line)
	case s.unitFound:
		unit += " (now slurmd.service sets none, so slurmd gets systemd's default)"
	}
	same := " — slurm.conf must be the same on every node, login nodes included: the submitting commands and slurmd both read it — then `scontrol reconfigure`"
	switch {
	case !s.confFound || s.confErr != nil:
		return "Slurm: a job gets slurmd's limit and, unless slurm.conf keeps MEMLOCK from propagating, the limit of the shell it was submitted from: " + unit +
			"; and `PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf" + same + "."
	case !s.propagates:
		return "Slurm: a job gets slurmd's own limit (" + s.decidedBy + " keeps MEMLOCK from propagating): set " + unit + "."
	}
	c, change := s.conf, ""
	switch {
	case c.Except.Set() && c.Except.Value == "NONE":
		change = fmt.Sprintf("in %s replace line %d (`PropagateResourceLimitsExcept=NONE`) with `PropagateResourceLimitsExcept=MEMLOCK`", c.File, c.Except.Line)
	case c.Except.Set():
		change = fmt.Sprintf("in %s change line %d to `PropagateResourceLimitsExcept=%s,MEMLOCK`", c.File, c.Except.Line, c.Except.Value)
	case c.Propagate.Set() && c.Propagate.Value == "ALL":
		change = fmt.Sprintf("in %s replace line %d (`PropagateResourceLimits=ALL`) with `PropagateResourceLimitsExcept=MEMLOCK`", c.File, c.Propagate.Line)
	case c.Propagate.Set():
		change = fmt.Sprintf("in %s remove MEMLOCK from line %d (`PropagateResourceLimits=%s`)", c.File, c.Propagate.Line, c.Propagate.Value)
	default:
		change = "add `PropagateResourceLimitsExcept=MEMLOCK` to " + c.File
	}
	return "Slurm: a job gets slurmd's limit and, because MEMLOCK propagates (" + s.decidedBy + "), the limit of the shell it was submitted from: " +
		change + same + "; and set " + unit + "."
}

// memlockRemedy orders the remedy by how this process was started: the
// container's or Slurm's own fix first, then why the configuration did not
// reach it, then the other ways a process gets its limit. An application
// container gets no login or systemd advice: neither applies inside it.
func memlockRemedy(mc memlockContext, why string) string {
	var out []string
	if mc.app {
		out = append(out, containerMemlockFix)
	}
	running := mc.slurm != nil && mc.slurm.running
	if running {
		out = append(out, slurmMemlockFix(mc.slurm))
	}
	if why != "" {
		out = append(out, why)
	}
	if mc.app {
		return strings.Join(out, "\n")
	}
	slurmLine := memlockSlurm
	switch {
	case running:
		slurmLine = "" // Slurm's fix leads already
	case mc.slurm != nil:
		slurmLine = "- " + slurmMemlockFix(mc.slurm)
	}
	return raiseMemlockFix(out, slurmLine)
}

// raiseMemlockFix is the one memlock remedy: the lines that lead it (the
// fix for how this process or its jobs start), then every place a limit is
// raised — logins, services, Slurm's line unless a lead line is Slurm's
// already ("" then), containers.
func raiseMemlockFix(lead []string, slurm string) string {
	logins := memlockLogins
	if slices.ContainsFunc(lead, func(l string) bool { return strings.Contains(l, memlockRootClause) }) {
		logins = memlockLoginsStar + ";" // a lead line said root's lines already: once is enough
	}
	out := append(append([]string(nil), lead...), "Raise the limit where the jobs start:", logins, memlockServices)
	if slurm != "" {
		out = append(out, slurm)
	}
	return strings.Join(append(out, memlockContainers), "\n")
}

// judgeOwnMemlock judges this process's own limit: CAP_IPC_LOCK or a soft
// limit at the threshold pass; below it, the hint and the remedy say why
// and how (not in an application container, whose runtime sets it).
func judgeOwnMemlock(h *sysfs.Host, lim sysfs.Rlimit, threshold uint64, hasCap bool, capErr error, mc memlockContext, pam pamMemlock, ev map[string]any) (r Result, details []string) {
	slots := Slots{"soft": sysfs.FormatBytes(lim.Soft), "min": sysfs.FormatBytes(threshold)}
	switch {
	case hasCap:
		return memlockCapHeld.result("", slots), nil
	case lim.Soft == sysfs.Unlimited:
		return memlockUnlimited.result("", slots), nil
	case lim.Soft >= threshold:
		return memlockEnough.result("", slots), nil
	case capErr != nil:
		return memlockCapUnreadable.result("", slots.with("cause", capErr.Error())), nil
	}
	if lim.Hard != lim.Soft && (lim.Hard == sysfs.Unlimited || lim.Hard >= threshold) {
		details = append(details, fmt.Sprintf("the hard limit (%s) allows more: `ulimit -l unlimited` (or %s) in the job's shell raises the soft limit without root",
			sysfs.FormatBytes(lim.Hard), sysfs.FormatBytes(lim.Hard)))
	}
	why := ""
	if !mc.app {
		var whyEv map[string]any
		why, whyEv = whyNotConfigured(h, pam, threshold)
		ev["why_lower"] = whyEv
	}
	f := memlockBelow
	switch {
	case mc.app:
		f = memlockBelowContainer
	case mc.slurm != nil && mc.slurm.running:
		f = memlockBelowSlurm
	}
	r = f.result("", slots.with("remedy", memlockRemedy(mc, why)))
	return r, details
}

// limits.memlock's flag: the limit that passes without CAP_IPC_LOCK.
func init() {
	declareKnob(18, func(fs *pflag.FlagSet, o *Options) {
		fs.Var(newSizeFlag(&o.MinMemlock, "64MiB"), "min-memlock", "limits.memlock: smallest RLIMIT_MEMLOCK that passes without CAP_IPC_LOCK")
	}, nil)
}
