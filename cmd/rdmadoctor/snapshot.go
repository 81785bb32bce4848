package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmadoctor/rdmadoctor/checks"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/sysfs/snapshot"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

// snapshotFlags are the flags of `rdmadoctor snapshot`.
type snapshotFlags struct {
	output     string
	redact     bool
	root       string
	timeout    time.Duration
	libibverbs string
}

func newSnapshotFlagSet(f *snapshotFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("rdmadoctor snapshot", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	fs.StringVarP(&f.output, "output", "o", "", "write the snapshot here: FILE.tar.gz (or .tgz), FILE.tar, or a directory (default: rdmadoctor-snapshot-HOST-TIME.tar.gz)")
	fs.BoolVar(&f.redact, "redact", false, "replace hostnames, IP addresses, MAC addresses, GUIDs and module serial numbers, consistently")
	fs.StringVar(&f.root, "root", "/", "capture this host directory or snapshot instead of the live host (e.g. to redact a snapshot)")
	fs.DurationVar(&f.timeout, "timeout", time.Minute, "deadline for the whole capture (and for unpacking an archive --root)")
	fs.StringVar(&f.libibverbs, "libibverbs", "", "open this libibverbs.so.1 instead of the loader's choice")
	return fs
}

// cmdSnapshot is `rdmadoctor snapshot [-o FILE.tar.gz|FILE.tar|DIR] [--redact]`: run
// the level-1 checks on a recording host, copy what they read, and write it
// with the facts and a manifest. Exit 0 when the snapshot is complete, 1
// when it could not be written or the deadline cut it short, 2 on a usage
// error.
func cmdSnapshot(args []string, stdout, stderr io.Writer) int {
	f, format, code := parseSnapshotArgs(args, stdout, stderr)
	if f == nil {
		return code
	}

	// The deadline and an interrupt cover unpacking an archive --root too.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	host, cleanup, err := openRootCtx(ctx, f.root)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: --root: %v\n", err)
		if ctx.Err() != nil {
			return report.ExitInternal
		}
		return report.ExitUsage
	}
	defer cleanup()

	exe, _ := os.Executable()
	memlock, _ := checks.ParseSize("64MiB")
	opts := checks.Options{Level: 1, MinMemlock: memlock, Libibverbs: f.libibverbs, Executable: exe, ProbeTimeout: 10 * time.Second}
	lv := &level1Capture{opts: opts}
	snap, capErr := snapshot.Capture(ctx, host, snapshot.Options{
		Exercise: lv.exercise,
		Verbs:    lv.verbs,
		IB:       checks.IBUmadFacts,
		IBFabric: checks.IBFabricFacts,
		Redact:   f.redact,
		Version:  version,
	})
	if snap == nil {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: %v\n", capErr)
		return report.ExitInternal
	}

	out := f.output
	if out == "" {
		out = defaultSnapshotName(snap.Manifest.Hostname, snap.Manifest.CapturedAt)
		format = snapshot.FormatTarGz
	}
	size, err := writeSnapshot(snap, out, format)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: %v\n", err)
		return report.ExitInternal
	}
	printSnapshotSummary(stdout, snap.Manifest, out, format, size)
	if capErr != nil {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: incomplete snapshot: %v\n", capErr)
		return report.ExitInternal
	}
	return 0
}

// parseSnapshotArgs parses and checks snapshot's flags before anything is
// captured: nil flags and the exit code when the command ends here (its
// help, or a usage error).
func parseSnapshotArgs(args []string, stdout, stderr io.Writer) (*snapshotFlags, snapshot.Format, int) {
	f := &snapshotFlags{}
	fs := newSnapshotFlagSet(f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, "rdmadoctor snapshot — capture this host's RDMA state in one file, to diagnose anywhere with --root\n\n"+
				"usage: rdmadoctor snapshot [-o FILE.tar.gz|FILE.tar|DIR] [--redact]\n\nflags:\n%s", fs.FlagUsages())
			return nil, 0, 0
		}
		fmt.Fprintf(stderr, "rdmadoctor snapshot: %s\n", flagError(err, fs))
		return nil, 0, report.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: unexpected argument %q; valid flags: %s\n", fs.Arg(0), flagNames(fs))
		return nil, 0, report.ExitUsage
	}
	if f.timeout <= 0 {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: --timeout %v: want a deadline above 0, such as 1m\n", f.timeout)
		return nil, 0, report.ExitUsage
	}
	format, err := snapshot.OutputFormat(f.output)
	if err != nil {
		fmt.Fprintf(stderr, "rdmadoctor snapshot: -o %v\n", err)
		return nil, 0, report.ExitUsage
	}
	// Found before the capture, not after it: the snapshot goes into a
	// directory that is there.
	if dir := filepath.Dir(f.output); f.output != "" {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "rdmadoctor snapshot: -o %s: the directory %s does not exist (create it, or name a file in one that does)\n", f.output, dir)
			return nil, 0, report.ExitUsage
		}
	}
	return f, format, 0
}

// writeSnapshot writes the snapshot at out in its format; the size is the
// file's (0 for a directory).
func writeSnapshot(snap *snapshot.Snapshot, out string, format snapshot.Format) (int64, error) {
	switch format {
	case snapshot.FormatTarGz:
		return snap.WriteTarGzFile(out)
	case snapshot.FormatTar:
		return snap.WriteTarFile(out)
	}
	return 0, snap.WriteDir(out)
}

// printSnapshotSummary says what was written, what could not be read and
// how to replay it.
func printSnapshotSummary(stdout io.Writer, m *snapshot.Manifest, out string, format snapshot.Format, size int64) {
	fmt.Fprintf(stdout, "wrote %s: %d files, %d symlinks, %d directories", out, m.Counts.Files, m.Counts.Symlinks, m.Counts.Dirs)
	if size > 0 {
		fmt.Fprintf(stdout, ", %s", humanBytes(size))
		if format == snapshot.FormatTarGz {
			fmt.Fprint(stdout, " compressed")
		}
	}
	if m.Redacted {
		fmt.Fprint(stdout, ", redacted")
	}
	fmt.Fprintln(stdout)
	if n := len(m.Unreadable); n > 0 {
		fmt.Fprintf(stdout, "%d path(s) could not be read (listed in %s), e.g. %s: %s\n", n, snapshot.ManifestFile, m.Unreadable[0].Path, m.Unreadable[0].Reason)
	}
	if kl := m.KernelLog; kl != nil {
		fmt.Fprintf(stdout, "kernel log: %d RDMA line(s) kept in %s\n", kl.Lines, kl.File)
	} else if why, ok := m.FactsUnavailable["kernel_log"]; ok {
		fmt.Fprintf(stdout, "kernel log not kept: %s\n", why)
	}
	if n := len(m.FactsUnavailable); n > 0 {
		fmt.Fprintf(stdout, "%d fact(s) could not be gathered (listed in %s under \"unavailable\")\n", n, sysfs.FactsFile)
	}
	fmt.Fprintf(stdout, "replay it anywhere with: rdmadoctor --root %s --level 1\n", out)
}

// level1Capture is what a capture runs: the level-1 diagnosis on the
// recording host, and then the libibverbs enumeration that diagnosis judged.
type level1Capture struct {
	opts checks.Options
	env  *checks.Env // the exercise's, for its enumeration
}

// exercise runs what a level-1 diagnosis runs — the level-1 checks, the
// inventory, the kernel release and host name of the report header — so
// that the recording host sees every read a replay will make.
func (c *level1Capture) exercise(ctx context.Context, h *sysfs.Host) ([]snapshot.CheckStatus, int) {
	all, _ := checks.Select(nil)
	var sel []*checks.Check
	for _, ch := range all {
		if ch.Level <= 1 {
			sel = append(sel, ch)
		}
	}
	env := checks.NewEnv(h, c.opts)
	c.env = env
	checks.StartEarly(ctx, env, sel)
	rep := &report.Report{Level: 1}
	rep.Host.Hostname = h.Hostname()
	rep.Host.Kernel, _ = h.KernelRelease()
	rep.Checks = checks.Run(ctx, env, sel)
	rep.Inventory = checks.Inventory(env)
	rep.Finish(false)
	out := make([]snapshot.CheckStatus, 0, len(rep.Checks))
	for _, ch := range rep.Checks {
		out = append(out, snapshot.CheckStatus{ID: ch.ID, Status: string(ch.Status)})
	}
	return out, rep.ExitCode
}

// verbs is the libibverbs enumeration for the facts file: the very answer
// libibverbs.devices judged during the exercise, so the replay judges it
// too. Only when the exercise made none (the check was blocked before the
// child started) does a child run now, so the snapshot still shows what
// the library lists.
func (c *level1Capture) verbs(ctx context.Context) (*sysfs.VerbsEnumeration, error) {
	if c.env != nil {
		if f, ok := checks.JudgedVerbs(ctx, c.env); ok {
			return f, nil
		}
	}
	if c.opts.Executable == "" {
		return nil, errors.New("cannot find this program's executable to start the verbs child")
	}
	return checks.VerbsFacts(probe.Enumerate(ctx, c.opts.Executable, c.opts.Libibverbs, c.opts.ProbeTimeout)), nil
}

// openRoot opens what --root names: a host directory (a fixture or an
// unpacked snapshot), "/" for the live host, or a snapshot archive
// (.tar.gz or .tar), which is checked and unpacked into a private
// temporary directory that cleanup removes. A snapshot, archive or
// directory (it holds a manifest), names paths as the captured host knew
// them, so its report reads as that host's own; a hand-made fixture names
// them under the directory. cleanup is never nil on success and closes the
// host too.
func openRoot(root string) (host *sysfs.Host, cleanup func(), err error) {
	return openRootCtx(context.Background(), root)
}

// openRootCtx is openRoot bounded by ctx: an interrupt or a deadline stops
// unpacking an archive, which then leaves nothing behind, and the error
// wraps ctx.Err().
func openRootCtx(ctx context.Context, root string) (host *sysfs.Host, cleanup func(), err error) {
	fi, err := os.Stat(root)
	if err == nil && fi.Mode().IsRegular() {
		dir, remove, err := snapshot.UnpackFile(ctx, root, snapshot.DefaultLimits())
		if err != nil {
			return nil, nil, err
		}
		if err := notHostRoot(dir, "the archive "+root); err != nil {
			remove()
			return nil, nil, err
		}
		h, err := sysfs.OpenSnapshot(dir)
		if err != nil {
			remove()
			return nil, nil, fmt.Errorf("snapshot %s: %w", root, err)
		}
		return h, func() { h.Close(); remove() }, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return nil, nil, rootDenied(root, err)
	}
	if errors.Is(err, os.ErrNotExist) {
		if near := similarNames(root); len(near) > 0 {
			return nil, nil, fmt.Errorf("%s does not exist; did you mean %s?", root, strings.Join(near, " or "))
		}
	}
	open := sysfs.Open
	if err == nil && fi.IsDir() && filepath.Clean(root) != "/" {
		if err := notHostRoot(root, root); err != nil {
			return nil, nil, err
		}
		if _, err := os.Lstat(filepath.Join(root, snapshot.ManifestFile)); err == nil {
			open = sysfs.OpenSnapshot
		}
	}
	h, err := open(root)
	if err != nil {
		return nil, nil, err
	}
	return h, func() { h.Close() }, nil
}

// defaultSnapshotName is rdmadoctor-snapshot-HOST-20060102T150405Z.tar.gz.
func defaultSnapshotName(host string, t time.Time) string {
	host = strings.Map(func(r rune) rune {
		if r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, host)
	if host == "" {
		host = "host"
	}
	return filepath.Clean(fmt.Sprintf("rdmadoctor-snapshot-%s-%s.tar.gz", host, t.UTC().Format("20060102T150405Z")))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
