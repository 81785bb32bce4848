package main

import (
	"fmt"
	"os"

	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

// materializeFixtures makes testdata/hosts (the host fixtures are generated
// or unpacked from their archives, not committed) before any test reads it;
// TestMain calls it. A fixture whose source is unchanged is not rewritten.
func materializeFixtures() {
	if err := sysfstest.Materialize("../../testdata"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
