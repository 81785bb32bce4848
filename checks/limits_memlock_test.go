package checks_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

func memlockHost(t *testing.T, edit func(h *sysfstest.Host), tree func(t *sysfstest.Tree)) string {
	h := sysfstest.CX5RoCE()
	if edit != nil {
		edit(&h)
	}
	tr := sysfstest.Build(h)
	if tree != nil {
		tree(tr)
	}
	return hwWrite(t, tr)
}

func TestLimitsMemlock(t *testing.T) {
	low := func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "65536", false }
	ml := func(slug string) []findingRef { return []findingRef{{"limits.memlock/" + slug, ""}} }
	runNetCases(t, "limits.memlock", []netCase{
		{name: "cx5-roce-healthy", dir: netFixture("cx5-roce-healthy"), status: report.Pass, findings: ml("cap-held")},
		{name: "cx6-ib-healthy", dir: netFixture("cx6-ib-healthy"), status: report.Pass, findings: ml("cap-held")},
		// The fixture runs as root under a `*` line that cannot reach it:
		// the remedy must say so and give root's own lines.
		{name: "memlock-64k", dir: netFixture("memlock-64k"), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("below"),
			contains: []string{"`*` lines never apply to root (limits.conf(5))", "for root add `root soft memlock unlimited` / `root hard memlock unlimited`"}},
		{name: "root with a root line: the starter is named, not the root rule", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			tr.File("/etc/security/limits.d/root.conf", "root soft memlock unlimited\nroot hard memlock unlimited\n")
			tr.File("/proc/self/cgroup", "0::/system.slice/rdma-check.service\n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("below"),
			contains: []string{"root.conf:1 already allows enough, but this process has less", "systemctl edit rdma-check.service"}},
		{name: "a user under slurmd", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			asUser(tr, 1000)
			tr.File("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("below-in-slurm-job"),
			contains: []string{"rdma.conf:2 already allows enough", "LimitMEMLOCK=infinity` in slurmd.service"}},
		// The starter is unknown: the remedy lists every place it may be.
		{name: "a user, starter unknown: every cause listed", dir: memlockHost(t, low, func(tr *sysfstest.Tree) { asUser(tr, 1000) }),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("below"),
			contains: []string{"a systemd unit, in a container, by slurmd, or in a session opened before the change"}},
		{name: "a user whose limits.d is low gets no excuse", dir: memlockHost(t, func(h *sysfstest.Host) { low(h); h.UserMemlock = "64" }, func(tr *sysfstest.Tree) { asUser(tr, 1000) }),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("below"), lacks: []string{"already allows enough", "This process runs as root"}},
		{name: "64k with CAP_IPC_LOCK passes", dir: memlockHost(t, func(h *sysfstest.Host) { low(h); h.CapIPCLock = true }, nil),
			status: report.Pass, findings: ml("cap-held"), contains: []string{"soft 64 KiB"}},
		{name: "128 MiB without the capability passes", dir: memlockHost(t, func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "134217728", false }, nil),
			status: report.Pass, findings: ml("enough"), contains: []string{"128 MiB ≥ 64 MiB"}},
		{name: "--min-memlock 32KiB lets 64 KiB pass", dir: memlockHost(t, low, nil), opts: checks.Options{MinMemlock: 32 << 10},
			status: report.Pass, findings: ml("enough")},
		{name: "hard limit higher than soft: say ulimit -l", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			tr.File("/proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                unlimited            bytes     \n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("below"), contains: []string{"ulimit -l"}},
		// Root with CAP_IPC_LOCK is exempt; what an ordinary user's login
		// gets is judged as a job's limit, with the line that sets it.
		{name: "root exempt, users' logins below the threshold fail", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, nil),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("login-low"),
			contains: []string{"an ordinary user's login gets 8 MiB", "rdma.conf:3"}},
		// No users' default: the kernel's default, named with the kernel.
		{name: "root exempt, no users' default: logins keep sshd's, systemd's default", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "none" }, nil),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("login-low"),
			contains: []string{"DefaultLimitMEMLOCK unset", "8 MiB whichever it is, on kernel 6.1.0-18-amd64"}},
		{name: "systemd default below the threshold warns", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/etc/systemd/system.conf", "[Manager]\n#DefaultLimitMEMLOCK=\nDefaultLimitMEMLOCK=8M\n")
		}), status: report.Warn, findings: ml("users-low"), contains: []string{"DefaultLimitMEMLOCK=8M", "system.conf:3"}},
		// The drop-in's value, not system.conf's, is the one reported.
		{name: "systemd drop-in raises it", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/etc/systemd/system.conf", "[Manager]\nDefaultLimitMEMLOCK=8M\n")
			tr.File("/etc/systemd/system.conf.d/rdma.conf", "[Manager]\nDefaultLimitMEMLOCK=infinity\n")
		}), status: report.Pass, findings: ml("cap-held"), contains: []string{"DefaultLimitMEMLOCK=infinity"}},
		{name: "only a group is raised", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "none" }, func(tr *sysfstest.Tree) {
			tr.File("/etc/security/limits.conf", "@rdma - memlock unlimited\n")
		}), status: report.Pass, findings: ml("cap-held"), contains: []string{"only these users/groups", "@rdma"}},
		{name: "limits file missing is an error with the path", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/limits") }),
			status: report.Error, exit: report.ExitUnknown, rootCause: "limits.memlock", findings: ml("unreadable"), contains: []string{"proc/self/limits", "no such file"}},
		{name: "binary limits file is an error", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) { tr.File("/proc/self/limits", "\x7fELF\x00\x01garbage") }),
			status: report.Error, exit: report.ExitUnknown, rootCause: "limits.memlock", findings: ml("unreadable"), contains: []string{"proc/self/limits"}},
		{name: "low limit and unreadable caps is an error", dir: memlockHost(t, low, func(tr *sysfstest.Tree) { tr.Remove("/proc/self/status") }),
			status: report.Error, exit: report.ExitUnknown, rootCause: "limits.memlock", findings: ml("cap-unreadable")},
		{name: "systemd default not set is a detail, not a warning", dir: netFixture("cx5-roce-healthy"), status: report.Pass, findings: ml("cap-held"),
			contains: []string{"DefaultLimitMEMLOCK not set", "reported, not judged"}},
	})
}

// asUser makes the fixture's process run as an ordinary user.
func asUser(tr *sysfstest.Tree, uid int) {
	st := tr.Files["/proc/self/status"]
	tr.File("/proc/self/status", strings.Replace(st, "Uid:\t0\t0\t0\t0", fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d", uid, uid, uid, uid), 1))
}

// TestLimitsMemlockContainersAndSlurm: the remedy starts with the fix of
// whatever started the process — the container runtime, or slurmd with
// the slurm.conf line it needs — and a container is not warned about login
// limits it has no logins for.
func TestLimitsMemlockContainersAndSlurm(t *testing.T) {
	low := func(h *sysfstest.Host) { h.Memlock, h.CapIPCLock = "65536", false }
	docker := func(tr *sysfstest.Tree) { tr.File("/.dockerenv", "") }
	slurmJob := func(tr *sysfstest.Tree) {
		asUser(tr, 1000)
		tr.File("/proc/self/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n")
	}
	const (
		containerFirst = "In a container the limit comes from the container runtime, not from /etc/security/limits.conf (a container has no pam_limits logins)."
		slurmFirst     = "Slurm: a job gets slurmd's limit"
	)
	ml := func(slug string) []findingRef { return []findingRef{{"limits.memlock/" + slug, ""}} }
	// The remedy's order is the point here: how it begins, and what
	// follows it, are the words the starter decides.
	cases := []struct {
		name     string
		dir      string
		status   report.Status
		findings []findingRef
		says     []string // in the summary or details
		first    string   // how the remedy begins
		remedy   []string // in the remedy, in this order
		lacks    []string // not in the remedy
		detLacks []string // not in the summary or details
	}{
		{name: "docker, low limit: the runtime's fix, no login advice", dir: memlockHost(t, low, docker), status: report.Fail, findings: ml("below-in-container"),
			says: []string{"container (docker: /.dockerenv exists)"}, first: containerFirst,
			remedy: []string{"--ulimit memlock=-1:-1", "securityContext.capabilities.add: [\"IPC_LOCK\"]"},
			lacks:  []string{"* soft memlock unlimited", "This process runs as root", "systemctl daemon-reexec", "log in again"}},
		{name: "Kubernetes pod, low limit", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			tr.File("/proc/1/cgroup", "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-1234.scope\n")
		}), status: report.Fail, findings: ml("below-in-container"), first: containerFirst, remedy: []string{"Kubernetes sets no rlimits"}, lacks: []string{"limits.d/"}},
		// The same host without the container warns about its logins;
		// inside a container there are none, so it passes.
		{name: "host without a login default fails", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "none" }, nil), status: report.Fail,
			findings: ml("login-low"), first: "Raise the limit where the jobs start:"},
		{name: "container without a login default passes", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, docker), status: report.Pass,
			findings: ml("cap-held"), detLacks: []string{"users' jobs get less"}},
		// A pod with its own cgroup namespace has no container mark; its
		// PID 1 is no init, so there are no logins to warn about.
		{name: "pod known by its PID 1, low login default", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, func(tr *sysfstest.Tree) {
			tr.File("/proc/1/comm", "tini\n")
		}), status: report.Pass, findings: ml("cap-held"), says: []string{"container (PID 1 is tini, not an init: /proc/1/comm says so)"}, detLacks: []string{"users' jobs get less"}},
		{name: "pod known by its PID 1, low limit", dir: memlockHost(t, low, func(tr *sysfstest.Tree) { tr.File("/proc/1/comm", "python3\n") }),
			status: report.Fail, findings: ml("below-in-container"), first: containerFirst, lacks: []string{"* soft memlock unlimited"}},
		{name: "a host whose PID 1 is systemd still judges logins", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, func(tr *sysfstest.Tree) {
			tr.File("/proc/1/comm", "systemd\n")
		}), status: report.Fail, findings: ml("login-low")},
		// A system container runs logins: its limits.conf counts.
		{name: "lxc system container still judges logins", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, func(tr *sysfstest.Tree) {
			tr.File("/run/systemd/container", "lxc\n")
		}), status: report.Fail, findings: ml("login-low")},
		{name: "slurm job, no slurm.conf here", dir: memlockHost(t, low, slurmJob), status: report.Fail, findings: ml("below-in-slurm-job"),
			says:   []string{"no slurm.conf in /etc/slurm/slurm.conf, /etc/slurm-llnl/slurm.conf, /run/slurm/conf/slurm.conf"},
			first:  slurmFirst + " and, unless slurm.conf keeps MEMLOCK from propagating",
			remedy: []string{"`LimitMEMLOCK=infinity` in slurmd.service", "`PropagateResourceLimitsExcept=MEMLOCK` in slurm.conf"}},
		{name: "slurm job, slurm.conf propagates by default", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			slurmJob(tr)
			tr.File("/etc/slurm/slurm.conf", "ClusterName=c\nSlurmdSpoolDir=/var/spool/slurmd\n")
		}), status: report.Fail, findings: ml("below-in-slurm-job"),
			first:  slurmFirst + " and, because MEMLOCK propagates (PropagateResourceLimits not set (Slurm's default is ALL)), the limit of the shell it was submitted from: add `PropagateResourceLimitsExcept=MEMLOCK` to ",
			remedy: []string{"etc/slurm/slurm.conf", "`LimitMEMLOCK=infinity` in slurmd.service"}},
		// The line to change, with its number and its new words.
		{name: "slurm job, an Except list without MEMLOCK", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			slurmJob(tr)
			tr.File("/etc/slurm/slurm.conf", "ClusterName=c\n# limits\nPropagateResourceLimitsExcept=NOFILE,CORE\n")
		}), status: report.Fail, findings: ml("below-in-slurm-job"), first: slurmFirst, remedy: []string{"change line 3 to `PropagateResourceLimitsExcept=NOFILE,CORE,MEMLOCK`"}},
		{name: "slurm job, PropagateResourceLimits=ALL in slurm-llnl", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			slurmJob(tr)
			tr.File("/etc/slurm-llnl/slurm.conf", "PropagateResourceLimits=ALL\n")
		}), status: report.Fail, findings: ml("below-in-slurm-job"), first: slurmFirst,
			remedy: []string{"slurm-llnl/slurm.conf replace line 1 (`PropagateResourceLimits=ALL`) with `PropagateResourceLimitsExcept=MEMLOCK`"}},
		{name: "slurm job, MEMLOCK kept back: slurmd's own limit is the fix", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			slurmJob(tr)
			tr.File("/etc/slurm/slurm.conf", "PropagateResourceLimitsExcept=MEMLOCK\n")
			tr.File("/usr/lib/systemd/system/slurmd.service", "[Unit]\nDescription=Slurm node daemon\n[Service]\nExecStart=/usr/sbin/slurmd -D\n")
		}), status: report.Fail, findings: ml("below-in-slurm-job"),
			first:  "Slurm: a job gets slurmd's own limit (PropagateResourceLimitsExcept=MEMLOCK (",
			remedy: []string{"set `LimitMEMLOCK=infinity` in slurmd.service", "now slurmd.service sets none"}, lacks: []string{"add `PropagateResourceLimitsExcept"}},
		// A healthy Slurm node: the propagation is reported, and the
		// drop-in that raises slurmd's limit is found.
		{name: "configless slurm node, healthy", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/run/slurm/conf/slurm.conf", "ClusterName=c\n")
			tr.File("/usr/lib/systemd/system/slurmd.service", "[Service]\nExecStart=/usr/sbin/slurmd -D\nLimitMEMLOCK=8M\n")
			tr.File("/etc/systemd/system/slurmd.service.d/memlock.conf", "[Service]\nLimitMEMLOCK=infinity\n")
		}), status: report.Pass, findings: ml("cap-held"), says: []string{"slurmd.service sets LimitMEMLOCK=infinity", "memlock.conf:2"}},
		// On a Slurm node a process not started by slurmd gets the Slurm
		// line among the others, not first.
		{name: "slurm node, a login's process", dir: memlockHost(t, low, func(tr *sysfstest.Tree) {
			asUser(tr, 1000)
			tr.File("/etc/slurm/slurm.conf", "PropagateResourceLimitsExcept=MEMLOCK\n")
		}), status: report.Fail, findings: ml("below"), first: "",
			remedy: []string{"* soft memlock unlimited", "- Slurm: a job gets slurmd's own limit"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := hwRunOne(t, c.dir, "limits.memlock", checks.Options{})
			text := r.Summary + "\n" + strings.Join(r.Details, "\n")
			if r.Status != c.status {
				t.Fatalf("status %s, want %s: %s\n%s", r.Status, c.status, text, r.Remedy)
			}
			if diff := cmp.Diff(c.findings, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			for _, w := range c.says {
				if !strings.Contains(text, w) {
					t.Errorf("result lacks %q:\n%s", w, text)
				}
			}
			for _, w := range c.detLacks {
				if strings.Contains(text, w) {
					t.Errorf("result must not say %q:\n%s", w, text)
				}
			}
			if !strings.HasPrefix(r.Remedy, c.first) {
				t.Errorf("remedy does not begin with %q:\n%s", c.first, r.Remedy)
			}
			at := 0
			for _, w := range c.remedy {
				i := strings.Index(r.Remedy[at:], w)
				if i < 0 {
					t.Errorf("remedy lacks %q after position %d:\n%s", w, at, r.Remedy)
					continue
				}
				at += i
			}
			for _, w := range c.lacks {
				if strings.Contains(r.Remedy, w) {
					t.Errorf("remedy must not say %q:\n%s", w, r.Remedy)
				}
			}
			if r.Observed == "" || r.Expected == "" {
				t.Errorf("observed %q, expected %q", r.Observed, r.Expected)
			}
		})
	}
}

// TestLimitsMemlockJobs: run as root with CAP_IPC_LOCK, the check judges
// what a job gets. Under a running slurmd: slurmd's own limit
// (/proc/PID/limits) when slurm.conf keeps MEMLOCK from propagating; else
// the submitting shell's, capped at slurmd's hard limit.
func TestLimitsMemlockJobs(t *testing.T) {
	slurmd := func(memlock, conf string, args ...string) func(h *sysfstest.Host) {
		return func(h *sysfstest.Host) {
			h.Slurmd = &sysfstest.Slurmd{PID: 2817, Memlock: memlock, Conf: conf, Args: args}
		}
	}
	const except = "ClusterName=c\n# jobs get slurmd's limit\nPropagateResourceLimitsExcept=MEMLOCK\n"
	both := func(fs ...func(h *sysfstest.Host)) func(h *sysfstest.Host) {
		return func(h *sysfstest.Host) {
			for _, f := range fs {
				f(h)
			}
		}
	}
	ml := func(slug string) []findingRef { return []findingRef{{"limits.memlock/" + slug, ""}} }
	runNetCases(t, "limits.memlock", []netCase{
		// Which limit decides, and the line that makes it decide.
		{name: "root exempt; jobs started by slurmd get 64 KiB", dir: memlockHost(t, slurmd("65536", except), nil),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("slurmd-low"),
			contains: []string{"proc/2817/limits", "slurm.conf:3)"}},
		{name: "slurmd unlimited, MEMLOCK kept back: passes", dir: memlockHost(t, slurmd("unlimited", except), nil),
			status: report.Pass, findings: ml("cap-held"), contains: []string{"jobs: slurmd's own limit is soft unlimited"}},
		{name: "slurm.conf named by slurmd -f", dir: memlockHost(t, func(h *sysfstest.Host) {
			h.Slurmd = &sysfstest.Slurmd{PID: 2817, Memlock: "65536", Conf: except, ConfAt: "/opt/slurm/etc/slurm.conf", Args: []string{"-D", "-f", "/opt/slurm/etc/slurm.conf"}}
		}, nil), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("slurmd-low"), contains: []string{"opt/slurm/etc/slurm.conf:3"}},
		{name: "propagation by default, slurmd's hard limit caps it", dir: memlockHost(t, slurmd("65536", "ClusterName=c\n"), nil),
			status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("slurmd-hard-low"),
			contains: []string{"jobs started by slurmd get at most 64 KiB", "PropagateResourceLimits not set (Slurm's default is ALL)"}},
		{name: "propagation, slurmd unlimited, logins unlimited: passes, said", dir: memlockHost(t, slurmd("unlimited", "ClusterName=c\n"), nil),
			status: report.Pass, findings: ml("cap-held"),
			contains: []string{"MEMLOCK propagates (PropagateResourceLimits not set (Slurm's default is ALL)): a job gets the soft limit of the shell it was submitted from, up to slurmd's hard unlimited"}},
		{name: "propagation, logins here get 8 MiB: warns", dir: memlockHost(t, both(slurmd("unlimited", "PropagateResourceLimits=ALL\n"), func(h *sysfstest.Host) { h.UserMemlock = "8192" }), nil),
			status: report.Warn, findings: ml("slurm-shell-low"), contains: []string{"8 MiB from a login like this node's"}},
		{name: "slurmd not running: slurmd.service decides", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/etc/slurm/slurm.conf", except)
			tr.File("/usr/lib/systemd/system/slurmd.service", "[Service]\nExecStart=/usr/sbin/slurmd -D\nLimitMEMLOCK=64K\n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("slurmd-low"),
			contains: []string{"slurmd is not running; when slurmd.service starts it: slurmd.service: LimitMEMLOCK=64K (", "slurmd.service:3)"}},
		{name: "slurmd's limits unreadable is an error", dir: memlockHost(t, slurmd("65536", except), func(tr *sysfstest.Tree) { tr.Remove("/proc/2817/limits") }),
			status: report.Error, exit: report.ExitUnknown, rootCause: "limits.memlock", findings: ml("slurmd-unreadable"), contains: []string{"proc/2817/limits"}},
		// A user's own run keeps the old judgement: its own limit.
		{name: "a user with enough is not judged for slurmd's jobs", dir: memlockHost(t, both(slurmd("65536", except), func(h *sysfstest.Host) { h.CapIPCLock = false }),
			func(tr *sysfstest.Tree) { asUser(tr, 1000) }), status: report.Pass, findings: ml("unlimited"), lacks: []string{"jobs started by slurmd"}},
		// pam_limits precedence: a UID range beats `*`, a later `*` line
		// overrides an earlier one, and a "-" line stops pam_limits. The
		// line named is the one that won.
		{name: "a UID range outranks a later `*` line", dir: memlockHost(t, func(h *sysfstest.Host) { h.UserMemlock = "8192" }, func(tr *sysfstest.Tree) {
			tr.File("/etc/security/limits.conf", "1000: - memlock unlimited\n")
		}), status: report.Pass, findings: ml("cap-held"), contains: []string{"soft unlimited from ", "limits.conf:1"}},
		{name: "a later `*` file overrides an earlier one", dir: memlockHost(t, nil, func(tr *sysfstest.Tree) {
			tr.File("/etc/security/limits.d/zz-site.conf", "*  soft  memlock  65536\n")
		}), status: report.Fail, exit: 18, rootCause: "limits.memlock", findings: ml("login-low"), contains: []string{"login gets 64 MiB", "zz-site.conf:1"}, opts: checks.Options{MinMemlock: 128 << 20}},
	})
}
