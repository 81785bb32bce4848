package checks

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/peer"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// hostRootWith is a host root whose /sys holds the directories and files
// given (a file when the value is not "", else a directory).
func hostRootWith(t *testing.T, entries map[string]string) *sysfs.Host {
	t.Helper()
	root := t.TempDir()
	for p, content := range entries {
		full := filepath.Join(root, "sys", p)
		dir := full
		if content != "" {
			dir = filepath.Dir(full)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(full, []byte(content), 0o444); err != nil {
				t.Fatal(err)
			}
		}
	}
	h, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestPeerLocalFault(t *testing.T) {
	healthy := map[string]string{"class/infiniband/mlx5_0": "", "class/infiniband_verbs/abi_version": "6\n"}
	sysStep := func(errText, fix string) *probe.Step {
		return &probe.Step{Name: probe.StepLocalSysfs, Error: errText, Cause: fix}
	}
	for _, tc := range []struct {
		name    string
		entries map[string]string
		device  string
		want    func(root string) *probe.Step
	}{
		{"no class directory", map[string]string{"class/net": ""}, "", func(root string) *probe.Step {
			return sysStep("no RDMA device on this host: "+root+"/sys/class/infiniband does not exist (no RDMA driver is loaded)", peerNoDeviceFix)
		}},
		{"empty class directory", map[string]string{"class/infiniband": "", "class/infiniband_verbs/abi_version": "6\n"}, "", func(root string) *probe.Step {
			return sysStep("no RDMA device on this host: "+root+"/sys/class/infiniband is empty", peerNoDeviceFix)
		}},
		{"the device named is not there", healthy, "mlx5_7", func(root string) *probe.Step {
			return sysStep(`no RDMA device "mlx5_7" on this host: `+root+"/sys/class/infiniband lists mlx5_0", peerNoSuchDeviceFix)
		}},
		{"no uverbs ABI file", map[string]string{"class/infiniband/mlx5_0": ""}, "", func(root string) *probe.Step {
			return sysStep("this host's kernel offers no userspace verbs: "+root+"/sys/class/infiniband_verbs/abi_version does not exist "+
				"(ib_uverbs is not loaded), so libibverbs cannot list a device (ENOSYS)", peerNoUverbsFix)
		}},
		{"healthy", healthy, "", func(string) *probe.Step { return nil }},
		{"healthy, the device named is there", healthy, "mlx5_0", func(string) *probe.Step { return nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := hostRootWith(t, tc.entries)
			got := PeerLocalFault(h, "/sys", tc.device)
			if want := tc.want(h.Root()); !reflect.DeepEqual(got, want) {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

// localFaultPair is a pair whose handshake passed and whose peer.connect
// failed at a local-device step, as the client sends it: no other result.
func localFaultPair(st probe.Step) peer.Pair {
	return peer.Pair{Peer: "b:18516", Target: "b:18516", Control: peer.Control{Addr: "192.0.2.2:18516", Version: 1},
		Verbs: &probe.PeerResult{Connect: &probe.PeerConnectResult{
			Probe: probe.Probe{Name: probe.PeerConnect, Steps: []probe.Step{st}}}}}
}

// A host that cannot take part is one finding, peer.connect's, naming the
// cause with its fix; every later check is blocked by it, peer.rdma_cm
// (which needs only peer.control) included: no echo of the missing child
// results.
func TestPeerReportLocalFault(t *testing.T) {
	for _, tc := range []struct {
		name       string
		step       probe.Step
		cause, fix string
		finding    string
	}{
		{"sysfs: no device",
			probe.Step{Name: probe.StepLocalSysfs, Error: "no RDMA device on this host: /sys/class/infiniband is empty", Cause: peerNoDeviceFix},
			"no RDMA device on this host: /sys/class/infiniband is empty", peerNoDeviceFix, "no-device"},
		{"child: no libibverbs",
			probe.Step{Name: probe.StepLocalLoad, Error: "dlopen libibverbs.so.1: libibverbs.so.1: cannot open shared object file: No such file or directory"},
			"libibverbs could not be loaded on this host: dlopen libibverbs.so.1: libibverbs.so.1: cannot open shared object file: No such file or directory",
			peerNoLibraryFix, "no-libibverbs"},
		{"child: ENOSYS",
			probe.Step{Name: probe.StepLocalList, Error: "ibv_get_device_list: ENOSYS (function not implemented)", Errno: 38, ErrnoName: "ENOSYS"},
			"this host's kernel offers no userspace verbs: ibv_get_device_list failed with ENOSYS (libibverbs found no readable " +
				"/sys/class/infiniband_verbs/abi_version: ib_uverbs is not loaded, or its ABI is not the library's)",
			peerNoUverbsFix, "no-uverbs"},
		{"child: no provider",
			probe.Step{Name: probe.StepLocalList, Error: "libibverbs lists no RDMA device, though sysfs has some: no provider claims them"},
			"no RDMA device on this host that libibverbs can use: libibverbs lists no RDMA device, though sysfs has some: no provider claims them",
			peerNoProviderFix, "no-provider"},
		{"child: no ACTIVE port",
			probe.Step{Name: probe.StepLocalDevice, Error: "no device has an ACTIVE port: bring a link up or name the device with --device"},
			"this host has no port to test: no device has an ACTIVE port: bring a link up or name the device with --device",
			peerNoPortFix, "no-port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := PeerReport([]peer.Pair{localFaultPair(tc.step)})
			want := "peer.control=pass peer.connect=fail peer.send_recv=skip peer.rdma_write=skip peer.rdma_read=skip " +
				"peer.latency=skip peer.bandwidth=skip peer.counters=skip peer.rdma_cm=skip"
			if got := statuses(rs); got != want {
				t.Fatalf("%s\nwant %s", got, want)
			}
			var got []unitFinding
			for _, r := range rs {
				if r.Status != report.Pass && r.Status != report.Skip {
					got = append(got, unitFindings(r.Findings)...)
				}
				if r.Status == report.Skip && r.Summary != "b:18516: blocked by peer.connect" {
					t.Errorf("%s: %q, want blocked by peer.connect", r.ID, r.Summary)
				}
			}
			if diff := cmp.Diff(onlyFinding("peer.connect/"+tc.finding, "b:18516"), got); diff != "" {
				t.Errorf("the findings of the checks that did not pass (-want +got):\n%s", diff)
			}
			c := rs[1]
			got3 := [3]any{c.Summary, c.Remedy, c.Evidence["b:18516"]}
			st := tc.step
			want3 := [3]any{"b:18516: " + tc.cause, tc.fix, map[string]any{"failed_step": &st}}
			if !reflect.DeepEqual(got3, want3) {
				t.Fatalf("peer.connect\n got %#v\nwant %#v", got3, want3)
			}
		})
	}
}
