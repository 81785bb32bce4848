package sysfs

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// pamEval parses files (in reading order) and evaluates them for u,
// returning soft, hard and the lines ("file:line") that set them.
type pamGot struct {
	Soft, Hard     uint64
	SoftAt, HardAt string
	Stop           string
}

func pamEval(u PamUser, files ...string) pamGot {
	var all []LimitsEntry
	for i, f := range files {
		es, _ := ParseLimitsConf([]byte(f))
		for _, e := range es {
			e.File = []string{"limits.conf", "limits.d/a.conf", "limits.d/b.conf"}[i]
			all = append(all, e)
		}
	}
	pl := PamMemlockFor(all, u)
	at := func(e *LimitsEntry) string {
		if e == nil {
			return ""
		}
		return e.File + ":" + strconv.Itoa(e.Line)
	}
	return pamGot{pl.Soft, pl.Hard, at(pl.SoftAt), at(pl.HardAt), at(pl.Stop)}
}

func TestPamMemlockFor(t *testing.T) {
	user := PamUser{Name: "alice", UID: 1000, GID: 1000, Groups: []string{"alice", "rdma"}, GIDs: []uint32{1000, 2000}}
	ordinary := PamUser{UID: 1000, GID: 1000}
	for _, c := range []struct {
		name  string
		u     PamUser
		files []string
		want  pamGot
	}{
		{"`*` sets both", ordinary, []string{"* soft memlock unlimited\n* hard memlock unlimited\n"},
			pamGot{Unlimited, Unlimited, "limits.conf:1", "limits.conf:2", ""}},
		{"a later `*` file overrides", ordinary, []string{"* - memlock unlimited\n", "* soft memlock 64\n"},
			pamGot{64 << 10, Unlimited, "limits.d/a.conf:1", "limits.conf:1", ""}},
		{"a later `*` cannot undo a user line", user, []string{"alice - memlock unlimited\n", "* - memlock 64\n"},
			pamGot{Unlimited, Unlimited, "limits.conf:1", "limits.conf:1", ""}},
		{"a group line outranks `*`, a user line outranks the group", user, []string{"@rdma soft memlock 1024\n* soft memlock 64\nalice soft memlock 2048\n"},
			pamGot{2048 << 10, 0, "limits.conf:3", "", ""}},
		{"a UID range is as specific as a user", ordinary, []string{"1000: soft memlock unlimited\n", "* soft memlock 64\n"},
			pamGot{Unlimited, 0, "limits.conf:1", "", ""}},
		{"a UID range that misses", ordinary, []string{"2000:3000 soft memlock unlimited\n:999 soft memlock 1\n"}, pamGot{}},
		{"@:gid matches a supplementary group", user, []string{"@:2000 soft memlock 8\n"}, pamGot{8 << 10, 0, "limits.conf:1", "", ""}},
		{"@min: matches the primary group only", user, []string{"@1500: soft memlock 8\n@1000:1000 hard memlock 16\n"}, pamGot{0, 16 << 10, "", "limits.conf:2", ""}},
		{"% domains are for maxlogins only", user, []string{"% soft memlock unlimited\n%rdma soft memlock unlimited\n"}, pamGot{}},
		{"a group the user is not in", ordinary, []string{"@rdma - memlock unlimited\n"}, pamGot{}},
		{"`-` stops at a soft value set more specifically", user, []string{"alice soft memlock 8\n* - memlock unlimited\n"},
			pamGot{8 << 10, 0, "limits.conf:1", "", ""}},
		{"a \"<user> -\" line stops pam_limits", user, []string{"* - memlock unlimited\n", "alice -\n"}, pamGot{Stop: "limits.d/a.conf:1"}},
		{"a \"* -\" line does nothing", ordinary, []string{"* -\n* soft memlock 8\n"}, pamGot{8 << 10, 0, "limits.conf:2", "", ""}},
		{"case and values as pam_limits reads them", ordinary, []string{"* SOFT MEMLOCK Unlimited\n* hard memlock 64M\n* soft memlock lots\n"},
			pamGot{Unlimited, 64 << 10, "limits.conf:1", "limits.conf:2", ""}},
		{"unknown type, other items, bad ranges skipped", ordinary, []string{"* both memlock 8\n* soft nofile 8\nx:y soft memlock 8\n:  soft memlock 8\n"}, pamGot{}},
		{"the value is the rest of the line", ordinary, []string{"*\tsoft\tmemlock\t1024 extra words # comment\n"}, pamGot{1024 << 10, 0, "limits.conf:1", "", ""}},
	} {
		if got := pamEval(c.u, c.files...); got != c.want {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestParseLimitsConfNoLimitsLine(t *testing.T) {
	got, probs := ParseLimitsConf([]byte("alice -\n@ops\t-\nbob soft\n"))
	want := []LimitsEntry{{Line: 1, Domain: "alice", Type: "-", NoLimits: true}, {Line: 2, Domain: "@ops", Type: "-", NoLimits: true}}
	if !reflect.DeepEqual(got, want) || len(probs) != 1 {
		t.Errorf("got %+v, problems %v; want %+v and one problem", got, probs, want)
	}
}

func TestParseLoginDefsUIDMin(t *testing.T) {
	for in, want := range map[string]uint32{"# UID_MIN 5\nUID_MIN\t\t 1000\n": 1000, "UID_MIN 500\nUID_MIN 5000\n": 5000, "UID_MAX 60000\n": 0, "UID_MIN x\n": 0} {
		got, ok := ParseLoginDefsUIDMin([]byte(in))
		if got != want || ok != (want != 0) {
			t.Errorf("%q: %d %v, want %d", in, got, ok, want)
		}
	}
}

func TestParseConfFlagAndEnv(t *testing.T) {
	for in, want := range map[string]string{
		"/usr/sbin/slurmd\x00-D\x00-f\x00/opt/slurm/etc/slurm.conf\x00": "/opt/slurm/etc/slurm.conf",
		"/usr/sbin/slurmd\x00-f/etc/x.conf\x00":                         "/etc/x.conf",
		"/usr/sbin/slurmd\x00-D\x00-s\x00":                              "",
		"/usr/sbin/slurmd\x00--\x00-f\x00x\x00":                         "",
		"/usr/sbin/slurmd\x00-f\x00":                                    "",
		"":                                                              "",
	} {
		if got := ParseConfFlag([]byte(in)); got != want {
			t.Errorf("ParseConfFlag(%q) = %q, want %q", in, got, want)
		}
	}
	if v, ok := ParseEnvVar([]byte("PATH=/bin\x00SLURM_CONF=/etc/s.conf\x00"), "SLURM_CONF"); !ok || v != "/etc/s.conf" {
		t.Errorf("SLURM_CONF = %q, %v", v, ok)
	}
	if _, ok := ParseEnvVar([]byte("SLURM_CONFX=1\x00"), "SLURM_CONF"); ok {
		t.Error("a longer name matched")
	}
}

// A running slurmd is found by its comm, its limit read from its own
// /proc/PID/limits, and systemd's version from libsystemd-shared's name.
func TestSlurmdProcessAndSystemdVersion(t *testing.T) {
	limits := "Limit                     Soft Limit           Hard Limit           Units     \nMax locked memory         65536                unlimited            bytes     \n"
	dir := writeRoot(t, map[string]string{
		"proc/1/comm": "systemd\n", "proc/2817/comm": "slurmd\n", "proc/2817/limits": limits,
		"proc/2817/cmdline": "/usr/sbin/slurmd\x00-D\x00", "proc/2900/comm": "slurmstepd\n", "proc/self/comm": "slurmd\n",
		"usr/lib/x86_64-linux-gnu/systemd/libsystemd-shared-252.so": "\x7fELF",
	}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pids, err := h.ProcessesNamed("slurmd")
	if err != nil || !reflect.DeepEqual(pids, []int{2817}) {
		t.Errorf("slurmd PIDs %v, %v; want [2817]", pids, err)
	}
	if l, err := h.ProcessMemlock(2817); err != nil || l != (Rlimit{Soft: 65536, Hard: Unlimited}) {
		t.Errorf("slurmd's memlock %+v, %v", l, err)
	}
	if _, err := h.ProcessMemlock(2900); err == nil || !strings.Contains(err.Error(), "proc/2900/limits") {
		t.Errorf("a missing limits file: %v", err)
	}
	if c := h.DaemonConf(2817, "SLURM_CONF"); c != "" {
		t.Errorf("conf %q, want none", c)
	}
	if v, from, ok := h.SystemdVersion(); !ok || v != 252 || !strings.HasSuffix(from, "libsystemd-shared-252.so") {
		t.Errorf("systemd %d from %q (%v)", v, from, ok)
	}
}

func FuzzPamMemlockFor(f *testing.F) {
	f.Add([]byte("* soft memlock unlimited\n* hard memlock 64\n"), "alice", uint32(1000))
	f.Add([]byte("@rdma - memlock 8\n1000: - memlock unlimited\nalice -\n@:5 soft memlock 1\n"), "alice", uint32(1000))
	f.Add([]byte("%:3 soft memlock 1\n@:: hard memlock -5\n:  - memlock\n"), "", uint32(0))
	f.Fuzz(func(t *testing.T, data []byte, name string, uid uint32) {
		entries, _ := ParseLimitsConf(data)
		pl := PamMemlockFor(entries, PamUser{Name: name, UID: uid, GID: uid, Groups: []string{"rdma"}})
		if pl.Stop != nil && (pl.SoftAt != nil || pl.HardAt != nil) {
			t.Fatalf("a stop line with limits set: %+v", pl)
		}
		for _, e := range []*LimitsEntry{pl.SoftAt, pl.HardAt} {
			if e != nil && (e.Item != "memlock" || e.NoLimits) {
				t.Fatalf("set by a line that is not a memlock line: %+v", e)
			}
		}
		if pl.SoftAt != nil {
			if v, err := ParseLimitsMemlock(pl.SoftAt.Value); err != nil || v != pl.Soft {
				t.Fatalf("soft %d from %q (%v)", pl.Soft, pl.SoftAt.Value, err)
			}
		}
	})
}

func FuzzParseSlurmConf(f *testing.F) {
	f.Add([]byte("ClusterName=c\nPropagateResourceLimitsExcept=MEMLOCK,NOFILE # x\nInclude /etc/slurm/nodes.conf\n"))
	f.Add([]byte("propagateresourcelimits = \"NONE\"\n=\n==\nInclude\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := ParseSlurmConf(data)
		c.File = "slurm.conf"
		prop, why := c.PropagatesMemlock()
		if why == "" {
			t.Fatal("no reason given")
		}
		if !c.Propagate.Set() && !c.Except.Set() && !prop {
			t.Fatalf("nothing set, yet MEMLOCK does not propagate: %s", why)
		}
		if c.Except.Set() && !strings.Contains(why, "PropagateResourceLimitsExcept") {
			t.Fatalf("Except is set but %q decided", why)
		}
	})
}

func FuzzParseConfFlag(f *testing.F) {
	f.Add([]byte("/usr/sbin/slurmd\x00-f\x00/etc/slurm/slurm.conf\x00"), []byte("SLURM_CONF=/x\x00"))
	f.Fuzz(func(t *testing.T, cmdline, environ []byte) {
		if c := ParseConfFlag(cmdline); c != "" && !strings.Contains(string(cmdline), c) {
			t.Fatalf("%q is not in the command line", c)
		}
		if v, ok := ParseEnvVar(environ, "SLURM_CONF"); ok && !strings.Contains(string(environ), "SLURM_CONF="+v) {
			t.Fatalf("%q is not in the environment", v)
		}
		ParseLoginDefsUIDMin(cmdline)
	})
}
