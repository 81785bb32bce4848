package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/rdmadoctor/rdmadoctor/checks"
)

const deployDir = "../../deploy/"

// noisyIn says which probes that make the kernel log a line a run with
// these arguments would run.
func noisyIn(t *testing.T, where string, args []string) []string {
	t.Helper()
	f, err := parseFlags(args)
	if err != nil {
		t.Fatalf("%s: the shipped arguments %q do not parse: %v", where, args, err)
	}
	sel, err := checks.Select(f.checkIDs)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var noisy []string
	for _, c := range periodicSelection(f, sel) {
		if _, ok := noisyProbes[c.ID]; ok && c.Level <= f.level {
			noisy = append(noisy, c.ID)
		}
	}
	return noisy
}

func readDeploy(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(deployDir + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The judge itself: a plain level-2 run does run the noisy probe, so the
// assertions below can fail.
func TestNoisyInSeesALevel2Run(t *testing.T) {
	if got := noisyIn(t, "level 2", []string{"--level", "2"}); len(got) == 0 {
		t.Fatal("a plain level-2 run selects no noisy probe: the deploy test below proves nothing")
	}
}

// TestShippedPeriodicRunsStayOutOfTheKernelLog: every periodic invocation
// deploy/ ships — the systemd service, the DaemonSet, the Slurm health check
// and prolog, the NPD plugin — leaves out the probes that make the kernel log
// a line (an overrun CQ: mlx5's "CQ error on CQN"), so a fleet's log scanners
// do not page on the doctor.
func TestShippedPeriodicRunsStayOutOfTheKernelLog(t *testing.T) {
	// systemd: ExecStart, continuation lines joined.
	unit := strings.ReplaceAll(readDeploy(t, "systemd/rdmadoctor.service"), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^ExecStart=\S+ (.*)$`).FindStringSubmatch(unit)
	if m == nil {
		t.Fatal("systemd/rdmadoctor.service has no ExecStart")
	}
	if n := noisyIn(t, "systemd/rdmadoctor.service", strings.Fields(m[1])); len(n) > 0 {
		t.Errorf("systemd/rdmadoctor.service runs %v every timer period", n)
	}

	// Kubernetes: the DaemonSet container's args (its image's entrypoint is
	// the binary).
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Name    string   `yaml:"name"`
						Command []string `yaml:"command"`
						Args    []string `yaml:"args"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal([]byte(readDeploy(t, "kubernetes/daemonset.yaml")), &ds); err != nil {
		t.Fatalf("kubernetes/daemonset.yaml: %v", err)
	}
	found := false
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name != "rdmadoctor" {
			continue
		}
		found = true
		if len(c.Command) > 0 {
			t.Errorf("kubernetes/daemonset.yaml: command %q replaces the entrypoint; the test reads args only", c.Command)
		}
		if n := noisyIn(t, "kubernetes/daemonset.yaml", c.Args); len(n) > 0 {
			t.Errorf("kubernetes/daemonset.yaml runs %v every --repeat period", n)
		}
	}
	if !found {
		t.Error("kubernetes/daemonset.yaml has no container named rdmadoctor")
	}

	// Slurm: the wrappers' fixed arguments, as `rdmadoctor slurm` passes
	// them to the run (level 1 unless they say otherwise).
	for _, w := range []string{"slurm/slurm-healthcheck", "slurm/slurm-prolog"} {
		m := regexp.MustCompile(`(?m)\bslurm (healthcheck|prolog)((?: [^"$\s]\S*)*) "\$@"`).FindStringSubmatch(readDeploy(t, w))
		if m == nil {
			t.Errorf("%s: no `slurm healthcheck|prolog ... \"$@\"` line", w)
			continue
		}
		slurmdEnv := func(k string) string { // what slurmd sets for its programs
			if k == "SLURMD_NODENAME" {
				return "node1"
			}
			return ""
		}
		o, err := parseSlurmArgs(append([]string{m[1]}, strings.Fields(m[2])...), slurmdEnv)
		if err != nil {
			t.Errorf("%s: %v", w, err)
			continue
		}
		if n := noisyIn(t, w, append([]string{"--level=1"}, o.runArgs...)); len(n) > 0 {
			t.Errorf("%s runs %v at every health check", w, n)
		}
	}

	// NPD: the plugin is the adapter, which reads the state (or makes a
	// level-1 run): never a probe.
	var mon struct {
		Rules []struct {
			Args []string `json:"args"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(readDeploy(t, "kubernetes/npd/rdmadoctor-monitor.json")), &mon); err != nil {
		t.Fatalf("kubernetes/npd/rdmadoctor-monitor.json: %v", err)
	}
	for _, r := range mon.Rules {
		if len(r.Args) == 0 || r.Args[0] != "npd" {
			t.Errorf("kubernetes/npd/rdmadoctor-monitor.json: rule args %q are not the npd adapter", r.Args)
		}
	}
}
