package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// outputMode is the permission of --output and --state files: node_exporter
// and node-problem-detector read them as other users.
const outputMode = 0o644

// writeFileAtomic replaces path with what render writes, or leaves it as it
// was: the bytes go to a temporary file in the same directory (so the rename
// never crosses a file system), which is synced, renamed over path, and the
// directory synced. On any failure the temporary file is removed and the
// error names path. A reader (node_exporter, node-problem-detector) sees the
// old file or the new one, never half of one.
func writeFileAtomic(path string, render func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s (left as it was): %w", path, err)
		}
	}()
	if err = render(tmp); err != nil {
		return err
	}
	if err = tmp.Chmod(outputMode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// syncDir makes a rename durable; a file system that cannot sync a
// directory has still renamed, so its error is not the caller's.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// renderReport writes rep in the format --format names; colour and width
// follow w's terminal, so a file gets plain text.
func renderReport(w io.Writer, f *flags, host *sysfs.Host, rep *report.Report) error {
	switch f.format {
	case "json":
		return report.WriteJSON(w, rep)
	case "prometheus":
		return report.WritePrometheus(w, rep)
	default:
		return report.WriteText(w, withKernelLogPointers(host, rep), report.TextOptions{
			Color: useColor(w, f.noColor), Verbose: f.verbose,
			Width: textWidth(w), NotRun: notRun(f.checkIDs, rep)})
	}
}

// writeOutputs writes the report where the flags say: stdout or --output,
// and the JSON state for --state. A run interrupted by a signal is partial:
// it goes to stdout only, and --output and --state keep the last complete
// run's report. Errors name the file; EPIPE on stdout is passed through.
func writeOutputs(stdout io.Writer, f *flags, host *sysfs.Host, rep *report.Report, interrupted bool, kr keptRun) error {
	var errs []error
	if kr.state != nil && !interrupted {
		errs = append(errs, kr.save(f.fleet.state, rep))
	}
	switch {
	case f.fleet.output == "" || f.fleet.output == "-":
		errs = append(errs, renderReport(stdout, f, host, rep))
	case !interrupted:
		errs = append(errs, writeFileAtomic(f.fleet.output, func(w io.Writer) error { return renderReport(w, f, host, rep) }))
	}
	return errors.Join(errs...)
}
