package sysfs

import (
	"strings"
	"testing"
)

func TestSlurmPropagatesMemlock(t *testing.T) {
	for _, c := range []struct {
		conf      string
		propagate bool
		decided   string
	}{
		{"ClusterName=c\n", true, "PropagateResourceLimits not set (Slurm's default is ALL)"},
		{"PropagateResourceLimitsExcept=MEMLOCK\n", false, "PropagateResourceLimitsExcept=MEMLOCK (slurm.conf:1)"},
		{"# PropagateResourceLimitsExcept=MEMLOCK\n", true, "not set"},
		{"propagateresourcelimitsexcept = NOFILE,RLIMIT_MEMLOCK # keys are case-insensitive\n", false, "NOFILE,RLIMIT_MEMLOCK (slurm.conf:1)"},
		{"PropagateResourceLimitsExcept=NOFILE\n", true, "PropagateResourceLimitsExcept=NOFILE"},
		{"PropagateResourceLimitsExcept=NONE\n", true, "PropagateResourceLimitsExcept=NONE"},
		{"PropagateResourceLimitsExcept=ALL\n", false, "PropagateResourceLimitsExcept=ALL"},
		{"PropagateResourceLimits=NONE\n", false, "PropagateResourceLimits=NONE (slurm.conf:1)"},
		{"PropagateResourceLimits=ALL\n", true, "PropagateResourceLimits=ALL"},
		{"PropagateResourceLimits=NOFILE,CORE\n", false, "PropagateResourceLimits=NOFILE,CORE"},
		{"PropagateResourceLimits=NOFILE,MEMLOCK\n", true, "PropagateResourceLimits=NOFILE,MEMLOCK"},
		// Slurm compares limit names case-sensitively: "memlock" names nothing.
		{"PropagateResourceLimitsExcept=memlock\n", true, "PropagateResourceLimitsExcept=memlock"},
		// Except decides alone when both are set; the last assignment wins.
		{"PropagateResourceLimits=ALL\nPropagateResourceLimitsExcept=MEMLOCK\n", false, "slurm.conf:2"},
		{"PropagateResourceLimitsExcept=MEMLOCK\nPropagateResourceLimitsExcept=NOFILE\n", true, "NOFILE (slurm.conf:2)"},
	} {
		sc := ParseSlurmConf([]byte(c.conf))
		sc.File = "slurm.conf"
		got, why := sc.PropagatesMemlock()
		if got != c.propagate || !strings.Contains(why, c.decided) {
			t.Errorf("%q: propagates %v (%s), want %v (%s)", c.conf, got, why, c.propagate, c.decided)
		}
	}
	if inc := ParseSlurmConf([]byte("Include /etc/slurm/nodes.conf\n")).Includes; len(inc) != 1 || inc[0] != "/etc/slurm/nodes.conf" {
		t.Errorf("includes %q", inc)
	}
}

// slurm.conf is read from the first place that has it, and a unit's
// setting follows systemd: the first unit file, then drop-ins by name, an
// /etc drop-in masking the same name under /usr/lib.
func TestSlurmConfigAndUnitSetting(t *testing.T) {
	dir := writeRoot(t, map[string]string{
		"etc/slurm-llnl/slurm.conf":                              "PropagateResourceLimits=ALL\n",
		"run/slurm/conf/slurm.conf":                              "PropagateResourceLimitsExcept=MEMLOCK\n",
		"usr/lib/systemd/system/slurmd.service":                  "[Service]\nLimitMEMLOCK=8M\n",
		"etc/systemd/system/slurmd.service":                      "[Unit]\nDescription=local copy\n[Service]\nExecStart=/usr/sbin/slurmd\n",
		"usr/lib/systemd/system/slurmd.service.d/10-limits.conf": "[Service]\nLimitMEMLOCK=16M\n",
		"etc/systemd/system/slurmd.service.d/10-limits.conf":     "[Service]\nLimitMEMLOCK=infinity\n",
		"usr/lib/systemd/system/slurmd.service.d/05-other.conf":  "[Service]\nLimitMEMLOCK=1M\n",
	}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, found, err := h.SlurmConfig()
	if err != nil || !found || !strings.HasSuffix(c.File, "etc/slurm-llnl/slurm.conf") || c.Propagate.Value != "ALL" {
		t.Errorf("slurm.conf: %+v found %v err %v", c, found, err)
	}
	s, set, unit, probs := h.UnitSetting("slurmd.service", "Service", "LimitMEMLOCK")
	// The /etc unit file (no LimitMEMLOCK) replaces /usr/lib's; drop-ins
	// 05-other then 10-limits, the /etc 10-limits masking /usr/lib's.
	if !set || !unit || len(probs) > 0 || s.Value != "infinity" || !strings.HasSuffix(s.File, "etc/systemd/system/slurmd.service.d/10-limits.conf") {
		t.Errorf("LimitMEMLOCK: %+v set %v unit %v probs %v", s, set, unit, probs)
	}
	if _, set, unit, _ := h.UnitSetting("nothere.service", "Service", "LimitMEMLOCK"); set || unit {
		t.Errorf("a missing unit reported set %v, unit %v", set, unit)
	}
	empty, err := Open(writeRoot(t, map[string]string{"etc/hostname": "x\n"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, found, err := empty.SlurmConfig(); found || err != nil {
		t.Errorf("no slurm.conf: found %v err %v", found, err)
	}
}
