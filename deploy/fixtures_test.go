package deploy

import (
	"fmt"
	"os"
	"testing"

	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// TestMain makes testdata/hosts, which the node_exporter and privilege tests
// run rdmadoctor on: the host fixtures are generated or unpacked from their
// archives, not committed.
func TestMain(m *testing.M) {
	if err := sysfstest.Materialize("../testdata"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}
