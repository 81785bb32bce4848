package checks

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// DefaultMinMemlock is the RLIMIT_MEMLOCK below which registration of an
// ordinary working set fails (--min-memlock).
const DefaultMinMemlock = 64 << 20

const memlockFix = "Raise the limit where the jobs start:\n" +
	"- logins and batch jobs (pam_limits): in /etc/security/limits.conf (or a file in /etc/security/limits.d/) put `* soft memlock unlimited` and `* hard memlock unlimited`, then log in again; " +
	"`*` lines never apply to root (limits.conf(5)): for root add `root soft memlock unlimited` / `root hard memlock unlimited`;\n" +
	"- systemd services: `LimitMEMLOCK=infinity` in the unit's [Service] section (`systemctl edit <unit>`), then restart the unit; or DefaultLimitMEMLOCK=infinity in /etc/systemd/system.conf, " +
	"then `systemctl daemon-reexec` and restart the unit;\n" +
	"- Slurm: jobs inherit slurmd's limit: `LimitMEMLOCK=infinity` in slurmd.service (`systemctl edit slurmd`), then restart slurmd;\n" +
	"- containers: `docker run --ulimit memlock=-1:-1`, or grant the capability (`--cap-add IPC_LOCK`; Kubernetes `securityContext.capabilities.add: [IPC_LOCK]`)."

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
				"DefaultLimitMEMLOCK is reported, not judged (services then get systemd's built-in default, 8 MiB since systemd 251, and a unit that " +
				"runs RDMA sets LimitMEMLOCK= itself). When the configuration already allows enough but this process has less, it says why that can be " +
				"(`*` lines never apply to root; a systemd unit, a container, slurmd, or a session opened before the change).",
			Why: "ibv_reg_mr pins the pages it registers; the kernel (ib_umem_get) refuses with ENOMEM once the pinned pages would pass RLIMIT_MEMLOCK, " +
				"unless the process has CAP_IPC_LOCK. The kernel default (64 KiB before Linux 5.16, 8 MiB since) is far too small for RDMA buffers, " +
				"so MPI, NCCL and storage clients fail at start-up with \"Cannot allocate memory\".",
			Failures: []Failure{
				{report.Fail, "RLIMIT_MEMLOCK below --min-memlock and no CAP_IPC_LOCK: memory registration fails with ENOMEM", memlockFix},
				{report.Warn, "the default users' logins get (limits.conf / limits.d) is below the threshold or not set, or systemd's DefaultLimitMEMLOCK is set below the threshold", memlockFix},
				{report.Error, "/proc/self/limits or /proc/self/status could not be read or parsed", memlockByHand},
			},
		},
		Run: runLimitsMemlock,
	})
}

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
		r := errorf("could not read RLIMIT_MEMLOCK: %v", err)
		r.Observed = "RLIMIT_MEMLOCK unknown"
		r.Expected = "a readable /proc/self/limits"
		r.Remedy = memlockByHand
		return r
	}
	caps, capErr := h.EffectiveCaps()
	hasCap := capErr == nil && caps&(1<<sysfs.CapIPCLock) != 0
	capText := "no"
	switch {
	case capErr != nil:
		capText = "unknown"
	case hasCap:
		capText = "yes"
	}
	ev := map[string]any{
		"soft": limitJSON(lim.Soft), "hard": limitJSON(lim.Hard), "min_bytes": limitJSON(threshold), "cap_ipc_lock": hasCap,
	}
	observed := fmt.Sprintf("soft %s, hard %s, CAP_IPC_LOCK %s", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(lim.Hard), capText)
	expected := fmt.Sprintf("soft limit unlimited or ≥ %s, or CAP_IPC_LOCK", sysfs.FormatBytes(threshold))
	details := []string{
		fmt.Sprintf("this process: RLIMIT_MEMLOCK soft %s, hard %s (%s)", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(lim.Hard), h.Display(sysfs.ProcSelfLimits)),
	}
	if capErr != nil {
		details = append(details, fmt.Sprintf("CAP_IPC_LOCK unknown: %v", capErr))
		ev["cap_ipc_lock"] = nil
	} else {
		details = append(details, fmt.Sprintf("CAP_IPC_LOCK: %s (CapEff %016x)", capText, caps))
	}

	users, userDetails, userLow, pam := userMemlockDefaults(h, threshold)
	details = append(details, userDetails...)
	ev["users_default"] = users

	var r Result
	switch {
	case hasCap:
		r = pass(fmt.Sprintf("CAP_IPC_LOCK held: memory registration is not bound by RLIMIT_MEMLOCK (soft %s)", sysfs.FormatBytes(lim.Soft)))
	case lim.Soft == sysfs.Unlimited:
		r = pass("RLIMIT_MEMLOCK is unlimited")
	case lim.Soft >= threshold:
		r = pass(fmt.Sprintf("RLIMIT_MEMLOCK %s ≥ %s", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(threshold)))
	case capErr != nil:
		r = errorf("RLIMIT_MEMLOCK %s is below %s and CAP_IPC_LOCK could not be read (%v)", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(threshold), capErr)
		r.Remedy = memlockByHand
	default:
		r = fail(fmt.Sprintf("RLIMIT_MEMLOCK %s is below %s and there is no CAP_IPC_LOCK: ibv_reg_mr fails with ENOMEM (\"Cannot allocate memory\") once %s is pinned",
			sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(threshold), sysfs.FormatBytes(lim.Soft)))
		if lim.Hard != lim.Soft && (lim.Hard == sysfs.Unlimited || lim.Hard >= threshold) {
			details = append(details, fmt.Sprintf("the hard limit (%s) allows more: `ulimit -l unlimited` (or %s) in the job's shell raises the soft limit without root",
				sysfs.FormatBytes(lim.Hard), sysfs.FormatBytes(lim.Hard)))
		}
		why, whyEv := whyNotConfigured(h, pam, threshold)
		ev["why_lower"] = whyEv
		r.Remedy = memlockFix
		if why != "" {
			r.Remedy = why + "\n" + memlockFix
		}
	}
	if r.Status == report.Pass && len(userLow) > 0 {
		r = warn(fmt.Sprintf("%s; but users' jobs get less: %s", r.Summary, strings.Join(userLow, "; ")))
		r.Remedy = memlockFix
	}
	r.Observed, r.Expected, r.Details, r.Evidence = observed, expected, details, ev
	return r
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
		out = append(out, fmt.Sprintf("This process runs as root, and the `*` memlock line at %s (soft %s) does not reach it: `*` lines never apply to root (limits.conf(5)): "+
			"for root add `root soft memlock unlimited` / `root hard memlock unlimited`.", pam.starAt, sysfs.FormatBytes(pam.star)))
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
		starter = fmt.Sprintf("it was started by slurmd (cgroup %s): jobs inherit slurmd's limit, so set `LimitMEMLOCK=infinity` in slurmd.service and restart slurmd", cg)
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
func userMemlockDefaults(h *sysfs.Host, threshold uint64) (map[string]any, []string, []string, pamMemlock) {
	var pm pamMemlock
	ev := map[string]any{}
	var details, low []string
	entries, read, probs := h.MemlockEntries()
	for _, p := range probs {
		details = append(details, "users' default: "+p.Error())
	}
	var soft, hard *sysfs.LimitsEntry
	var others []string
	for i := range entries {
		e := &entries[i]
		if e.Domain == "root" && (e.Type == "soft" || e.Type == "-") {
			if v, err := sysfs.ParseLimitsMemlock(e.Value); err == nil {
				pm.root, pm.rootAt, pm.hasRoot = v, fmt.Sprintf("%s:%d", e.File, e.Line), true
			}
		}
		if e.Domain != "*" {
			others = append(others, fmt.Sprintf("%s %s %s (%s:%d)", e.Domain, e.Type, e.Value, e.File, e.Line))
			continue
		}
		switch e.Type {
		case "soft":
			soft = e
		case "hard":
			hard = e
		case "-":
			soft, hard = e, e
		}
	}
	pam := map[string]any{"files_read": nonNil(read)}
	if len(others) > 0 {
		pam["other_domains"] = others
	}
	switch {
	case soft != nil:
		v, err := sysfs.ParseLimitsMemlock(soft.Value)
		if err != nil {
			details = append(details, fmt.Sprintf("users' default: %s:%d: %v", soft.File, soft.Line, err))
			break
		}
		pam["soft"] = limitJSON(v)
		pam["source"] = fmt.Sprintf("%s:%d", soft.File, soft.Line)
		pm.star, pm.starAt, pm.hasStar = v, fmt.Sprintf("%s:%d", soft.File, soft.Line), true
		line := fmt.Sprintf("users' sessions (pam_limits): soft memlock %s from %s:%d", sysfs.FormatBytes(v), soft.File, soft.Line)
		if hard != nil {
			if hv, err := sysfs.ParseLimitsMemlock(hard.Value); err == nil {
				pam["hard"] = limitJSON(hv)
				line += fmt.Sprintf(", hard %s", sysfs.FormatBytes(hv))
			}
		}
		details = append(details, line)
		if v != sysfs.Unlimited && v < threshold {
			low = append(low, fmt.Sprintf("`* soft memlock` is %s in %s:%d", sysfs.FormatBytes(v), soft.File, soft.Line))
		}
	case len(others) > 0:
		details = append(details, "users' sessions (pam_limits): no `*` memlock line; only these users/groups are raised: "+strings.Join(others, ", "))
	default:
		details = append(details, "users' sessions (pam_limits): no memlock line in limits.conf or limits.d — sessions keep the built-in default (8 MiB since Linux 5.16, 64 KiB before)")
		low = append(low, "no memlock default is configured for logins (limits.conf/limits.d), so they keep the built-in 8 MiB or 64 KiB")
	}
	ev["pam_limits"] = pam

	sd, found, sprobs := h.SystemdDefaultMemlock()
	for _, p := range sprobs {
		details = append(details, "systemd default: "+p.Error())
	}
	if found {
		l, err := sysfs.ParseSystemdLimit(sd.Value)
		if err != nil {
			details = append(details, fmt.Sprintf("systemd DefaultLimitMEMLOCK=%s (%s:%d): %v", sd.Value, sd.File, sd.Line, err))
		} else {
			ev["systemd_default"] = map[string]any{"soft": limitJSON(l.Soft), "hard": limitJSON(l.Hard), "source": fmt.Sprintf("%s:%d", sd.File, sd.Line)}
			details = append(details, fmt.Sprintf("systemd services: DefaultLimitMEMLOCK=%s (%s:%d)", sd.Value, sd.File, sd.Line))
			if l.Soft != sysfs.Unlimited && l.Soft < threshold {
				low = append(low, fmt.Sprintf("systemd DefaultLimitMEMLOCK=%s (%s:%d)", sd.Value, sd.File, sd.Line))
			}
		}
	} else {
		details = append(details, "systemd services: DefaultLimitMEMLOCK not set; units without LimitMEMLOCK= get systemd's built-in default "+
			"(8 MiB since systemd 251): reported, not judged — a unit that runs RDMA sets LimitMEMLOCK= itself")
	}
	return ev, details, low, pm
}
