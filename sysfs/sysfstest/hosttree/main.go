// Command hosttree makes the host fixtures under testdata/hosts and packs a
// host directory into a host archive (the format is described in
// sysfs/sysfstest/archive.go).
//
//	go run ./sysfs/sysfstest/hosttree materialize [TESTDATA]   (make fixtures)
//	go run ./sysfs/sysfstest/hosttree pack DIR ARCHIVE
//
// materialize writes testdata/hosts from the generator and the archives in
// testdata/host-archives, rewriting only the fixtures whose source changed.
// pack replaces ARCHIVE with the tree under DIR, keeping ARCHIVE's sources
// note when it already exists.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/rdmadoctor/rdmadoctor/sysfs/sysfstest"
)

const usage = "usage: hosttree materialize [TESTDATA] | hosttree pack DIR ARCHIVE"

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hosttree:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	switch {
	case len(args) >= 1 && len(args) <= 2 && args[0] == "materialize":
		testdata := "testdata"
		if len(args) == 2 {
			testdata = args[1]
		}
		return sysfstest.Materialize(testdata)
	case len(args) == 3 && args[0] == "pack":
		return pack(args[1], args[2])
	}
	return errors.New(usage)
}

// pack writes the tree under dir to archive, under archive's existing note.
func pack(dir, archive string) error {
	note := "Sources: (say where this tree comes from and how to refresh it)"
	if old, err := os.ReadFile(archive); err == nil {
		if note, _, err = sysfstest.ParseArchive(old); err != nil {
			return fmt.Errorf("keep the note of %s: %w", archive, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	t, err := sysfstest.ReadTree(dir)
	if err != nil {
		return err
	}
	data, err := sysfstest.FormatArchive(note, t)
	if err != nil {
		return err
	}
	return os.WriteFile(archive, data, 0o644)
}
