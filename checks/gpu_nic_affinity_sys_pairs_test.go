package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// sysPairsClass is an expectations class for every host with one more line
// (none when line is "").
func sysPairsClass(t *testing.T, line string) *expect.Class {
	t.Helper()
	if line == "" {
		return nil
	}
	f, err := expect.Parse("expect.conf", strings.NewReader("[class gpu]\nhosts = *\n"+line+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return f.Classes[0]
}

// GPU–NIC pairs across sockets: every fixture gets the verdict and exit
// code its comment states (sysfstest.SysPairsVerdicts), with the finding
// named.
func TestSysPairsFixtureVerdicts(t *testing.T) {
	for _, v := range sysfstest.SysPairsVerdicts {
		name := v.Fixture
		if v.Expect != "" {
			name += "/" + v.Expect
		}
		t.Run(name, func(t *testing.T) {
			r := hwRun(t, netFixture(v.Fixture), checks.Options{Expect: sysPairsClass(t, v.Expect)})
			statedVerdict(t, r, v.Check, v.Status, v.Finding, v.Exit)
		})
	}
}

// Which GPU gets which finding: a SYS pair warns only where the GPU's
// node has no RDMA NIC; the class's limit fails every pair beyond it, and
// a SYS limit asks for nothing closer.
func TestSysPairsFindingsPerGPU(t *testing.T) {
	gpus := []string{"0000:98:00.0", "0000:a8:00.0", "0000:b8:00.0", "0000:c8:00.0"}
	all := func(id string) []findingRef {
		var out []findingRef
		for _, a := range gpus {
			out = append(out, findingRef{id, a})
		}
		return out
	}
	for _, tc := range []struct {
		name, fixture, expect string
		want                  []findingRef
	}{
		{"no NIC on the GPUs' socket", "gpu4-nics-other-socket", "", all("gpu.nic_affinity/no-nic-on-socket")},
		{"the class asks for NODE", "gpu4-nics-other-socket", "gpu_nic_max_distance = NODE", all("gpu.nic_affinity/farther-than-expected")},
		{"the class accepts SYS", "gpu4-nics-other-socket", "gpu_nic_max_distance = SYS", all("gpu.nic_affinity/no-nic-on-socket")},
		{"a NIC on the GPUs' socket", "gpu4-one-nic-on-gpu-socket", "", []findingRef{{"gpu.nic_affinity/paired", gpus[0]},
			{"gpu.nic_affinity/paired", gpus[1]}, {"gpu.nic_affinity/across-sockets", gpus[2]}, {"gpu.nic_affinity/across-sockets", gpus[3]}}},
		{"a NIC on the GPUs' socket, the class accepts SYS", "gpu4-one-nic-on-gpu-socket", "gpu_nic_max_distance = SYS",
			[]findingRef{{"gpu.nic_affinity/paired", gpus[0]}, {"gpu.nic_affinity/paired", gpus[1]},
				{"gpu.nic_affinity/across-sockets", gpus[2]}, {"gpu.nic_affinity/across-sockets", gpus[3]}}},
		{"a NIC on the GPUs' socket, the class asks for PXB", "gpu4-one-nic-on-gpu-socket", "gpu_nic_max_distance = PXB",
			[]findingRef{{"gpu.nic_affinity/farther-than-expected", gpus[0]}, {"gpu.nic_affinity/farther-than-expected", gpus[1]},
				{"gpu.nic_affinity/across-sockets", gpus[2]}, {"gpu.nic_affinity/across-sockets", gpus[3]}}},
		{"HGX within PIX", "hgx-8gpu-healthy", "gpu_nic_max_distance = PIX", refsOf("gpu.nic_affinity/paired", hgxGPUs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := hwRunOne(t, netFixture(tc.fixture), "gpu.nic_affinity", checks.Options{Expect: sysPairsClass(t, tc.expect)})
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s %s", diff, r.Status, r.Summary)
			}
		})
	}
}

func refsOf(id string, units []string) []findingRef {
	var out []findingRef
	for _, u := range units {
		out = append(out, findingRef{id, u})
	}
	return out
}

// The warning says what crossing the sockets costs and that nothing is
// misplaced; the failure cites the class's line.
func TestSysPairsWording(t *testing.T) {
	r := hwRunOne(t, netFixture("gpu4-nics-other-socket"), "gpu.nic_affinity", checks.Options{})
	for _, want := range []string{
		"GPU0 0000:98:00.0 (H100 PCIe) on NUMA node 1, which has no RDMA NIC: its NIC mlx5_0 (0000:18:00.0) is on NUMA node 0 — SYS",
		"crosses the inter-socket link (UPI/xGMI)", "NCCL does not use GPUDirect RDMA there",
		"Nothing is misplaced", "set gpu_nic_max_distance",
	} {
		if !strings.Contains(r.Summary+"\n"+r.Remedy, want) {
			t.Errorf("warning lacks %q:\n%s\n%s", want, r.Summary, r.Remedy)
		}
	}
	r = hwRunOne(t, netFixture("gpu4-nics-other-socket"), "gpu.nic_affinity", checks.Options{Expect: sysPairsClass(t, "gpu_nic_max_distance = NODE")})
	for _, want := range []string{"farther than NODE (expect.conf:3 gpu_nic_max_distance = NODE)", "at NODE or nearer"} {
		if !strings.Contains(r.Summary+"\n"+r.Remedy, want) {
			t.Errorf("failure lacks %q:\n%s\n%s", want, r.Summary, r.Remedy)
		}
	}
	if !strings.Contains(r.Expected, "at most NODE (expect.conf:3 gpu_nic_max_distance = NODE)") {
		t.Errorf("expected %q does not name the class's limit", r.Expected)
	}
}
