package checks

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func TestJudgeVerbsDevices(t *testing.T) {
	mlx := sysfs.RDMADevice{Name: "mlx5_0", PCIAddr: "0000:3b:00.0", Driver: "mlx5_core", NodeGUID: "0c42:a103:0065:d4e2"}
	mlx1 := sysfs.RDMADevice{Name: "mlx5_1", PCIAddr: "0000:3b:00.1", Driver: "mlx5_core", NodeGUID: "0c42:a103:0065:d4e3"}
	rxe := sysfs.RDMADevice{Name: "rxe0", Software: true, NodeGUID: "ccbe:95ff:fe70:d640"}
	listed := func(ds ...sysfs.RDMADevice) []listedDevice {
		var out []listedDevice
		for _, d := range ds {
			out = append(out, listedDevice{Name: d.Name, GUID: d.NodeGUID})
		}
		return out
	}
	driverOf := func(d sysfs.RDMADevice) *Driver {
		if d.Software {
			return softwareDriver(d.Name, nil)
		}
		return DriverByPCI(d.Driver)
	}
	cases := []struct {
		name     string
		kernel   []sysfs.RDMADevice
		list     verbsList
		family   string
		netns    string
		status   report.Status
		contains []string // words that are the point: what the library said, a path, a number
		remedy   string
		// remedyFirst is how the remedy must begin; remedyLacks what it must not say.
		remedyFirst string
		remedyLacks []string
		findings    []unitFinding
	}{
		{name: "all listed", findings: []unitFinding{{"libibverbs.devices/listed", "mlx5_0"}, {"libibverbs.devices/listed", "rxe0"}}, kernel: []sysfs.RDMADevice{mlx, rxe}, list: verbsList{Devices: listed(mlx, rxe)},
			status: report.Pass},
		{name: "library absent", findings: []unitFinding{{"libibverbs.devices/load-failed", ""}}, kernel: []sysfs.RDMADevice{mlx}, family: "debian",
			list:   verbsList{Library: "libibverbs.so.1", LoadError: "libibverbs.so.1: cannot open shared object file: No such file or directory"},
			status: report.Fail, contains: []string{"cannot open shared object file"}, remedy: "apt-get install libibverbs1"},
		// With no library name recorded, the soname is named.
		{name: "library absent on RHEL", findings: []unitFinding{{"libibverbs.devices/load-failed", ""}}, kernel: []sysfs.RDMADevice{mlx}, family: "rhel",
			list:   verbsList{LoadError: "libibverbs.so.1: cannot open shared object file"},
			status: report.Fail, contains: []string{"libibverbs.so.1 could not be loaded"}, remedy: "dnf install libibverbs"},
		{name: "wrong library", findings: []unitFinding{{"libibverbs.devices/not-verbs", ""}}, kernel: []sysfs.RDMADevice{mlx},
			list:   verbsList{Library: "libibverbs.so.1", LoadedFrom: "/opt/x/libibverbs.so.1", Missing: []string{"ibv_get_device_list", "ibv_open_device"}},
			status: report.Fail, contains: []string{"/opt/x/libibverbs.so.1", "ibv_open_device"}, remedy: "ldconfig -p"},
		{name: "ENOSYS", findings: []unitFinding{{"libibverbs.devices/list-enosys", ""}}, kernel: []sysfs.RDMADevice{mlx}, list: verbsList{ListErrno: "ENOSYS"},
			status: report.Fail, remedy: "modprobe ib_uverbs"},
		{name: "other errno", findings: []unitFinding{{"libibverbs.devices/list-errno", ""}}, kernel: []sysfs.RDMADevice{mlx}, list: verbsList{ListErrno: "ENOMEM"},
			status: report.Fail, contains: []string{"NULL with ENOMEM"}},
		// NULL without errno is a failed call, not an empty list whose
		// cause would be a missing provider.
		{name: "NULL without errno", findings: []unitFinding{{"libibverbs.devices/list-no-errno", ""}}, kernel: []sysfs.RDMADevice{mlx}, family: "debian",
			list:   verbsList{ListError: "ibv_get_device_list: failed without setting errno"},
			status: report.Fail, remedy: "VERBS_LOG_LEVEL=3 ibv_devices"},
		{name: "provider missing for one driver", findings: []unitFinding{{"libibverbs.devices/not-listed", "mlx5_0"}, {"libibverbs.devices/not-listed", "mlx5_1"}, {"libibverbs.devices/listed", "rxe0"}}, kernel: []sysfs.RDMADevice{mlx, mlx1, rxe}, family: "debian",
			list: verbsList{Devices: listed(rxe), Warnings: []string{
				"libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so': libmlx5-rdmav34.so: cannot open shared object file"}},
			status: report.Fail, contains: []string{"libmlx5-rdmav*.so", "the library said: libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so'"}, remedy: "apt-get install ibverbs-providers",
			remedyFirst: "Install the providers", remedyLacks: []string{"exclusive"}},
		// In exclusive netns mode the namespace is named first, in the
		// finding and in the remedy; the provider comes after.
		{name: "empty list in exclusive netns", findings: []unitFinding{{"libibverbs.devices/not-listed-netns", "mlx5_0"}}, kernel: []sysfs.RDMADevice{mlx}, netns: "exclusive", list: verbsList{}, family: "debian",
			status:      report.Fail,
			remedy:      "If the device does belong to this namespace, its provider did not load:\nInstall the providers: `apt-get install ibverbs-providers`",
			remedyFirst: "The RDMA subsystem is in exclusive network-namespace mode (`rdma system` shows `netns exclusive`): mlx5_0 is visible and opens only inside"},
		{name: "one of two missing in exclusive netns", findings: []unitFinding{{"libibverbs.devices/listed", "mlx5_0"}, {"libibverbs.devices/not-listed-netns", "mlx5_1"}}, kernel: []sysfs.RDMADevice{mlx, mlx1}, netns: "exclusive", list: verbsList{Devices: listed(mlx)},
			status: report.Fail,
			remedy: "nsenter --net", remedyFirst: "The RDMA subsystem is in exclusive network-namespace mode (`rdma system` shows `netns exclusive`): mlx5_1 is visible"},
		{name: "software device without provider", findings: []unitFinding{{"libibverbs.devices/not-listed", "rxe0"}}, kernel: []sysfs.RDMADevice{rxe}, list: verbsList{},
			status: report.Fail, contains: []string{"librxe-rdmav*.so"}},
		{name: "unknown driver", findings: []unitFinding{{"libibverbs.devices/not-listed-unknown-driver", "foo0"}}, kernel: []sysfs.RDMADevice{{Name: "foo0", PCIAddr: "0000:01:00.0", Driver: "foo"}}, list: verbsList{},
			status: report.Fail},
		{name: "extra device", findings: []unitFinding{{"libibverbs.devices/listed", "mlx5_0"}, {"libibverbs.devices/stray", "mlx5_7"}}, kernel: []sysfs.RDMADevice{mlx}, list: verbsList{Devices: append(listed(mlx), listedDevice{Name: "mlx5_7"})},
			status: report.Warn},
		{name: "GUID differs", findings: []unitFinding{{"libibverbs.devices/guid-differs", "mlx5_0"}}, kernel: []sysfs.RDMADevice{mlx}, list: verbsList{Devices: []listedDevice{{Name: "mlx5_0", GUID: "0c42:a103:0065:0000"}}},
			status: report.Warn, contains: []string{"node GUID 0c42:a103:0065:0000 in the library, 0c42:a103:0065:d4e2 in sysfs"}},
		{name: "GUID formats compare equal", findings: []unitFinding{{"libibverbs.devices/listed", "mlx5_0"}}, kernel: []sysfs.RDMADevice{mlx}, list: verbsList{Devices: []listedDevice{{Name: "mlx5_0", GUID: "0C42A1030065D4E2"}}},
			status: report.Pass},
		{name: "nothing anywhere", findings: []unitFinding{{"libibverbs.devices/none", ""}}, list: verbsList{}, status: report.Skip},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := judgeVerbsDevices(c.kernel, c.list, c.family, "", c.netns, driverOf)
			if r.Status != c.status {
				t.Fatalf("status %s, want %s: %s", r.Status, c.status, r.Summary)
			}
			if diff := cmp.Diff(c.findings, unitFindings(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			text := r.Summary + "\n" + strings.Join(r.Details, "\n")
			for _, w := range c.contains {
				if !strings.Contains(text, w) {
					t.Errorf("result does not say %q:\n%s", w, text)
				}
			}
			if c.remedy != "" && !strings.Contains(r.Remedy, c.remedy) {
				t.Errorf("remedy %q does not say %q", r.Remedy, c.remedy)
			}
			if !strings.HasPrefix(r.Remedy, c.remedyFirst) {
				t.Errorf("remedy does not begin with %q:\n%s", c.remedyFirst, r.Remedy)
			}
			for _, w := range c.remedyLacks {
				if strings.Contains(r.Remedy, w) {
					t.Errorf("remedy must not say %q:\n%s", w, r.Remedy)
				}
			}
			if r.Status != report.Pass && r.Status != report.Skip && r.Remedy == "" {
				t.Errorf("a %s without a remedy", r.Status)
			}
		})
	}
}

func TestVerbsFacts(t *testing.T) {
	f := VerbsFacts(&probe.Enumeration{Library: "libibverbs.so.1", ListErrno: 38,
		Devices: []probe.EnumDevice{{Name: "rxe0", NodeGUID: "ccbe:95ff:fe70:d640", UverbsDev: "uverbs0"}}}, nil)
	l := listFromFacts(f)
	if l.ListErrno != "errno 38" || len(l.Devices) != 1 || l.Devices[0].Uverbs != "uverbs0" || l.Library != "libibverbs.so.1" {
		t.Fatalf("%+v", l)
	}
	l = listFromFacts(&sysfs.VerbsEnumeration{Errno: "ENOSYS"})
	if l.ListErrno != "ENOSYS" || !strings.Contains(l.ListError, "ENOSYS") {
		t.Fatalf("%+v", l)
	}
	// An older facts file names only the loaded file: it stands for the name.
	if l := listFromFacts(&sysfs.VerbsEnumeration{LibraryPath: "/usr/lib/libibverbs.so.1"}); l.Library != "/usr/lib/libibverbs.so.1" {
		t.Fatalf("%+v", l)
	}
	if f := VerbsFacts(nil, nil); f.ChildError == "" || f.Devices == nil {
		t.Fatalf("no answer and no error: %+v", f)
	}
}

// The facts form keeps every part of the child's answer the check judges:
// a replay of it gives the live verdict, evidence and details.
func TestLibibverbsDevicesFactsReplayLive(t *testing.T) {
	cases := map[string]struct {
		en  *probe.Enumeration
		err error
	}{
		"listed": {en: &probe.Enumeration{Library: "libibverbs.so.1", LoadedFrom: "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0",
			Devices:   []probe.EnumDevice{{Name: "rxe0", NodeGUID: "5054:00ff:fe12:3456", UverbsDev: "uverbs0"}},
			Providers: []string{"/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"},
			Warnings:  []string{"libibverbs: Warning: couldn't load driver 'libfoo-rdmav34.so'"}}},
		"wrong library": {en: &probe.Enumeration{Library: "libibverbs.so.1", LoadedFrom: "/opt/x/libibverbs.so.1",
			MissingSymbols: []string{"ibv_get_device_list"}, Devices: []probe.EnumDevice{}}},
		"NULL list": {en: &probe.Enumeration{Library: "libibverbs.so.1", ListErrno: 38, ListErrnoName: "ENOSYS",
			ListError: "ibv_get_device_list: Function not implemented", Devices: []probe.EnumDevice{}}},
		"NULL list without errno": {en: &probe.Enumeration{Library: "libibverbs.so.1",
			ListError: "ibv_get_device_list: failed without setting errno", Devices: []probe.EnumDevice{}}},
		"child crashed": {en: &probe.Enumeration{Warnings: []string{"libibverbs: Warning: x"}},
			err: errors.New("the verbs child crashed with SIGSEGV in ibv_get_device_list")},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			live := NewEnv(sysfs.OpenLive(), Options{Level: 1})
			UseVerbs(live, &fakeVerbs{enum: c.en, enumErr: c.err})
			want := runLibibverbsDevices(context.Background(), live)
			judged, ok := JudgedVerbs(context.Background(), live)
			if !ok {
				t.Fatal("JudgedVerbs: the check judged nothing")
			}
			// Through the facts file, as a snapshot stores it.
			dir := t.TempDir()
			data, err := json.Marshal(&sysfs.Facts{Schema: sysfs.FactsSchema, Libibverbs: judged})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, sysfs.FactsFile), data, 0o644); err != nil {
				t.Fatal(err)
			}
			// The remedy names this machine's distribution: the replay reads the same.
			if osr, err := os.ReadFile("/etc/os-release"); err == nil {
				os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
				if err := os.WriteFile(filepath.Join(dir, "etc", "os-release"), osr, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			h, err := sysfs.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			got := runLibibverbsDevices(context.Background(), NewEnv(h, Options{Level: 1}))
			wj, _ := json.Marshal(want)
			gj, _ := json.Marshal(got)
			if string(wj) != string(gj) {
				t.Fatalf("replay differs from the live verdict:\nlive:   %s\nreplay: %s", wj, gj)
			}
		})
	}
}

// On a snapshot the answer is the facts file's.
func TestLibibverbsDevicesFromFacts(t *testing.T) {
	for name, want := range map[string]report.Status{
		"rxe-softroce":       report.Pass,
		"cx5-roce-healthy":   report.Pass,
		"libibverbs-missing": report.Fail,
	} {
		h, err := sysfs.Open(filepath.Join("..", "testdata", "hosts", name))
		if err != nil {
			t.Fatal(err)
		}
		env := NewEnv(h, Options{Level: 1})
		r := runLibibverbsDevices(context.Background(), env)
		h.Close()
		if r.Status != want {
			t.Errorf("%s: %s, want %s: %s", name, r.Status, want, r.Summary)
		}
	}
}

// fakeVerbs is a VerbsRunner that answers from memory.
type fakeVerbs struct {
	enum    *probe.Enumeration
	enumErr error
	results *probe.Results
	calls   int
	probed  []string // the probes the last Probe call asked for
}

func (f *fakeVerbs) Enumerate(context.Context) (*probe.Enumeration, error) {
	f.calls++
	return f.enum, f.enumErr
}

func (f *fakeVerbs) Probe(_ context.Context, _ []probe.Target, probes []string) *probe.Results {
	f.probed = probes
	f.calls++
	return f.results
}

func TestVerbsEnumerationRunsOnce(t *testing.T) {
	env := NewEnv(sysfs.OpenLive(), Options{Level: 1})
	f := &fakeVerbs{enum: &probe.Enumeration{Devices: []probe.EnumDevice{}}}
	UseVerbs(env, f)
	for i := 0; i < 3; i++ {
		if _, err := env.verbsEnumeration(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if f.calls != 1 {
		t.Fatalf("the enumeration ran %d times", f.calls)
	}
}

func TestVerbsEnumerationWaitHonoursDeadline(t *testing.T) {
	env := NewEnv(sysfs.OpenLive(), Options{Level: 1})
	block := make(chan struct{})
	defer close(block)
	UseVerbs(env, blockingVerbs{block})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := env.verbsEnumeration(ctx); err == nil || !strings.Contains(err.Error(), "waiting for the verbs child") {
		t.Fatalf("err %v", err)
	}
}

type blockingVerbs struct{ block chan struct{} }

func (b blockingVerbs) Enumerate(context.Context) (*probe.Enumeration, error) {
	<-b.block
	return nil, nil
}

func (b blockingVerbs) Probe(context.Context, []probe.Target, []string) *probe.Results {
	<-b.block
	return nil
}

// A child that hangs or crashes in ibv_get_device_list is an error of this
// check, naming what happened, not of the run.
func TestLibibverbsDevicesChildFailure(t *testing.T) {
	env := NewEnv(sysfs.OpenLive(), Options{Level: 1})
	UseVerbs(env, &fakeVerbs{enumErr: errors.New("the verbs child crashed with SIGSEGV in ibv_get_device_list")})
	r := runLibibverbsDevices(context.Background(), env)
	if diff := cmp.Diff(onlyFinding("libibverbs.devices/child-failed", ""), unitFindings(r.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	// The child's own words say what happened.
	if r.Status != report.Error || !strings.Contains(r.Summary, "crashed with SIGSEGV in ibv_get_device_list") {
		t.Fatalf("%+v", r)
	}
}

// A snapshot without the library's answer, or a child that gave none, is
// an error that says what was looked for and how to look by hand.
func TestLibibverbsDevicesCouldNotLook(t *testing.T) {
	for _, c := range []struct {
		name             string
		facts            *sysfs.VerbsEnumeration
		finding          string
		summary, remedy  string
		observed, expect string
	}{
		{"not recorded", nil, "libibverbs.devices/not-recorded", "", "`ibv_devices`", "no recorded enumeration", "the facts file's libibverbs answer"},
		// The child's error is quoted.
		{"child killed", &sysfs.VerbsEnumeration{ChildError: "killed after 10s", Devices: []sysfs.VerbsDevice{}}, "libibverbs.devices/child-failed",
			"killed after 10s", "strace -f -e trace=openat ibv_devices", "no answer from ibv_get_device_list", "within the deadline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := sysfstest.Build(sysfstest.CX5RoCE())
			tr.Facts.Libibverbs = c.facts
			dir := filepath.Join(t.TempDir(), "host")
			if err := tr.Write(dir); err != nil {
				t.Fatal(err)
			}
			h, err := sysfs.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			r := runLibibverbsDevices(context.Background(), NewEnv(h, Options{Level: 1}))
			if r.Status != report.Error || !strings.Contains(r.Summary, c.summary) {
				t.Fatalf("%s: %s; want error saying %q", r.Status, r.Summary, c.summary)
			}
			if diff := cmp.Diff(onlyFinding(c.finding, ""), unitFindings(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if !strings.Contains(r.Remedy, c.remedy) || r.Observed != c.observed || !strings.Contains(r.Expected, c.expect) {
				t.Errorf("remedy %q, observed %q, expected %q", r.Remedy, r.Observed, r.Expected)
			}
		})
	}
}
