package checks_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
)

// TestFixtureRemediesGuardReloads runs level 1 on every bundled fixture
// and reads what this package's module, uverbs, libibverbs, kernel and
// memlock checks advise: a remedy that reloads or removes a module says
// what that interrupts and to drain the node first, and none advises
// starting a subnet manager without first looking for one.
func TestFixtureRemediesGuardReloads(t *testing.T) {
	ids := map[string]bool{"kernel.version": true, "kernel.modules": true, "uverbs.nodes": true, "libibverbs.install": true,
		"libibverbs.devices": true, "limits.memlock": true}
	reload := regexp.MustCompile("modprobe -r|rmmod|devlink dev reload")
	entries, err := os.ReadDir(hostsDir)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		r := hwRun(t, filepath.Join(hostsDir, e.Name()), checks.Options{})
		for _, c := range r.Checks {
			if !ids[c.ID] || c.Remedy == "" {
				continue
			}
			seen++
			if reload.MatchString(c.Remedy) && !strings.Contains(c.Remedy, "Drain the node first") {
				t.Errorf("%s on %s reloads without saying what it interrupts:\n%s", c.ID, e.Name(), c.Remedy)
			}
			if i := strings.Index(c.Remedy, "opensm -g"); i >= 0 && !strings.Contains(c.Remedy[:i], "sminfo") {
				t.Errorf("%s on %s starts opensm before looking for an SM:\n%s", c.ID, e.Name(), c.Remedy)
			}
		}
	}
	t.Logf("%d remedies read", seen)
	if seen == 0 {
		t.Fatal("no fixture gave these checks a remedy to read")
	}
}
