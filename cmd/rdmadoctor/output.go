package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/adapter"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// outputMode is the permission of the --output file: node_exporter's
// textfile collector reads it as its own, unprivileged user. (The state is
// state.Mode, 0600: only root reads it.)
const outputMode = 0o644

// writeFileAtomic replaces path with what render writes, or leaves it as it
// was (state.WriteAtomic): a target that is not a regular file — /dev/null,
// a FIFO, a symbolic link — is refused, the bytes go through a temporary
// file created O_EXCL|O_NOFOLLOW in the same directory, synced and renamed.
// A reader (node_exporter) sees the old file or the new one, never half of
// one; errors name path.
func writeFileAtomic(path string, render func(io.Writer) error) error {
	return state.WriteAtomic(path, outputMode, render)
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
		return writeText(w, func(w io.Writer) error {
			return report.WriteText(w, withKernelLogPointers(host, rep), report.TextOptions{
				Color: useColor(w, f.noColor), Verbose: f.verbose,
				Width: textWidth(w), NotRun: notRun(f.checkIDs, rep)})
		})
	}
}

// writeText writes what render writes, transliterated to ASCII when the
// locale is not UTF-8 (LANG=C, a cron job, a minimal container): arrows and
// dashes would otherwise reach the reader as mojibake or '?'.
func writeText(w io.Writer, render func(io.Writer) error) error {
	if adapter.UTF8Locale(os.Getenv) {
		return render(w)
	}
	var b strings.Builder
	if err := render(&b); err != nil {
		return err
	}
	_, err := io.WriteString(w, adapter.ASCIIText(b.String()))
	return err
}

// asciiWriter transliterates what is written through it to ASCII
// (adapter.ASCIIText): for the lines an adapter prints into a log.
// Each write is a whole line, so no character is split between two.
type asciiWriter struct{ w io.Writer }

func (a asciiWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(a.w, adapter.ASCIIText(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
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
		errs = append(errs, outputError(f.fleet.output, writeFileAtomic(f.fleet.output, func(w io.Writer) error { return renderReport(w, f, host, rep) })))
	}
	return errors.Join(errs...)
}

// outputError names --output's own fault when its directory is missing:
// the temporary file the writer could not create is not the operator's
// name for anything.
func outputError(path string, err error) error {
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	dir := filepath.Dir(path)
	if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
		return fmt.Errorf("--output %s: the directory %s does not exist (create it, or name a file in one that does)", path, dir)
	}
	return err
}
