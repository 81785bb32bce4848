package sysfs

import (
	"strings"
	"testing"
)

// A counter whose read failed on the captured host (recorded in the facts
// file, its file an empty placeholder) reads as that error on replay, not
// as an empty, malformed value.
func TestPortCountersReplayRecordedReadErrors(t *testing.T) {
	const dev = "/sys/class/infiniband/mlx5_0"
	dir := writeRoot(t, map[string]string{
		"sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped": "",
		"sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error": "3\n",
		"sys/class/infiniband/mlx5_0/ports/1/hw_counters/lifespan":  "12\n",
		FactsFile: `{"schema":"rdmadoctor.facts/v1","read_errors":{"/sys/class/infiniband/mlx5_0/ports/1/counters/VL15_dropped":"EINVAL"}}`,
	}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	cs, groups, probs := h.PortCounters(dev, 1, nil)
	if len(probs) > 0 || strings.Join(groups, ",") != "counters,hw_counters" {
		t.Fatalf("groups %v, problems %v", groups, probs)
	}
	got := map[string]Counter{}
	for _, c := range cs {
		got[c.Group+"/"+c.Name] = c
	}
	if c := got["counters/VL15_dropped"]; c.Known || c.Unknown != "EINVAL: the driver refused the read" {
		t.Errorf("VL15_dropped: %+v, want the recorded EINVAL", c)
	}
	if c := got["counters/symbol_error"]; !c.Known || c.Value != 3 {
		t.Errorf("symbol_error: %+v", c)
	}
	if _, ok := got["hw_counters/lifespan"]; !ok {
		t.Errorf("hw_counters not read: %v", got)
	}
}

// DeviceCounters reads the device's own hw_counters; want filters by
// group and name; a device without them has no groups and no problem.
func TestDeviceCounters(t *testing.T) {
	dir := writeRoot(t, map[string]string{
		"sys/class/infiniband/efa_0/hw_counters/no_completion_cmds": "2\n",
		"sys/class/infiniband/efa_0/hw_counters/submitted_cmds":     "99\n",
		"sys/class/infiniband/efa_0/ports/1/hw_counters/rx_drops":   "0\n",
		"sys/class/infiniband/siw0/ports/1/state":                   "4: ACTIVE\n",
	}, nil)
	h, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := func(g, n string) bool { return g == "hw_counters" && n == "no_completion_cmds" }
	cs, groups, probs := h.DeviceCounters("/sys/class/infiniband/efa_0", want)
	if len(cs) != 1 || cs[0].Value != 2 || len(groups) != 1 || len(probs) > 0 {
		t.Errorf("efa_0: %+v %v %v", cs, groups, probs)
	}
	cs, groups, probs = h.DeviceCounters("/sys/class/infiniband/siw0", nil)
	if len(cs)+len(groups)+len(probs) != 0 {
		t.Errorf("siw0: %+v %v %v", cs, groups, probs)
	}
	cs, groups, probs = h.PortCounters("/sys/class/infiniband/siw0", 1, nil)
	if len(cs)+len(groups)+len(probs) != 0 {
		t.Errorf("siw0 port 1: %+v %v %v", cs, groups, probs)
	}
}
