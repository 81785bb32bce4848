package main

import (
	"fmt"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
)

// withKernelLogPointers returns the report to print for a person: on a
// replayed snapshot, every check that is not ok and whose fix says to read
// the kernel log ("dmesg") gets a details line saying where that log is —
// the snapshot's kernel.log, with its last RDMA line — or why the snapshot
// has none. Whoever replays a snapshot cannot run dmesg on that host. The
// JSON report is left as the live host's: a replay must equal it.
func withKernelLogPointers(host *sysfs.Host, rep *report.Report) *report.Report {
	if host.Live() {
		return rep
	}
	if _, err := host.ReadFile(snapshot.ManifestFile); err != nil {
		return rep // a fixture, not a snapshot: it never had a kernel log
	}
	var note string
	lines, err := host.KernelLog()
	switch {
	case err != nil:
		note = fmt.Sprintf("kernel log: not in this snapshot (%v)", err)
	case len(lines) == 0:
		note = fmt.Sprintf("kernel log: the snapshot's %s holds no RDMA line (none in the kernel's buffer when it was taken)", sysfs.KernelLogFile)
	default:
		note = fmt.Sprintf("kernel log: %d RDMA line(s) in the snapshot (%s), read it instead of dmesg; the last: %s", len(lines), sysfs.KernelLogFile, lines[len(lines)-1])
	}
	out := *rep
	out.Checks = make([]report.CheckResult, len(rep.Checks))
	for i, c := range rep.Checks {
		if c.Status != report.Pass && c.Status != report.Skip && mentionsKernelLog(c.Remedy) {
			c.Details = append(append([]string(nil), c.Details...), note)
		}
		out.Checks[i] = c
	}
	return &out
}

func mentionsKernelLog(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "dmesg") || strings.Contains(s, "kernel log") || strings.Contains(s, "journalctl -k")
}
