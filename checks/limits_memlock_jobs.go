package checks

import (
	"fmt"
	"path"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// A process with CAP_IPC_LOCK (root, the shipped units) is exempt from
// RLIMIT_MEMLOCK, so its own limit says nothing about the jobs the node
// runs. This file works out what a job gets instead: under Slurm, slurmd's
// limit and slurm.conf's propagation; otherwise what pam_limits gives an
// ordinary user's login, falling back to the limit of the service that
// opened the session.

// limitFrom is a limit with where it came from ("path:line", a process's
// /proc/PID/limits, or a built-in default with the assumption made).
type limitFrom struct {
	lim sysfs.Rlimit
	src string
}

// kernelMemlockDefault is the RLIMIT_MEMLOCK the kernel gives PID 1:
// 64 KiB before Linux 5.16, 8 MiB since (MLOCK_LIMIT was raised in 5.16).
// ok is false when the release is unknown.
func kernelMemlockDefault(h *sysfs.Host) (uint64, string, bool) {
	rel, err := h.KernelRelease()
	if err != nil {
		return 0, "", false
	}
	kv, err := sysfs.ParseKernelRelease(rel)
	if err != nil {
		return 0, "", false
	}
	if kv.Less(sysfs.KernelVersion{Major: 5, Minor: 16}) {
		return 64 << 10, "kernel " + rel, true
	}
	return 8 << 20, "kernel " + rel, true
}

// serviceDefault is what a systemd service without LimitMEMLOCK= gets:
// DefaultLimitMEMLOCK= when set; else systemd 253 and later raise the
// kernel's boot default to at least 8 MiB, and older ones pass it on.
func serviceDefault(h *sysfs.Host) limitFrom {
	if sd, found, _ := h.SystemdDefaultMemlock(); found {
		if l, err := sysfs.ParseSystemdLimit(sd.Value); err == nil {
			return limitFrom{l, fmt.Sprintf("DefaultLimitMEMLOCK=%s (%s:%d)", sd.Value, sd.File, sd.Line)}
		}
	}
	kdef, kfrom, kok := kernelMemlockDefault(h)
	v, vfrom, vok := h.SystemdVersion()
	at := func(b uint64, why string) limitFrom {
		return limitFrom{sysfs.Rlimit{Soft: b, Hard: b}, "systemd's built-in default, DefaultLimitMEMLOCK unset: " + why}
	}
	switch {
	case vok && v >= 253:
		return at(max(kdef, 8<<20), fmt.Sprintf("systemd %d (%s) gives services at least 8 MiB", v, vfrom))
	case vok && kok:
		return at(kdef, fmt.Sprintf("systemd %d (%s) passes on the %s boot default, %s", v, vfrom, kfrom, sysfs.FormatBytes(kdef)))
	case kok && kdef >= 8<<20:
		return at(kdef, fmt.Sprintf("systemd's version not found; 8 MiB whichever it is, on %s", kfrom))
	case kok:
		return at(kdef, fmt.Sprintf("systemd's version not found; assumed older than 253, which passes on the %s boot default, 64 KiB (253 and later give 8 MiB)", kfrom))
	}
	return at(64<<10, "neither systemd's version nor the kernel's found; assumed the oldest default, 64 KiB")
}

// unitMemlock is the limit systemd gives the first of units that exists:
// its LimitMEMLOCK= (drop-ins included), else the services' default.
func unitMemlock(h *sysfs.Host, units ...string) (limitFrom, string, bool) {
	for _, u := range units {
		s, set, found, _ := h.UnitSetting(u, "Service", "LimitMEMLOCK")
		if !found {
			continue
		}
		if set {
			if l, err := sysfs.ParseSystemdLimit(s.Value); err == nil {
				return limitFrom{l, fmt.Sprintf("%s: LimitMEMLOCK=%s (%s:%d)", u, s.Value, s.File, s.Line)}, u, true
			}
		}
		d := serviceDefault(h)
		d.src = u + " sets no LimitMEMLOCK: " + d.src
		return d, u, true
	}
	return limitFrom{}, "", false
}

// loginMemlock is what an ordinary user's login gets: the memlock lines of
// limits.conf and limits.d that apply to a user with the first ordinary
// UID and in no named group (pam_limits' precedence), the rest from the
// service that opened the session (sshd), the soft limit clamped to the
// hard one as pam_limits does. raised lists the user and group lines that
// give some users at least min.
func loginMemlock(h *sysfs.Host, min uint64) (lf limitFrom, raised []string) {
	entries, _, _ := h.MemlockEntries()
	uid, uidFrom := h.OrdinaryUID()
	pl := sysfs.PamMemlockFor(entries, sysfs.PamUser{UID: uid, GID: uid})
	starter, unit, ok := unitMemlock(h, "ssh.service", "sshd.service")
	if !ok {
		starter = serviceDefault(h)
		unit = "the service that opened the session"
	}
	at := func(e *sysfs.LimitsEntry) string { return fmt.Sprintf("%s:%d", e.File, e.Line) }
	lf = limitFrom{lim: starter.lim}
	var srcs []string
	if pl.Stop != nil {
		srcs = append(srcs, fmt.Sprintf("the \"%s -\" line at %s stops pam_limits, so a login keeps %s's limit (%s)", pl.Stop.Domain, at(pl.Stop), unit, starter.src))
	} else {
		if pl.SoftAt != nil {
			lf.lim.Soft = pl.Soft
			srcs = append(srcs, "soft "+sysfs.FormatBytes(pl.Soft)+" from "+at(pl.SoftAt))
		}
		if pl.HardAt != nil {
			lf.lim.Hard = pl.Hard
			srcs = append(srcs, "hard "+sysfs.FormatBytes(pl.Hard)+" from "+at(pl.HardAt))
		}
		if pl.SoftAt == nil || pl.HardAt == nil {
			srcs = append(srcs, fmt.Sprintf("no line for the rest, kept from %s (%s)", unit, starter.src))
		}
	}
	if lf.lim.Soft > lf.lim.Hard {
		lf.lim.Soft = lf.lim.Hard
		srcs = append(srcs, "the soft limit lowered to the hard one, as pam_limits does")
	}
	lf.src = fmt.Sprintf("pam_limits for UID %d (%s), in no named group: %s", uid, uidFrom, strings.Join(srcs, "; "))
	for i := range entries {
		e := &entries[i]
		if e.NoLimits || e.Domain == "*" || (e.Type != "soft" && e.Type != "-") {
			continue
		}
		if v, err := sysfs.ParseLimitsMemlock(e.Value); err == nil && enoughMemlock(v, min) {
			raised = append(raised, fmt.Sprintf("%s gets %s (%s)", e.Domain, sysfs.FormatBytes(v), at(e)))
		}
	}
	return lf, raised
}

func enoughMemlock(v, min uint64) bool { return v == sysfs.Unlimited || v >= min }

// slurmdMemlock is slurmd's own limit: the running slurmd's
// /proc/PID/limits, else what slurmd.service would give it. found is false
// when this node runs no slurmd and has no slurmd.service.
type slurmdMemlock struct {
	limitFrom
	pid     int
	found   bool
	err     error
	confArg string // the slurm.conf the running slurmd names (-f, SLURM_CONF)
}

func findSlurmd(h *sysfs.Host) slurmdMemlock {
	pids, _ := h.ProcessesNamed("slurmd")
	if len(pids) > 0 {
		s := slurmdMemlock{pid: pids[0], found: true}
		s.confArg = h.DaemonConf(s.pid, "SLURM_CONF")
		s.lim, s.err = h.ProcessMemlock(s.pid)
		s.src = fmt.Sprintf("the running slurmd (PID %d): %s", s.pid, h.Display(sysfs.ProcLimitsPath(s.pid)))
		return s
	}
	if lf, _, ok := unitMemlock(h, "slurmd.service"); ok {
		return slurmdMemlock{limitFrom: limitFrom{lf.lim, "slurmd is not running; when slurmd.service starts it: " + lf.src}, found: true}
	}
	return slurmdMemlock{}
}

// jobVerdict is what a job gets, judged.
type jobVerdict struct {
	status  report.Status
	finding *Finding // what a job gets and which source decided it; nil on a pass
	slots   Slots
	details []string
	ev      map[string]any
}

// judgeJobMemlock judges the limit a job gets on this node, for a process
// that is itself exempt. exempt says why ("CAP_IPC_LOCK held").
func judgeJobMemlock(h *sysfs.Host, threshold uint64, exempt string) jobVerdict {
	login, raised := loginMemlock(h, threshold)
	sd := findSlurmd(h)
	if sd.found {
		return judgeSlurmJob(h, sd, login, threshold, exempt)
	}
	v := jobVerdict{ev: map[string]any{"who": "ordinary users' logins", "soft": limitJSON(login.lim.Soft), "hard": limitJSON(login.lim.Hard), "decided_by": login.src}}
	v.details = []string{"jobs: an ordinary user's login gets soft " + sysfs.FormatBytes(login.lim.Soft) + ", hard " + sysfs.FormatBytes(login.lim.Hard) + " — " + login.src}
	switch {
	case enoughMemlock(login.lim.Soft, threshold):
		v.status = report.Pass
	case len(raised) > 0:
		// Only some users or groups are meant to run RDMA here.
		v.status = report.Pass
		v.details = append(v.details, "jobs: only these users/groups are raised: "+strings.Join(raised, ", "))
		v.ev["raised"] = raised
	default:
		v.status, v.finding = report.Fail, memlockLoginLow
		v.slots = Slots{"exempt": exempt, "soft": sysfs.FormatBytes(login.lim.Soft), "min": sysfs.FormatBytes(threshold), "source": login.src}
	}
	return v
}

// judgeSlurmJob: a job started by slurmd gets slurmd's limit; when
// MEMLOCK propagates, slurmstepd sets the submitting shell's soft limit
// instead, lowered to slurmd's hard one (_set_limit in slurmstepd's
// ulimits.c). The shell is on another host: this node's login limit
// stands in for it, and a low one only warns.
func judgeSlurmJob(h *sysfs.Host, sd slurmdMemlock, login limitFrom, threshold uint64, exempt string) jobVerdict {
	paths := sysfs.SlurmConfPaths
	if path.IsAbs(sd.confArg) {
		paths = append([]string{sd.confArg}, paths...)
	}
	conf, confFound, confErr := h.SlurmConfigFrom(paths...)
	v := jobVerdict{ev: map[string]any{"who": "jobs started by slurmd"}}
	if sd.err != nil {
		v.status, v.finding = report.Error, memlockSlurmdUnknown
		v.slots = Slots{"exempt": exempt, "cause": sd.err.Error()}
		return v
	}
	lim := sd.lim
	v.ev["slurmd"] = map[string]any{"soft": limitJSON(lim.Soft), "hard": limitJSON(lim.Hard), "source": sd.src}
	v.details = append(v.details, fmt.Sprintf("jobs: slurmd's own limit is soft %s, hard %s — %s", sysfs.FormatBytes(lim.Soft), sysfs.FormatBytes(lim.Hard), sd.src))
	prop, decided := true, ""
	switch {
	case confFound && confErr == nil:
		prop, decided = conf.PropagatesMemlock()
	case confFound:
		decided = fmt.Sprintf("%s could not be read (%v)", conf.File, confErr)
	default:
		decided = "no slurm.conf found (" + strings.Join(paths, ", ") + ")"
	}
	v.ev["propagates_memlock"], v.ev["decided_by"] = prop, decided
	low := func(f *Finding) jobVerdict {
		v.status, v.finding = report.Fail, f
		v.slots = Slots{"exempt": exempt, "soft": sysfs.FormatBytes(lim.Soft), "hard": sysfs.FormatBytes(lim.Hard),
			"min": sysfs.FormatBytes(threshold), "source": sd.src, "decided_by": decided}
		return v
	}
	if !prop && confFound && confErr == nil {
		v.ev["soft"], v.ev["hard"] = limitJSON(lim.Soft), limitJSON(lim.Hard)
		if !enoughMemlock(lim.Soft, threshold) {
			return low(memlockSlurmdLow)
		}
		v.status = report.Pass
		v.details = append(v.details, "jobs: MEMLOCK does not propagate, so a job gets slurmd's limit: "+decided)
		return v
	}
	// The submitting shell's soft limit, at most slurmd's hard one.
	if !enoughMemlock(lim.Hard, threshold) {
		return low(memlockSlurmdHardLow)
	}
	job := min(login.lim.Soft, lim.Hard)
	v.ev["soft"], v.ev["hard"] = limitJSON(job), limitJSON(lim.Hard)
	v.details = append(v.details, fmt.Sprintf("jobs: MEMLOCK propagates (%s): a job gets the soft limit of the shell it was submitted from, up to slurmd's hard %s; "+
		"a login like this node's gets %s (%s)", decided, sysfs.FormatBytes(lim.Hard), sysfs.FormatBytes(login.lim.Soft), login.src))
	v.status = report.Pass
	if !enoughMemlock(job, threshold) || !(confFound && confErr == nil) && !enoughMemlock(lim.Soft, threshold) {
		v.status, v.finding = report.Warn, memlockSlurmShellLow
		v.slots = Slots{"exempt": exempt, "decided_by": decided, "soft": sysfs.FormatBytes(job), "source": login.src, "min": sysfs.FormatBytes(threshold)}
	}
	return v
}

// judgeJobsInto turns the passing result r of an exempt process into the
// verdict on what its jobs get, with the remedy of whatever starts them.
func judgeJobsInto(h *sysfs.Host, r Result, mc memlockContext, threshold uint64) (Result, []string, map[string]any) {
	jv := judgeJobMemlock(h, threshold, r.Summary)
	if jv.status == report.Pass {
		return r, jv.details, jv.ev
	}
	if jv.finding.Fix != "{remedy}" {
		return jv.finding.result("", jv.slots), jv.details, jv.ev
	}
	// Jobs slurmd starts lead with Slurm's fix; others get its line among the rest.
	var lead []string
	slurmLine := memlockSlurm
	switch slurm := jv.ev["who"] == "jobs started by slurmd"; {
	case slurm && mc.slurm != nil:
		lead, slurmLine = []string{slurmMemlockFix(mc.slurm)}, ""
	case slurm:
		lead, slurmLine = []string{strings.TrimPrefix(memlockSlurm, "- ")}, ""
	}
	return jv.finding.result("", jv.slots.with("remedy", raiseMemlockFix(lead, slurmLine))), jv.details, jv.ev
}
