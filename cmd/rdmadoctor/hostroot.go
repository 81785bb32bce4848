package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report/editdist"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// hostMarkers are what makes a directory a host root: a tree laid out like
// / (sys/, proc/), or the facts file or manifest of a fixture or snapshot.
// One is enough — a host that lacks parts is still judged, part by part.
var hostMarkers = []string{"sys/", "proc/", sysfs.FactsFile, snapshot.ManifestFile}

// notHostRoot says why dir cannot be a host root, or returns nil when it
// holds one of the host markers. A typo, or the parent of the fixtures,
// would otherwise be judged as a host with no RDMA NIC — a verdict about a
// host that does not exist. shown is how the error names dir; the host
// roots inside dir are named too when shown is dir's own path.
func notHostRoot(dir, shown string) error {
	var denied error
	for _, m := range hostMarkers {
		fi, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(m, "/")))
		if err == nil && (fi.IsDir() == strings.HasSuffix(m, "/")) {
			return nil
		}
		if denied == nil && errors.Is(err, fs.ErrPermission) {
			denied = err
		}
	}
	if denied != nil {
		// Not "not a host root": this user may not look inside it.
		return rootDenied(shown, denied)
	}
	msg := fmt.Sprintf("%s is not a host root: it has none of %s", shown, strings.Join(hostMarkers, ", "))
	if hosts := hostsInside(dir); len(hosts) > 0 && shown == dir {
		msg += fmt.Sprintf("; host roots inside it: %s", listSome(hosts, shown, 4))
	}
	return errors.New(msg)
}

// rootDenied is the error for a --root this user may not read: the path
// that refused, and what would let the run read it.
func rootDenied(shown string, err error) error {
	path := shown
	var pe *fs.PathError
	if errors.As(err, &pe) {
		path = pe.Path
	}
	return fmt.Errorf("%s: permission denied reading %s (uid %d): run as a user who may read it (root), or give a copy it can read", shown, path, os.Geteuid())
}

// hostsInside lists the subdirectories of dir that are host roots, sorted:
// given the parent of the fixtures, the operator sees what to add.
func hostsInside(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if len(out) >= 1000 {
			break // a huge directory is not worth listing further
		}
		if !e.IsDir() {
			continue
		}
		for _, m := range hostMarkers {
			if _, err := os.Lstat(filepath.Join(dir, e.Name(), strings.TrimSuffix(m, "/"))); err == nil {
				out = append(out, e.Name())
				break
			}
		}
	}
	sort.Strings(out)
	return out
}

// similarNames suggests, for a --root that does not exist, the entries of
// its parent directory that differ from its last element by a small edit
// (a typo): "cx5-roce-helthy" → "cx5-roce-healthy".
func similarNames(root string) []string {
	parent, base := filepath.Split(filepath.Clean(root))
	if parent == "" {
		parent = "."
	}
	ents, err := os.ReadDir(parent)
	if err != nil || base == "" {
		return nil
	}
	var out []string
	for _, e := range ents {
		if d := editdist.Distance(base, e.Name(), 3); d <= max(1, min(3, len(base)/4)) {
			out = append(out, filepath.Join(filepath.Dir(root), e.Name()))
		}
	}
	sort.Strings(out)
	return out
}

// listSome names up to n entries under dir, and how many more there are.
func listSome(names []string, dir string, n int) string {
	var parts []string
	for i, nm := range names {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-n))
			break
		}
		parts = append(parts, filepath.Join(dir, nm))
	}
	return strings.Join(parts, ", ")
}
