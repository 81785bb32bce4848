package checks_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// testdataDir is the repository's testdata: the trees under testdata/hosts
// are made from the generator (sysfs/sysfstest) and the archives in
// testdata/host-archives by sysfstest.Materialize, in TestMain.
const testdataDir = "../testdata"

const hostsDir = testdataDir + "/" + sysfstest.HostsDir

// TestFixtures keeps the materialised host fixtures equal to their sources, the
// generator and the archives: a fixture is changed by changing sysfstest or
// the archive (the diff a reviewer reads), never by editing testdata/hosts,
// which Materialize rewrites only when a source changes.
func TestFixtures(t *testing.T) {
	for _, name := range sysfstest.Fixtures() {
		t.Run(name, func(t *testing.T) {
			tree, err := sysfstest.Fixture(name)
			if err != nil {
				t.Fatal(err)
			}
			assertMaterialised(t, name, tree.WriteFixture)
		})
	}
	archived, err := sysfstest.ArchivedFixtures(testdataDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(archived) == 0 {
		t.Fatalf("no archived fixture in %s/%s", testdataDir, sysfstest.ArchiveDir)
	}
	for _, name := range archived {
		t.Run(name, func(t *testing.T) {
			tree, err := sysfstest.ArchivedFixture(testdataDir, name)
			if err != nil {
				t.Fatal(err)
			}
			assertMaterialised(t, name, tree.Write)
		})
	}
}

// assertMaterialised compares testdata/hosts/NAME with what write makes.
func assertMaterialised(t *testing.T, name string, write func(dir string) error) {
	t.Helper()
	tmp := t.TempDir()
	if err := write(tmp); err != nil {
		t.Fatal(err)
	}
	want, err := sysfstest.Digest(tmp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := sysfstest.Digest(filepath.Join(hostsDir, name))
	if err != nil {
		t.Fatalf("fixture %s missing: %v", name, err)
	}
	if got != want {
		t.Fatalf("testdata/hosts/%s differs from its source (edited by hand?): remove testdata/hosts.stamp and run `make fixtures`", name)
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	if err := sysfstest.Materialize(testdataDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	checks.LogFindings()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		// The whole package ran: every declared finding must have been
		// produced by a fixture or a test, with all its slots, and every
		// result a check returned must be only its declared findings.
		if faults := checks.FindingCoverage(); faults != "" {
			fmt.Fprintf(os.Stderr, "the finding catalog's promise is broken:\n%s\n", faults)
			code = 1
		}
	}
	if largeTmp != "" {
		os.RemoveAll(largeTmp) // the generated large host: ~450 MB of small files
	}
	os.Exit(code)
}
