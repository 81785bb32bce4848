package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// commit is set at build time with -ldflags "-X main.commit=…" (make build,
// make package), for builds without Go's own VCS stamp.
var commit = ""

// versionInfo is what `version` and `--version` print.
type versionInfo struct {
	Version  string
	Commit   string // vcs.revision; "" when the build did not record it
	Modified bool   // vcs.modified: built from a tree with uncommitted changes
	Go       string
	// LibPath is the libibverbs.so.1 the loader would open, LibFile the
	// file it reaches; "" when none is found.
	LibPath, LibFile string
}

// buildVersion reads the build info and finds libibverbs on the live host
// without loading it (every call into libibverbs runs in a child).
func buildVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v = withBuildSettings(v, bi)
	}
	if v.Commit == "" {
		v.Commit = commit
	}
	v.LibPath, v.LibFile = checks.LocateLibibverbs(sysfs.OpenLive(), "")
	return v
}

// withBuildSettings takes the commit and the Go version from the build info.
func withBuildSettings(v versionInfo, bi *debug.BuildInfo) versionInfo {
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// writeVersion prints the version, one fact a line.
func writeVersion(w io.Writer, v versionInfo) {
	commit := v.Commit
	switch {
	case commit == "":
		commit = "unknown (built without version control information)"
	case v.Modified:
		commit += " (modified: built with uncommitted changes)"
	}
	lib := "not found (libibverbs.install says why: rdmadoctor --check libibverbs.install)"
	switch {
	case v.LibPath != "" && v.LibFile != v.LibPath:
		lib = v.LibPath + " -> " + v.LibFile
	case v.LibPath != "":
		lib = v.LibPath
	}
	fmt.Fprintf(w, "rdmadoctor %s\ncommit      %s\ngo          %s\nlibibverbs  %s\n", v.Version, commit, v.Go, lib)
}

// cmdVersion is `rdmadoctor version`.
func cmdVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) == 1 && (args[0] == "--help" || args[0] == "-h") {
		fmt.Fprint(stdout, "usage: rdmadoctor version\n  the version, the commit it was built from, the Go version, and the libibverbs.so.1\n  the loader would use (found through the loader cache, never loaded)\n")
		return 0
	}
	if len(args) > 0 {
		fmt.Fprintf(stderr, "rdmadoctor version: takes no arguments, got %q\n", args[0])
		return report.ExitUsage
	}
	writeVersion(stdout, buildVersion())
	return 0
}
