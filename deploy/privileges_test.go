package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rdmadoctor/rdmadoctor/checks"
)

// deployment is what one shipped file runs and the privileges it grants,
// both read from the file.
type deployment struct {
	name string
	file string
	args []string // the rdmadoctor command line, binary and subcommand left out
	root bool     // runs as uid 0
	caps map[checks.Capability]bool
	all  bool // every capability (Slurm: slurmd's root)
	// memlockUnlimited: the unit lifts RLIMIT_MEMLOCK itself.
	memlockUnlimited bool
	// devices are the /dev paths the process can open; allDevices when no
	// device policy narrows /dev (a host service).
	devices    []string
	allDevices bool
	comments   string // the file's comments, where a left-out check is named
}

// systemdDeployment reads the service's ExecStart, capabilities, limit and
// device policy.
func systemdDeployment(t *testing.T) deployment {
	d := directives(t, units[0])
	dep := deployment{name: "systemd", file: units[0], caps: map[checks.Capability]bool{}, comments: fileComments(t, units[0], "#")}
	exec := strings.Fields(strings.Join(d["ExecStart"], " "))
	if len(exec) == 0 || filepath.Base(exec[0]) != "rdmadoctor" {
		t.Fatalf("%s: ExecStart %q does not run rdmadoctor", units[0], exec)
	}
	dep.args = exec[1:]
	dep.root = len(d["User"]) == 0 && len(d["DynamicUser"]) == 0
	bounding := capList(t, units[0], d["CapabilityBoundingSet"])
	for c := range bounding {
		// Root's effective set is the bounding set; another user keeps
		// only the ambient capabilities (also bounded).
		if dep.root || capList(t, units[0], d["AmbientCapabilities"])[c] {
			dep.caps[c] = true
		}
	}
	dep.memlockUnlimited = slices.Equal(d["LimitMEMLOCK"], []string{"infinity"})
	policy := strings.Join(d["DevicePolicy"], "")
	dep.allDevices = !slices.Contains(d["PrivateDevices"], "yes") && (policy == "" || policy == "auto") && len(d["DeviceAllow"]) == 0
	return dep
}

// capList reads systemd's space-separated capability names.
func capList(t *testing.T, file string, vals []string) map[checks.Capability]bool {
	out := map[checks.Capability]bool{}
	for _, v := range vals {
		for _, f := range strings.Fields(v) {
			c, err := checks.ParseCapability(f)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			out[c] = true
		}
	}
	return out
}

// daemonSetDeployment reads the container's args, securityContext and
// volume mounts.
func daemonSetDeployment(t *testing.T) deployment {
	const file = "kubernetes/daemonset.yaml"
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					SecurityContext struct {
						RunAsUser *int64 `yaml:"runAsUser"`
					} `yaml:"securityContext"`
					Containers []struct {
						Args            []string `yaml:"args"`
						SecurityContext struct {
							RunAsUser    *int64 `yaml:"runAsUser"`
							Privileged   bool   `yaml:"privileged"`
							Capabilities struct {
								Add  []string `yaml:"add"`
								Drop []string `yaml:"drop"`
							} `yaml:"capabilities"`
						} `yaml:"securityContext"`
						VolumeMounts []struct {
							Name      string `yaml:"name"`
							MountPath string `yaml:"mountPath"`
						} `yaml:"volumeMounts"`
					} `yaml:"containers"`
					Volumes []struct {
						Name     string `yaml:"name"`
						HostPath *struct {
							Path string `yaml:"path"`
						} `yaml:"hostPath"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &ds); err != nil || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s: want one container: %v", file, err)
	}
	pod := ds.Spec.Template.Spec
	ctr := pod.Containers[0]
	sc := ctr.SecurityContext
	if sc.Privileged || !slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Fatalf("%s: want a non-privileged container that drops ALL, got %+v", file, sc)
	}
	dep := deployment{name: "daemonset", file: file, args: ctr.Args, caps: capList(t, file, sc.Capabilities.Add), comments: fileComments(t, file, "#")}
	uid := sc.RunAsUser
	if uid == nil {
		uid = pod.SecurityContext.RunAsUser
	}
	dep.root = uid == nil || *uid == 0
	host := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			host[v.Name] = v.HostPath.Path
		}
	}
	for _, m := range ctr.VolumeMounts {
		// A device node reaches the container only as the host's own.
		if p, ok := host[m.Name]; ok && p == m.MountPath && strings.HasPrefix(p, "/dev/") {
			dep.devices = append(dep.devices, p)
		}
	}
	return dep
}

// slurmDeployment reads a wrapper's exec line: slurmd runs it as root with
// every capability and the host's /dev.
func slurmDeployment(t *testing.T, wrapper string) deployment {
	file := "slurm/" + wrapper
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dep := deployment{name: wrapper, file: file, root: true, all: true, allDevices: true, comments: fileComments(t, file, "#")}
	for _, l := range strings.Split(string(data), "\n") {
		f := strings.Fields(l)
		if len(f) > 3 && f[0] == "exec" && f[2] == "slurm" {
			dep.args = slices.DeleteFunc(f[4:], func(s string) bool { return s == `"$@"` })
		}
	}
	if dep.args == nil {
		t.Fatalf("%s: no `exec ... slurm <adapter> ...` line", file)
	}
	return dep
}

// fileComments joins a file's comment lines.
func fileComments(t *testing.T, file, mark string) string {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range strings.Split(string(data), "\n") {
		if s := strings.TrimSpace(l); strings.HasPrefix(s, mark) {
			b.WriteString(s + "\n")
		}
	}
	return b.String()
}

// flagValues returns every value of a long flag written --name=V or --name V.
func flagValues(args []string, name string) []string {
	var out []string
	for i, a := range args {
		switch {
		case strings.HasPrefix(a, "--"+name+"="):
			out = append(out, strings.TrimPrefix(a, "--"+name+"="))
		case a == "--"+name && i+1 < len(args):
			out = append(out, args[i+1])
		}
	}
	return out
}

// runsChecks is the selection a command line runs, as the command makes
// it: --check (with prerequisites) or the catalog, up to --level, without
// --skip's, and without probe.cq_overflow when periodic unless named.
// Slurm's adapters are periodic by themselves.
func runsChecks(t *testing.T, dep deployment) []*checks.Check {
	level := 2
	if v := flagValues(dep.args, "level"); len(v) > 0 {
		n, err := strconv.Atoi(v[len(v)-1])
		if err != nil {
			t.Fatalf("%s: --level %q", dep.file, v)
		}
		level = n
	}
	ids := flagValues(dep.args, "check")
	sel, err := checks.Select(ids)
	if err != nil {
		t.Fatalf("%s: %v", dep.file, err)
	}
	skip := map[string]bool{}
	for _, v := range flagValues(dep.args, "skip") {
		for _, id := range strings.Split(v, ",") {
			skip[strings.TrimSpace(id)] = true
		}
	}
	periodic := slices.Contains(dep.args, "--periodic") || strings.HasPrefix(dep.name, "slurm-")
	var out []*checks.Check
	for _, c := range sel {
		if c.Level > level || skip[c.ID] || periodic && c.ID == "probe.cq_overflow" && !slices.Contains(ids, c.ID) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// covers says whether the deployment grants one need.
func (d deployment) covers(n checks.Need) bool {
	switch n.Kind {
	case checks.NeedCapability:
		return d.all || d.caps[n.Cap]
	case checks.NeedMemlock:
		return d.all || d.caps[checks.CapIPCLock] || d.memlockUnlimited
	case checks.NeedDevice:
		return d.allDevices || slices.Contains(d.devices, n.Path)
	}
	return false
}

func shippedDeployments(t *testing.T) []deployment {
	return []deployment{systemdDeployment(t), daemonSetDeployment(t),
		slurmDeployment(t, "slurm-healthcheck"), slurmDeployment(t, "slurm-prolog")}
}

// TestDeploymentsGrantWhatTheirChecksNeed: every required need of every
// check a shipped deployment runs is granted by the file itself, or the
// file's comments name the check as left out (it then skips, saying why:
// it claims nothing).
func TestDeploymentsGrantWhatTheirChecksNeed(t *testing.T) {
	leftOut := map[string][]string{"daemonset": {"probe.gpu_memory"}}
	for _, dep := range shippedDeployments(t) {
		t.Run(dep.name, func(t *testing.T) {
			sel := runsChecks(t, dep)
			if len(sel) == 0 {
				t.Fatalf("%s runs no check: %q", dep.file, dep.args)
			}
			var missing []string
			for _, c := range sel {
				for _, n := range checks.Required([]*checks.Check{c}) {
					if dep.covers(n) {
						continue
					}
					if slices.Contains(leftOut[dep.name], c.ID) {
						if !strings.Contains(dep.comments, c.ID+" is left out") {
							t.Errorf("%s: %s is left out, but the file's comments do not say so (%q)", dep.file, c.ID, c.ID+" is left out")
						}
						continue
					}
					missing = append(missing, c.ID+" needs "+n.String())
				}
			}
			sort.Strings(missing)
			if len(missing) > 0 {
				t.Errorf("%s (%q) does not grant:\n%s", dep.file, dep.args, strings.Join(missing, "\n"))
			}
		})
	}
}

// The parsers read what the files say; pinned here so that a change of
// the files is a change seen in review.
func TestDeploymentPrivilegesAsShipped(t *testing.T) {
	deps := shippedDeployments(t)
	got := map[string][]string{}
	for _, d := range deps {
		var caps []string
		for c := range d.caps {
			caps = append(caps, c.String())
		}
		sort.Strings(caps)
		got[d.name] = append(caps, "root="+strconv.FormatBool(d.root), "all="+strconv.FormatBool(d.all),
			"memlock="+strconv.FormatBool(d.memlockUnlimited), "alldev="+strconv.FormatBool(d.allDevices), "dev="+strings.Join(d.devices, ","))
	}
	want := map[string][]string{
		"systemd":           {"CAP_IPC_LOCK", "CAP_SYS_ADMIN", "root=true", "all=false", "memlock=true", "alldev=true", "dev="},
		"daemonset":         {"CAP_IPC_LOCK", "CAP_SYS_ADMIN", "root=true", "all=false", "memlock=false", "alldev=false", "dev=/dev/infiniband"},
		"slurm-healthcheck": {"root=true", "all=true", "memlock=false", "alldev=true", "dev="},
		"slurm-prolog":      {"root=true", "all=true", "memlock=false", "alldev=true", "dev="},
	}
	for name, w := range want {
		if !slices.Equal(got[name], w) {
			t.Errorf("%s: %q, want %q", name, got[name], w)
		}
	}
}

// TestCoversRejects: a deployment short of a capability, a device or the
// right to pin memory is caught.
func TestCoversRejects(t *testing.T) {
	d := deployment{caps: map[checks.Capability]bool{checks.CapIPCLock: true}, devices: []string{"/dev/infiniband"}}
	sysAdmin := checks.Need{Kind: checks.NeedCapability, Cap: checks.CapSysAdmin}
	gpu := checks.Need{Kind: checks.NeedDevice, Path: "/dev/nvidia*"}
	pin := checks.Need{Kind: checks.NeedMemlock}
	ib := checks.Need{Kind: checks.NeedDevice, Path: "/dev/infiniband"}
	if d.covers(sysAdmin) || d.covers(gpu) || !d.covers(pin) || !d.covers(ib) {
		t.Errorf("covers: SYS_ADMIN %v, GPU nodes %v, memlock %v, uverbs %v; want false false true true",
			d.covers(sysAdmin), d.covers(gpu), d.covers(pin), d.covers(ib))
	}
	if (deployment{}).covers(pin) || !(deployment{memlockUnlimited: true}).covers(pin) {
		t.Error("memlock: neither CAP_IPC_LOCK nor an unlimited limit must not cover it; an unlimited limit must")
	}
}

// healthyHosts are the fixtures every deployment must judge healthy: the
// *healthy* hosts and the GPU hosts without a fault.
func healthyHosts(t *testing.T) []string {
	hosts, err := filepath.Glob("../testdata/hosts/*healthy*")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"amd-mi300x", "gpu-vm-passthrough", "hgx-8gpu-healthy"} {
		p := "../testdata/hosts/" + h
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("GPU fixture: %v", err)
		}
		if !slices.Contains(hosts, p) {
			hosts = append(hosts, p)
		}
	}
	if len(hosts) < 5 {
		t.Fatalf("healthy fixtures: %q", hosts)
	}
	return hosts
}

// setprivArgs are setpriv's options for exactly the deployment's
// privileges: its capabilities as the effective, inheritable, ambient and
// bounding sets, no new privileges; for Slurm's root, all this root has.
func setprivArgs(d deployment) []string {
	if d.all {
		return []string{"--"} // root as the test runs: everything it has
	}
	set := "-all"
	for c := range d.caps {
		set += ",+" + strings.ToLower(strings.TrimPrefix(c.String(), "CAP_"))
	}
	args := []string{"--inh-caps=" + set, "--ambient-caps=" + set, "--bounding-set=" + set, "--no-new-privs"}
	if !d.root {
		args = append(args, "--reuid=65534", "--regid=65534", "--clear-groups")
	}
	return append(args, "--")
}

// capMask is the CapEff line a process with the deployment's privileges shows.
func capMask(d deployment) uint64 {
	var m uint64
	for c := range d.caps {
		m |= 1 << uint(c)
	}
	return m
}

// hostArgs is the deployment's command line against a fixture: its own
// flags with the files it writes moved to dir; Slurm's wrappers' checks run
// through the plain command (the scontrol side is cmd's
// TestSlurmDeployWrappers').
func hostArgs(d deployment, dir, host string) []string {
	var out []string
	if strings.HasPrefix(d.name, "slurm-") {
		out = append(out, "--periodic")
	}
	for i := 0; i < len(d.args); i++ {
		a := d.args[i]
		name, _, eq := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		switch {
		case name == "repeat":
			if !eq {
				i++
			}
			continue // one run, not a loop
		case name == "output" || name == "state":
			if !eq {
				i++
			}
			a = "--" + name + "=" + filepath.Join(dir, name)
		}
		out = append(out, a)
	}
	return append(out, "--root", host)
}

// TestDeploymentsHealthyUnderTheirPrivileges runs each shipped deployment's
// command line under setpriv with exactly the privileges its file grants
// on every healthy fixture: each must be healthy (exit 0). It needs root
// (to give the privileges away) and setpriv.
func TestDeploymentsHealthyUnderTheirPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run under setpriv with a deployment's capabilities (CI runs as root)")
	}
	setpriv := needTool(t, "setpriv", "util-linux")
	bin := filepath.Join(t.TempDir(), "rdmadoctor")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/rdmadoctor")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	hosts := healthyHosts(t)
	for _, dep := range shippedDeployments(t) {
		t.Run(dep.name, func(t *testing.T) {
			status, err := exec.Command(setpriv, append(setprivArgs(dep), "cat", "/proc/self/status")...).CombinedOutput()
			if err != nil {
				t.Fatalf("setpriv: %v\n%s", err, status)
			}
			if want := capMask(dep); !dep.all && !bytes.Contains(status, fmt.Appendf(nil, "CapEff:\t%016x\n", want)) {
				t.Fatalf("setpriv %q: CapEff not %016x:\n%s", setprivArgs(dep), want, status)
			}
			for _, host := range hosts {
				host, _ := filepath.Abs(host)
				args := append(setprivArgs(dep), append([]string{bin}, hostArgs(dep, t.TempDir(), host)...)...)
				out, err := exec.Command(setpriv, args...).CombinedOutput()
				if err != nil {
					t.Errorf("%s on %s: %v (exit 0 = healthy)\nsetpriv %s\n%s", dep.name, filepath.Base(host), err, strings.Join(args, " "), out)
				}
			}
		})
	}
}
