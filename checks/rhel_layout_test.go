package checks_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// The ConnectX-6 InfiniBand host and the fixtures made from it are Rocky
// Linux 9.3 hosts: the RHEL-family layout of rdma-core (rdma-core.spec:
// %{_libdir} is /usr/lib64, the libibverbs package owns the library, the
// providers in %{_libdir}/libibverbs and /etc/libibverbs.d/*.driver).

const elLib = "/usr/lib64"

// rhelFixtures are the bundled fixtures built on the RHEL-family layout.
var rhelFixtures = []string{"cx6-ib-healthy", "ib-no-sm", "gen5-card-gen4-slot", "counters-saturated", "rhel-provider-missing"}

func openFixture(t *testing.T, name string) *sysfs.Host {
	t.Helper()
	h, err := sysfs.Open(filepath.Join(hostsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func TestRHELLayoutFixtures(t *testing.T) {
	for _, name := range rhelFixtures {
		t.Run(name, func(t *testing.T) {
			h := openFixture(t, name)
			osr, err := h.OSRelease()
			if err != nil {
				t.Fatal(err)
			}
			if osr.ID != "rocky" || osr.VersionID != "9.3" || strings.Join(osr.IDLike, " ") != "rhel centos fedora" || osr.Family() != "rhel" {
				t.Errorf("os-release: ID %q VERSION_ID %q ID_LIKE %q family %q; want rocky 9.3, rhel centos fedora, rhel",
					osr.ID, osr.VersionID, osr.IDLike, osr.Family())
			}
			// Merged /usr: /lib64 is a relative link to usr/lib64.
			if l, err := h.Readlink("/lib64"); err != nil || l != "usr/lib64" {
				t.Errorf("/lib64 → %q (%v); want usr/lib64", l, err)
			}
			// libibverbs.so.1 → the rdma-core 46 file, in /usr/lib64.
			if c := h.FollowLinks(elLib + "/libibverbs.so.1"); !c.OK() || c.Final != elLib+"/libibverbs.so.1.14.46.0" {
				t.Errorf("libibverbs.so.1 chain %s (%v); want %s/libibverbs.so.1.14.46.0", c, c.Err, elLib)
			}
			if ok, _ := h.Exists("/usr/lib/x86_64-linux-gnu"); ok {
				t.Error("a Debian multiarch directory on a RHEL-family host")
			}
			if ok, _ := h.Exists("/etc/ld.so.conf.d/x86_64-linux-gnu.conf"); ok {
				t.Error("Debian's multiarch loader configuration on a RHEL-family host")
			}
			// The loader cache: what ldconfig writes on EL9 — every entry in
			// /lib64 (the first name of /usr/lib64 in its built-in order),
			// each reaching a file in /usr/lib64.
			cache, err := h.ReadLDCache()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(cache.Generator, "2.34") {
				t.Errorf("cache generator %q; want EL9's glibc 2.34 ldconfig", cache.Generator)
			}
			found := false
			for _, e := range cache.Entries {
				found = found || e.Name == "libibverbs.so.1" && e.Path == "/lib64/libibverbs.so.1"
				if !strings.HasPrefix(e.Path, "/lib64/") {
					t.Errorf("cache entry %s => %s; want a /lib64 path", e.Name, e.Path)
				}
				real := elLib + strings.TrimPrefix(e.Path, "/lib64")
				if c := h.FollowLinks(real); !c.OK() || !strings.HasPrefix(c.Final, elLib+"/") {
					t.Errorf("cache entry %s: %s does not reach a file in %s (%v)", e.Name, real, elLib, c.Err)
				}
			}
			if !found {
				t.Error("the cache has no libibverbs.so.1 => /lib64/libibverbs.so.1")
			}
		})
	}
}

func TestRHELLayoutProviders(t *testing.T) {
	h := openFixture(t, "cx6-ib-healthy")
	// A provider that is also a public library is a link to it, as
	// rdma_shared_provider installs it; the others are plain modules.
	for link, want := range map[string]string{
		elLib + "/libibverbs/libmlx5-rdmav34.so": "../libmlx5.so.1.24.46.0",
		elLib + "/libibverbs/libmlx4-rdmav34.so": "../libmlx4.so.1.0.46.0",
		elLib + "/libibverbs/libefa-rdmav34.so":  "../libefa.so.1.3.46.0",
	} {
		if got, err := h.Readlink(link); err != nil || got != want {
			t.Errorf("%s → %q (%v); want %s", link, got, err, want)
		}
	}
	if c := h.FollowLinks(elLib + "/libibverbs/librxe-rdmav34.so"); !c.OK() || len(c.Hops) != 1 {
		t.Errorf("librxe-rdmav34.so: %s (%v); want a plain file", c, c.Err)
	}
	conf, problems, err := h.ConfiguredProviders()
	if err != nil || len(problems) > 0 {
		t.Fatalf("provider configuration: %v %v", err, problems)
	}
	if _, ok := conf["mlx5"]; !ok {
		t.Errorf("/etc/libibverbs.d names %v; want mlx5", conf)
	}
}

// The default layout stays Debian 12's.
func TestDefaultLayoutIsDebian(t *testing.T) {
	h := openFixture(t, "cx5-roce-healthy")
	osr, err := h.OSRelease()
	if err != nil || osr.Family() != "debian" {
		t.Fatalf("os-release family %q (%v); want debian", osr.Family(), err)
	}
	if _, err := h.Lstat("/lib64"); err == nil {
		t.Error("/lib64 on the Debian layout")
	}
	if c := h.FollowLinks(debLib + "/libibverbs.so.1"); !c.OK() || c.Final != debLib+"/libibverbs.so.1.14.44.0" {
		t.Errorf("libibverbs.so.1 chain %s (%v)", c, c.Err)
	}
	if h := sysfstest.CX6IB(); h.Layout != sysfstest.Rocky93 {
		t.Error("CX6IB is not on the Rocky 9.3 layout")
	}
	if h := sysfstest.CX5RoCE(); h.Layout != nil {
		t.Error("CX5RoCE names a layout; the default (Debian 12) is meant")
	}
}

func TestRHELLayoutHealthyPassesLevel1(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "cx6-ib-healthy"), checks.Options{})
	if r.ExitCode != 0 || r.RootCause != nil {
		t.Fatalf("exit %d root cause %v; want 0 and none", r.ExitCode, r.RootCause)
	}
	for _, c := range r.Checks {
		if c.Level == 1 && c.Status != report.Pass && c.Status != report.Skip {
			t.Errorf("%s: %s: %s", c.ID, c.Status, c.Summary)
		}
	}
	c := hwResult(t, r, "libibverbs.install")
	if diff := cmp.Diff([]findingRef{li("provider", "mlx5"), li("ok", "/lib64/libibverbs.so.1")}, refs(c.Findings)); diff != "" {
		t.Errorf("libibverbs.install findings (-want +got):\n%s", diff)
	}
	// The RHEL path and the version the link resolves to.
	if c.Status != report.Pass || !strings.Contains(c.Summary, "/lib64/libibverbs.so.1 → /lib64/libibverbs.so.1.14.46.0") {
		t.Errorf("libibverbs.install: %s: %s", c.Status, c.Summary)
	}
}

func TestRHELProviderMissing(t *testing.T) {
	r := hwRun(t, filepath.Join(hostsDir, "rhel-provider-missing"), checks.Options{})
	if r.ExitCode != 16 || r.RootCause == nil || *r.RootCause != "libibverbs.install" {
		t.Fatalf("exit %d root cause %v; want 16 libibverbs.install", r.ExitCode, r.RootCause)
	}
	c := hwResult(t, r, "libibverbs.install")
	if c.Status != report.Fail {
		t.Fatalf("%s: %s; want fail", c.Status, c.Summary)
	}
	if diff := cmp.Diff([]findingRef{li("provider-missing", "mlx5")}, refs(c.Findings)); diff != "" {
		t.Errorf("findings (-want +got):\n%s", diff)
	}
	// The RHEL paths where the provider was looked for.
	for _, s := range []string{"/etc/libibverbs.d/mlx5.driver", "/lib64/libibverbs/libmlx5-rdmav*.so"} {
		if !strings.Contains(c.Summary, s) {
			t.Errorf("summary %q does not say %q", c.Summary, s)
		}
	}
	// On the RHEL family the providers come with rdma-core's libibverbs
	// package (rdma-core.spec: %files -n libibverbs holds
	// %{_libdir}/libibverbs/*.so and /etc/libibverbs.d/*.driver); Debian's
	// package names do not apply.
	for _, s := range []string{"dnf reinstall libibverbs", "rdma-core", "/usr/lib64/libibverbs/"} {
		if !strings.Contains(c.Remedy, s) {
			t.Errorf("remedy %q does not say %q", c.Remedy, s)
		}
	}
	for _, s := range []string{"apt-get", "ibverbs-providers", "dpkg"} {
		if strings.Contains(c.Remedy, s) {
			t.Errorf("remedy %q names Debian's %q on a Rocky host", c.Remedy, s)
		}
	}
}
