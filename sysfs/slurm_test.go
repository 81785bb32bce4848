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
