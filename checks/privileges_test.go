package checks

import (
	"os"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func TestParseCapability(t *testing.T) {
	for _, s := range []string{"CAP_SYS_ADMIN", "SYS_ADMIN", "sys_admin", " cap_sys_admin "} {
		if c, err := ParseCapability(s); err != nil || c != CapSysAdmin {
			t.Errorf("ParseCapability(%q) = %v, %v; want CAP_SYS_ADMIN", s, c, err)
		}
	}
	if c, err := ParseCapability("IPC_LOCK"); err != nil || c != CapIPCLock || c.String() != "CAP_IPC_LOCK" {
		t.Errorf("IPC_LOCK: %v %v", c, err)
	}
	for _, s := range []string{"", "CAP_", "CAP_BOGUS", "ALL"} {
		if _, err := ParseCapability(s); err == nil {
			t.Errorf("ParseCapability(%q): no error", s)
		}
	}
	if got := Capability(63).String(); got != "capability 63" {
		t.Errorf("unnamed capability: %q", got)
	}
}

// Required keeps each required need once, drops the optional ones, and
// orders them by kind, then capability or path.
func TestRequired(t *testing.T) {
	sel := []*Check{
		{ID: "a", Privileges: []Need{needPinning, needUverbsNodes}},
		{ID: "b", Privileges: []Need{{Kind: NeedCapability, Cap: CapSysAdmin, For: "x"}, needUverbsNodes}},
		{ID: "c", Privileges: []Need{{Kind: NeedCapability, Cap: CapIPCLock, Optional: true}}},
		{ID: "d"},
	}
	want := []Need{
		{Kind: NeedCapability, Cap: CapSysAdmin},
		{Kind: NeedDevice, Path: "/dev/infiniband"},
		{Kind: NeedMemlock},
	}
	if got := Required(sel); !reflect.DeepEqual(got, want) {
		t.Errorf("Required = %+v\nwant %+v", got, want)
	}
	if got := Required(nil); len(got) != 0 {
		t.Errorf("Required(nil) = %+v", got)
	}
}

// The catalog's declarations: the checks that read PCI config space beyond
// 64 bytes declare CAP_SYS_ADMIN (gpu.pcie only to show more), every verbs
// probe the uverbs nodes and the right to pin memory.
func TestCatalogPrivileges(t *testing.T) {
	got := map[string][]Need{}
	for _, c := range Catalog() {
		if r := Required([]*Check{c}); len(r) > 0 {
			got[c.ID] = r
		}
	}
	dev := Need{Kind: NeedDevice, Path: "/dev/infiniband"}
	pin := Need{Kind: NeedMemlock}
	gpuDev := Need{Kind: NeedDevice, Path: "/dev/nvidia*, /dev/kfd, /dev/dri"}
	want := map[string][]Need{
		"uverbs.nodes":        {dev},
		"libibverbs.devices":  {dev},
		"gpu.acs":             {{Kind: NeedCapability, Cap: CapSysAdmin}},
		"verbs.resources":     {dev, pin},
		"verbs.qp_state":      {dev, pin},
		"probe.send_poll":     {dev, pin},
		"probe.cq_overflow":   {dev, pin},
		"probe.destroy_order": {dev, pin},
		"probe.ud":            {dev, pin},
		"probe.gpu_memory":    {dev, gpuDev, pin},
		// The InfiniBand control-plane checks open /dev/infiniband/umadN.
		"ib.sm": {dev}, "ib.path": {dev}, "ib.far_end": {dev}, "ib.pkey": {dev},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("required needs:\n got %+v\nwant %+v", got, want)
	}
	c, _ := Lookup("gpu.pcie")
	if len(c.Privileges) != 1 || !c.Privileges[0].Optional || c.Privileges[0].Cap != CapSysAdmin {
		t.Errorf("gpu.pcie: %+v, want CAP_SYS_ADMIN as optional", c.Privileges)
	}
}

func TestNeedString(t *testing.T) {
	cases := map[string]Need{
		"CAP_SYS_ADMIN: reads ACS": {Kind: NeedCapability, Cap: CapSysAdmin, For: "reads ACS"},
		"CAP_SYS_ADMIN: shows more (optional: without it the check judges and shows less)": {Kind: NeedCapability, Cap: CapSysAdmin,
			For: "shows more", Optional: true},
		"device /dev/infiniband (opened read-write)":                                          {Kind: NeedDevice, Path: "/dev/infiniband"},
		"CAP_IPC_LOCK or a locked-memory limit (RLIMIT_MEMLOCK) large enough for its buffers": {Kind: NeedMemlock},
		"need kind 9": {Kind: 9},
	}
	for want, n := range cases {
		if got := n.String(); got != want {
			t.Errorf("%+v: %q, want %q", n, got, want)
		}
	}
}

// The message for a short configuration space names the privilege only
// where the process's own capabilities say it is the cause.
func TestConfigSpaceShortText(t *testing.T) {
	cases := []struct {
		size        int
		held, known bool
		want        string
	}{
		{64, false, true, "needs CAP_SYS_ADMIN to read PCI config space beyond 64 bytes (the kernel shows 64 bytes without it); ACS lies beyond"},
		{64, true, true, "only 64 bytes of configuration space readable although this process holds CAP_SYS_ADMIN: in a user namespace " +
			"(a rootless container) the kernel wants it in the host's own namespace; ACS lies beyond"},
		{256, true, true, "only 256 bytes of configuration space: the function has no PCIe extended space, where ACS lies"},
		{256, false, true, "only 256 bytes of configuration space: the function has no PCIe extended space, where ACS lies"},
		{64, false, false, "only 64 bytes of configuration space readable — reading ACS needs root (CAP_SYS_ADMIN)"},
	}
	for _, c := range cases {
		if got := configSpaceShortText(c.size, c.held, c.known, "ACS"); got != c.want {
			t.Errorf("%d held=%v known=%v:\n got %q\nwant %q", c.size, c.held, c.known, got, c.want)
		}
	}
}

// liveCapability answers from the running process on a live host (the
// same bit capget(2) gives) and never from a fixture's /proc/self/status.
func TestLiveCapability(t *testing.T) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		t.Fatalf("capget: %v", err)
	}
	h := sysfs.OpenLive()
	defer h.Close()
	for _, c := range []Capability{CapSysAdmin, CapIPCLock, CapSyslog} {
		want := data[c/32].Effective&(1<<(uint(c)%32)) != 0
		held, known := liveCapability(h, c)
		if !known || held != want {
			t.Errorf("%v: held=%v known=%v, capget says %v", c, held, known, want)
		}
	}
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/proc/self", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/proc/self/status", []byte("CapEff:\t000001ffffffffff\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fx, err := sysfs.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	if held, known := liveCapability(fx, CapSysAdmin); held || known {
		t.Errorf("fixture: held=%v known=%v, want unknown", held, known)
	}
	if held, known := liveCapability(nil, CapSysAdmin); held || known {
		t.Errorf("nil host: held=%v known=%v", held, known)
	}
}
