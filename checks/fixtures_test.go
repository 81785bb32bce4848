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

var update = flag.Bool("update", false, "rewrite testdata/hosts from the fixture generator (sysfs/sysfstest)")

const hostsDir = "../testdata/hosts"

// TestFixtures keeps the committed host fixtures equal to the generator's
// output: a fixture is changed by changing sysfstest and running with -update,
// never by hand.
func TestFixtures(t *testing.T) {
	for _, name := range sysfstest.Fixtures() {
		t.Run(name, func(t *testing.T) {
			tree, err := sysfstest.Fixture(name)
			if err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(hostsDir, name)
			if *update {
				if err := tree.WriteFixture(dir); err != nil {
					t.Fatal(err)
				}
				return
			}
			tmp := t.TempDir()
			if err := tree.WriteFixture(tmp); err != nil {
				t.Fatal(err)
			}
			want, err := sysfstest.Digest(tmp)
			if err != nil {
				t.Fatal(err)
			}
			got, err := sysfstest.Digest(dir)
			if err != nil {
				t.Fatalf("fixture %s missing: run `go test ./checks -run TestFixtures -update` (%v)", name, err)
			}
			if got != want {
				t.Fatalf("testdata/hosts/%s differs from the generator: run `go test ./checks -run TestFixtures -update`", name)
			}
		})
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
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
