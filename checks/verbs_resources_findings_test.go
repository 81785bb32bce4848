package checks_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// failFirst fails the named step of p with errno, dropping the steps after it.
func failFirst(t *testing.T, p *probe.Probe, name string, errno int, errnoName string) {
	t.Helper()
	failWith(t, p, name, errno, errnoName, name+": "+errnoName)
}

// failWith fails the named step of p with errno and the error msg, dropping
// the steps after it.
func failWith(t *testing.T, p *probe.Probe, name string, errno int, errnoName, msg string) {
	t.Helper()
	for i := range p.Steps {
		if p.Steps[i].Name == name {
			st := &p.Steps[i]
			st.OK, st.Errno, st.ErrnoName, st.Error = false, errno, errnoName, msg
			p.Steps = p.Steps[:i+1]
			return
		}
	}
	t.Fatalf("no step %q in %s", name, p.Name)
}

// level2Findings runs check id on one port, mlx5_0 port 1, whose recorded
// result edit changed, and compares the findings.
func level2Findings(t *testing.T, id, file string, edit func(pr *probe.PortResult), want []findingRef) {
	t.Helper()
	pr := checks.RecordedPort(t, file)
	if edit != nil {
		edit(pr)
	}
	r := checks.RunLevel2Case(t, id, level2One(pr, nil))
	if diff := cmp.Diff(want, refs(r.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s\n%s", diff, r.Summary)
	}
}

func TestVerbsResourcesFindings(t *testing.T) {
	fail := func(name string, errno int, errnoName string) func(pr *probe.PortResult) {
		return func(pr *probe.PortResult) { failFirst(t, &pr.Resources.Probe, name, errno, errnoName) }
	}
	for _, tc := range []struct {
		name, file string
		edit       func(pr *probe.PortResult)
		slug       string
	}{
		{"healthy", "rxe0-level2.json", nil, "created"},
		{"memlock", "rxe0-memlock64k.json", nil, "memlock"},
		{"device node permissions", "rxe0-level2.json", fail("ibv_open_device", 13, "EACCES"), "open-denied"},
		{"no device node", "rxe0-level2.json", fail("ibv_open_device", 2, "ENOENT"), "no-device-node"},
		{"CQ memory", "rxe0-level2.json", fail("ibv_create_cq", 12, "ENOMEM"), "queue-memlock"},
		{"caps refused", "rxe0-level2.json", fail("ibv_create_qp RC", 22, "EINVAL"), "create-qp-refused"},
		{"a destroy fails", "rxe0-level2.json", fail("ibv_destroy_qp RC", 16, "EBUSY"), "step-failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			level2Findings(t, "verbs.resources", tc.file, tc.edit, []findingRef{{"verbs.resources/" + tc.slug, "mlx5_0/1"}})
		})
	}
}
