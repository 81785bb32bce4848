package checks

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// DefaultMinMemlock is the RLIMIT_MEMLOCK below which registration of an
// ordinary working set fails (--min-memlock).
const DefaultMinMemlock = 64 << 20

const memlockFix = "Raise the limit where the jobs start:\n" +
	"- logins and batch jobs (pam_limits): in /etc/security/limits.conf (or a file in /etc/security/limits.d/) put `* soft memlock unlimited` and `* hard memlock unlimited`, then log in again;\n" +
	"- systemd services: `LimitMEMLOCK=infinity` in the unit's [Service] section (`systemctl edit <unit>`), or DefaultLimitMEMLOCK=infinity in /etc/systemd/system.conf;\n" +
	"- containers: `docker run --ulimit memlock=-1:-1`, or grant the capability (`--cap-add IPC_LOCK`; Kubernetes `securityContext.capabilities.add: [IPC_LOCK]`)."

func init() {
	register(Check{
		ID: "limits.memlock", Code: 18, Level: 1,
		Title: "the locked-memory limit lets applications register memory",
		Explain: Explanation{
			Judges: "RLIMIT_MEMLOCK of the running process (\"Max locked memory\" in /proc/self/limits) and whether it holds CAP_IPC_LOCK " +
				"(bit 14 of CapEff in /proc/self/status). With the capability the limit does not apply to memory registration; without it the soft " +
				"limit must be unlimited or at least --min-memlock (64 MiB). It also reads the default that users' jobs get — memlock lines of " +
				"/etc/security/limits.conf and limits.d/*.conf, systemd's DefaultLimitMEMLOCK in system.conf and its drop-ins — and warns when that is below the threshold.",
			Why: "ibv_reg_mr pins the pages it registers; the kernel (ib_umem_get) refuses with ENOMEM once the pinned pages would pass RLIMIT_MEMLOCK, " +
				"unless the process has CAP_IPC_LOCK. The kernel default (64 KiB before Linux 5.16, 8 MiB since) is far too small for RDMA buffers, " +
				"so MPI, NCCL and storage clients fail at start-up with \"Cannot allocate memory\".",
			Failures: []Failure{
				{report.Fail, "RLIMIT_MEMLOCK below --min-memlock and no CAP_IPC_LOCK: memory registration fails with ENOMEM", memlockFix},
				{report.Warn, "the default users' jobs get (limits.conf / systemd DefaultLimitMEMLOCK) is below the threshold or not set", memlockFix},
				{report.Error, "/proc/self/limits or /proc/self/status could not be read or parsed", "Run where /proc is mounted."},
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
		r.Expected = "a readable /proc/self/limits"
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

	users, userDetails, userLow := userMemlockDefaults(h, threshold)
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
	default:
		r = fail(fmt.Sprintf("RLIMIT_MEMLOCK %s is below %s and there is no CAP_IPC_LOCK: ibv_reg_mr fails with ENOMEM (\"Cannot allocate memory\") once %s is pinned",
			sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(threshold), sysfs.FormatBytes(lim.Soft)))
		if lim.Hard != lim.Soft && (lim.Hard == sysfs.Unlimited || lim.Hard >= threshold) {
			details = append(details, fmt.Sprintf("the hard limit (%s) allows more: `ulimit -l unlimited` (or %s) in the job's shell raises the soft limit without root",
				sysfs.FormatBytes(lim.Hard), sysfs.FormatBytes(lim.Hard)))
		}
		r.Remedy = memlockFix
	}
	if r.Status == report.Pass && len(userLow) > 0 {
		r = warn(fmt.Sprintf("%s; but users' jobs get less: %s", r.Summary, strings.Join(userLow, "; ")))
		r.Remedy = memlockFix
	}
	r.Observed, r.Expected, r.Details, r.Evidence = observed, expected, details, ev
	return r
}

// userMemlockDefaults reads the memlock default of users' sessions
// (pam_limits) and of systemd services, and returns the evidence, detail
// lines and the findings that fall below min.
func userMemlockDefaults(h *sysfs.Host, threshold uint64) (map[string]any, []string, []string) {
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
		details = append(details, "systemd services: DefaultLimitMEMLOCK not set; units without LimitMEMLOCK= get systemd's built-in default")
	}
	return ev, details, low
}
