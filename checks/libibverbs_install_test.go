package checks_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

const debLib = "/usr/lib/x86_64-linux-gnu"

// li is a libibverbs.install finding about a unit (a library path, a provider).
func li(slug, unit string) findingRef { return findingRef{"libibverbs.install/" + slug, unit} }

func TestLibibverbsInstallFixtures(t *testing.T) {
	for _, tc := range []struct {
		fixture   string
		status    report.Status
		exit      int
		rootCause string
		want      []findingRef
		says      []string // the paths the summary must name
	}{
		{"cx5-roce-healthy", report.Pass, 0, "", []findingRef{li("provider", "mlx5"), li("ok", debLib+"/libibverbs.so.1")},
			[]string{debLib + "/libibverbs.so.1 → " + debLib + "/libibverbs.so.1.14.44.0"}},
		{"cx6-ib-healthy", report.Pass, 0, "", []findingRef{li("provider", "mlx5"), li("ok", "/lib64/libibverbs.so.1")}, nil},
		{"rxe-softroce", report.Pass, 0, "", []findingRef{li("provider", "rxe"), li("ok", debLib+"/libibverbs.so.1")}, nil},
		{"libibverbs-dangling-link", report.Fail, 16, "libibverbs.install", []findingRef{li("dangling", debLib+"/libibverbs.so.1")},
			[]string{debLib + "/libibverbs.so.1 -> " + debLib + "/libibverbs.so.1.14.44.0"}},
		{"libibverbs-two-copies", report.Fail, 16, "libibverbs.install", []findingRef{li("two-copies", ""), li("provider", "mlx5")},
			[]string{"/usr/lib64/libibverbs.so.1.14.56.0", debLib + "/libibverbs.so.1.14.44.0"}},
		{"provider-missing", report.Fail, 16, "libibverbs.install", []findingRef{li("provider-missing", "mlx5")},
			[]string{"/etc/libibverbs.d/mlx5.driver", debLib + "/libibverbs/libmlx5-rdmav*.so"}},
		{"libibverbs-missing", report.Fail, 16, "libibverbs.install", []findingRef{li("not-installed", "")}, nil},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			r := hwRun(t, filepath.Join(hostsDir, tc.fixture), checks.Options{}, "libibverbs.install")
			c := hwResult(t, r, "libibverbs.install")
			if c.Status != tc.status {
				t.Fatalf("%s: %s; want %s", c.Status, c.Summary, tc.status)
			}
			if diff := cmp.Diff(tc.want, refs(c.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			for _, s := range tc.says {
				if !strings.Contains(c.Summary, s) {
					t.Errorf("summary %q does not say %q", c.Summary, s)
				}
			}
			if r.ExitCode != tc.exit || (tc.rootCause != "" && *r.RootCause != tc.rootCause) {
				t.Errorf("exit %d root cause %v, want %d %s", r.ExitCode, r.RootCause, tc.exit, tc.rootCause)
			}
			if c.Status == report.Fail && c.Remedy == "" {
				t.Error("a failure without a remedy")
			}
		})
	}
}

func TestLibibverbsInstallRemedies(t *testing.T) {
	for _, tc := range []struct{ fixture, want string }{
		{"libibverbs-missing", "apt-get install libibverbs1 ibverbs-providers"},
		{"provider-missing", "apt-get install ibverbs-providers"},
		{"libibverbs-dangling-link", "dpkg -S " + debLib + "/libibverbs.so.1"},
		{"libibverbs-two-copies", "The loader uses /usr/lib64/libibverbs.so.1.14.56.0"},
		// Each copy's owner, with the distribution's own tool (Debian here).
		{"libibverbs-two-copies", "`dpkg -S /usr/lib64/libibverbs.so.1.14.56.0`; `dpkg -S " + debLib + "/libibverbs.so.1.14.44.0`"},
		// Which copy to keep: the one of the kernel side in use.
		{"libibverbs-two-copies", "Keep the copy that belongs to the kernel side in use: MLNX_OFED/DOCA-OFED kernel modules (`modinfo -F filename mlx5_core` under updates/ or extra/)"},
	} {
		fixture, want := tc.fixture, tc.want
		res := hwRunOne(t, filepath.Join(hostsDir, fixture), "libibverbs.install", checks.Options{})
		if !strings.Contains(res.Remedy, want) {
			t.Errorf("%s: remedy %q does not say %q", fixture, res.Remedy, want)
		}
	}
}

// libVariant builds the healthy ConnectX-5 host, changes it and runs the check.
func libVariant(t *testing.T, mut func(*sysfstest.Tree), opts checks.Options) checks.Result {
	t.Helper()
	tr := sysfstest.Build(sysfstest.CX5RoCE())
	mut(tr)
	return hwRunOne(t, hwWrite(t, tr), "libibverbs.install", opts)
}

func TestLibibverbsInstallFindings(t *testing.T) {
	rocky := "NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.3\"\nPRETTY_NAME=\"Rocky Linux 9.3 (Blue Onyx)\"\n"
	sles := "NAME=\"SLES\"\nID=\"sles\"\nID_LIKE=\"suse\"\nPRETTY_NAME=\"SUSE Linux Enterprise Server 15 SP5\"\n"
	dropLib := func(tr *sysfstest.Tree) {
		for p := range tr.Files {
			if strings.Contains(p, "libibverbs") {
				tr.Remove(p)
			}
		}
		for p := range tr.Links {
			if strings.Contains(p, "libibverbs") {
				tr.Remove(p)
			}
		}
		sysfstest.WriteLDCache(tr)
	}
	notInstalled := []findingRef{li("not-installed", "")}
	healthy := []findingRef{li("provider", "mlx5"), li("ok", debLib+"/libibverbs.so.1")}
	for _, tc := range []struct {
		name         string
		mut          func(*sysfstest.Tree)
		opts         checks.Options
		status       report.Status
		want         []findingRef
		says, remedy string // a path or a number the summary names; a command of the remedy
	}{
		{"RHEL family without the library", func(tr *sysfstest.Tree) {
			dropLib(tr)
			tr.File("/etc/os-release", rocky)
		}, checks.Options{}, report.Fail, notInstalled, "", "dnf install libibverbs"},
		{"SUSE without the library", func(tr *sysfstest.Tree) {
			dropLib(tr)
			tr.File("/etc/os-release", sles)
		}, checks.Options{}, report.Fail, notInstalled, "", "zypper install libibverbs1 rdma-core"},
		{"no os-release", func(tr *sysfstest.Tree) {
			dropLib(tr)
			tr.Remove("/etc/os-release")
		}, checks.Options{}, report.Fail, notInstalled, "", "RHEL family: libibverbs; SUSE: libibverbs1 rdma-core"},
		{"corrupt loader cache", func(tr *sysfstest.Tree) { tr.File(sysfs.LDSOCache, "glibc-ld.so.cache1.1\x00\x00") },
			checks.Options{}, report.Error, []findingRef{li("cache-unreadable", "")}, "etc/ld.so.cache", "ldconfig"},
		{"no loader cache", func(tr *sysfstest.Tree) { tr.Remove(sysfs.LDSOCache) }, checks.Options{}, report.Warn,
			[]findingRef{li("no-cache", ""), li("provider", "mlx5")}, "", "ldconfig"},
		{"library only in a standard directory", func(tr *sysfstest.Tree) {
			tr.File(sysfs.LDSOCache, string(sysfstest.EncodeLDCache(nil, "")))
		}, checks.Options{}, report.Warn, []findingRef{li("provider", "mlx5"), li("not-cached", debLib+"/libibverbs.so.1")}, "", "ldconfig"},
		{"stale cache entry", func(tr *sysfstest.Tree) {
			tr.File("/usr/local/lib/libibverbs.so.1", "\x7fELF\x02")
			sysfstest.WriteLDCache(tr)
			tr.Remove("/usr/local/lib/libibverbs.so.1")
		}, checks.Options{}, report.Warn, []findingRef{li("cache-stale", "/usr/local/lib/libibverbs.so.1"), li("provider", "mlx5")}, "", "ldconfig"},
		{"a hand-built copy in /usr/local", func(tr *sysfstest.Tree) {
			tr.File("/usr/local/lib/libibverbs.so.1.14.57.0", "\x7fELF\x02")
			tr.Link("/usr/local/lib/libibverbs.so.1", "libibverbs.so.1.14.57.0")
			sysfstest.WriteLDCache(tr)
		}, checks.Options{}, report.Fail, []findingRef{li("two-copies", ""), li("provider-missing", "mlx5")},
			// which copy the loader picks, and how it finds it
			"/usr/local/lib/libibverbs.so.1.14.57.0 (/usr/local/lib/libibverbs.so.1, via /etc/ld.so.cache) — the loader picks this one", "ld.so.conf.d"},
		{"merged /usr is one copy", func(tr *sysfstest.Tree) {
			tr.Link("/lib", "usr/lib")
			sysfstest.WriteLDCache(tr) // ldconfig lists /lib/x86_64-linux-gnu paths now
		}, checks.Options{}, report.Pass, []findingRef{li("provider", "mlx5"), li("ok", "/lib/x86_64-linux-gnu/libibverbs.so.1")}, "", ""},
		{"provider link dangling", func(tr *sysfstest.Tree) { tr.Remove(debLib + "/libmlx5.so.1.24.44.0") }, checks.Options{}, report.Fail,
			[]findingRef{li("provider-missing", "mlx5")}, "libmlx5-rdmav34.so -> " + debLib + "/libmlx5.so.1.24.44.0", "ibverbs-providers"},
		{"driver file names an absolute prefix", func(tr *sysfstest.Tree) {
			tr.Attr("/etc/libibverbs.d/mlx5.driver", "driver /opt/vendor/lib/libmlx5")
			tr.File("/opt/vendor/lib/libmlx5-rdmav34.so", "\x7fELF\x02")
		}, checks.Options{}, report.Pass, healthy, "", ""},
		{"a 32-bit library", func(tr *sysfstest.Tree) { tr.File(debLib+"/libibverbs.so.1.14.44.0", "\x7fELF\x01") }, checks.Options{}, report.Fail,
			[]findingRef{li("not-loadable", debLib+"/libibverbs.so.1")}, "32-bit", "real library"},
		{"not an ELF file", func(tr *sysfstest.Tree) { tr.File(debLib+"/libibverbs.so.1.14.44.0", "garbage") }, checks.Options{}, report.Fail,
			[]findingRef{li("not-loadable", debLib+"/libibverbs.so.1")}, "not an ELF shared object", "real library"},
		{"--libibverbs names a missing file", func(*sysfstest.Tree) {}, checks.Options{Libibverbs: "/opt/nothing/libibverbs.so.1"}, report.Fail,
			[]findingRef{li("explicit-absent", "/opt/nothing/libibverbs.so.1"), li("provider", "mlx5")}, "", ""},
		{"provider for a software device", func(tr *sysfstest.Tree) {
			tr.Remove(debLib + "/libibverbs/librxe-rdmav34.so")
		}, checks.Options{}, report.Pass, healthy, "", ""}, // no rxe device on this host: not needed
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := libVariant(t, tc.mut, tc.opts)
			if res.Status != tc.status || !strings.Contains(res.Summary, tc.says) {
				t.Fatalf("%s: %s; want %s saying %q\n%s", res.Status, res.Summary, tc.status, tc.says, strings.Join(res.Details, "\n"))
			}
			if diff := cmp.Diff(tc.want, refs(res.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			if !strings.Contains(res.Remedy, tc.remedy) {
				t.Errorf("remedy %q does not say %q", res.Remedy, tc.remedy)
			}
		})
	}
}

func TestLibibverbsInstallSoftwareProvider(t *testing.T) {
	tr := sysfstest.Build(sysfstest.RXE())
	tr.Remove(debLib + "/libibverbs/librxe-rdmav34.so")
	tr.Remove("/etc/libibverbs.d/rxe.driver")
	res := hwRunOne(t, hwWrite(t, tr), "libibverbs.install", checks.Options{})
	if diff := cmp.Diff([]findingRef{li("provider-missing", "rxe")}, refs(res.Findings)); res.Status != report.Fail || diff != "" {
		t.Errorf("%s: %s\n%s", res.Status, res.Summary, diff)
	}
}

// TestLibibverbsInstallLive judges this machine's own installation and
// compares the finding with what the system's ldconfig says.
func TestLibibverbsInstallLive(t *testing.T) {
	out, err := exec.Command("ldconfig", "-p").Output()
	if err != nil {
		t.Skipf("ldconfig -p: %v", err)
	}
	arch := map[string]string{"amd64": "x86-64", "arm64": "AArch64"}[runtime.GOARCH]
	listed := false
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "libibverbs.so.1 (") && (arch == "" || strings.Contains(l, arch)) {
			listed = true
		}
	}
	res := hwRunOne(t, "/", "libibverbs.install", checks.Options{})
	switch {
	case listed && res.Status != report.Pass && res.Status != report.Warn && !strings.Contains(res.Summary, "copies") && !strings.Contains(res.Summary, "provider"):
		t.Errorf("ldconfig lists libibverbs.so.1 but the check says %s: %s", res.Status, res.Summary)
	case !listed && res.Status == report.Pass:
		t.Errorf("ldconfig does not list libibverbs.so.1 but the check passes: %s", res.Summary)
	}
	t.Logf("%s: %s", res.Status, res.Summary)
}
