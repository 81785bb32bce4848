package checks_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestLibibverbsInstallFindingIDs: each host gives the findings named: a
// candidate's about its path, a provider's about its name.
func TestLibibverbsInstallFindingIDs(t *testing.T) {
	const lib = debLib + "/libibverbs.so.1"
	ok := findingRef{"libibverbs.install/ok", lib}
	mlx5 := findingRef{"libibverbs.install/provider", "mlx5"}
	fixture := func(name string) func(t *testing.T) checks.Result {
		return func(t *testing.T) checks.Result {
			return hwRunOne(t, netFixture(name), "libibverbs.install", checks.Options{})
		}
	}
	variant := func(mut func(tr *sysfstest.Tree), opts checks.Options) func(t *testing.T) checks.Result {
		return func(t *testing.T) checks.Result { return libVariant(t, mut, opts) }
	}
	none := checks.Options{}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) checks.Result
		want []findingRef
	}{
		{"healthy", fixture("cx5-roce-healthy"), []findingRef{mlx5, ok}},
		{"not installed", fixture("libibverbs-missing"), []findingRef{{"libibverbs.install/not-installed", ""}}},
		{"dangling", fixture("libibverbs-dangling-link"), []findingRef{{"libibverbs.install/dangling", lib}}},
		{"two copies", fixture("libibverbs-two-copies"), []findingRef{{"libibverbs.install/two-copies", ""}, mlx5}},
		{"provider missing", fixture("provider-missing"), []findingRef{{"libibverbs.install/provider-missing", "mlx5"}}},
		{"corrupt cache", variant(func(tr *sysfstest.Tree) { tr.File(sysfs.LDSOCache, "glibc-ld.so.cache1.1\x00\x00") }, none),
			[]findingRef{{"libibverbs.install/cache-unreadable", ""}}},
		{"no cache", variant(func(tr *sysfstest.Tree) { tr.Remove(sysfs.LDSOCache) }, none),
			[]findingRef{{"libibverbs.install/no-cache", ""}, mlx5}},
		{"only in a standard directory", variant(func(tr *sysfstest.Tree) { tr.File(sysfs.LDSOCache, string(sysfstest.EncodeLDCache(nil, ""))) }, none),
			[]findingRef{mlx5, {"libibverbs.install/not-cached", lib}}},
		{"stale cache entry", variant(func(tr *sysfstest.Tree) {
			tr.File("/usr/local/lib/libibverbs.so.1", "\x7fELF\x02")
			sysfstest.WriteLDCache(tr)
			tr.Remove("/usr/local/lib/libibverbs.so.1")
		}, none), []findingRef{{"libibverbs.install/cache-stale", "/usr/local/lib/libibverbs.so.1"}, mlx5}},
		{"a link loop", variant(func(tr *sysfstest.Tree) {
			tr.Remove(debLib + "/libibverbs.so.1.14.44.0")
			tr.Link(debLib+"/libibverbs.so.1.14.44.0", "libibverbs.so.1")
		}, none), []findingRef{{"libibverbs.install/broken-chain", lib}}},
		{"a 32-bit library", variant(func(tr *sysfstest.Tree) { tr.File(debLib+"/libibverbs.so.1.14.44.0", "\x7fELF\x01") }, none),
			[]findingRef{{"libibverbs.install/not-loadable", lib}}},
		{"--libibverbs names a missing file", variant(func(*sysfstest.Tree) {}, checks.Options{Libibverbs: "/opt/nothing/libibverbs.so.1"}),
			[]findingRef{{"libibverbs.install/explicit-absent", "/opt/nothing/libibverbs.so.1"}, mlx5}},
		{"provider configuration unreadable", variant(func(tr *sysfstest.Tree) {
			for p := range tr.Files {
				if strings.HasPrefix(p, sysfs.LibibverbsConfDir+"/") {
					tr.Remove(p)
				}
			}
			tr.Remove(sysfs.LibibverbsConfDir)
			tr.File(sysfs.LibibverbsConfDir, "not a directory")
		}, none), []findingRef{{"libibverbs.install/provider-config-unreadable", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.run(t)
			if diff := cmp.Diff(tc.want, refs(r.Findings)); diff != "" {
				t.Errorf("findings (-want +got):\n%s\n%s: %s", diff, r.Status, r.Summary)
			}
		})
	}
}
