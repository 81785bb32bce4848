// Package fakeverbs builds the fake libibverbs that the tests of the
// probes, the peer protocol and the command run against
// (verbs/probe/testdata/fakeibverbs.c), once per test process. It is test
// support, as sysfs/sysfstest is: no production code imports it.
package fakeverbs

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Source is the fake library's C source, relative to the module root.
const Source = "verbs/probe/testdata/fakeibverbs.c"

var (
	once    sync.Once
	lib     string
	failure string
)

// Library returns the path of the built libibverbs.so.1. Without gcc or
// <infiniband/verbs.h> the test skips, saying what to install — except
// under CI=true, where it fails, as a compile error always does.
func Library(tb testing.TB) string {
	tb.Helper()
	once.Do(func() { lib, failure = build() })
	if lib == "" {
		if strings.HasPrefix(failure, "gcc:") || os.Getenv("CI") != "" {
			tb.Fatal(failure)
		}
		tb.Skip(failure)
	}
	return lib
}

// build compiles the library into a temporary directory; it returns the
// library's path, or "" and why not.
func build() (string, string) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", "gcc not found: install gcc and libibverbs-dev"
	}
	src, err := moduleFile(Source)
	if err != nil {
		return "", err.Error()
	}
	dir, err := os.MkdirTemp("", "fakeibverbs")
	if err != nil {
		return "", err.Error()
	}
	so := filepath.Join(dir, "libibverbs.so.1")
	// -pthread: the peer modes answer the other process from a thread.
	out, err := exec.Command(gcc, "-shared", "-fPIC", "-pthread", "-o", so, src).CombinedOutput()
	if err != nil {
		if bytes.Contains(out, []byte("infiniband/verbs.h")) {
			return "", "<infiniband/verbs.h> not found: install libibverbs-dev"
		}
		return "", "gcc: " + err.Error() + "\n" + string(out)
	}
	return so, ""
}

// moduleFile finds rel below the module root, the nearest directory above
// the test's working directory (its package) that holds go.mod.
func moduleFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, filepath.FromSlash(rel)), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the test's directory: cannot find " + rel)
		}
		dir = parent
	}
}

// Cleanup removes the built library; a package's TestMain calls it after
// its tests.
func Cleanup() {
	if lib != "" {
		os.RemoveAll(filepath.Dir(lib))
	}
}
