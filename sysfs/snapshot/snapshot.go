// Package snapshot captures a host's RDMA state into one directory or
// .tar.gz, and unpacks such an archive safely for `--root`.
//
// What a snapshot holds is decided by the checks themselves: the capture
// runs them on a recording sysfs.Host, then copies exactly the paths they
// read — with every symlink met on the way, so sysfs's relative links
// resolve the same — plus the host's non-file facts (sysfs.FactsFile) and a
// manifest (ManifestFile). Replaying a snapshot is opening it as a host
// root: the same checks, the same code, the same report.
//
// Capture is read-only and bounded: a deadline (the context), a size per
// file and in total, a number of entries. A path it cannot read is written
// down in the manifest, not fatal. Unpack refuses hostile archives.
package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Limits bound a capture and an unpack.
type Limits struct {
	MaxFileBytes        int64 // one file's content
	MaxPlaceholderBytes int64 // a looked-at file kept as zeros of its size
	MaxTotalBytes       int64 // all file contents
	MaxEntries          int   // files, directories and symlinks
	MaxListEntries      int   // names kept from one listed directory
	// MaxArchiveBytes bounds an archive file read by Unpack, compressed
	// (0: twice MaxTotalBytes, plus room for headers).
	MaxArchiveBytes int64
}

// DefaultLimits are generous for any real host (a dual-port NIC snapshot is
// a few hundred entries and well under a megabyte) and small enough that a
// hostile archive cannot fill a disk.
func DefaultLimits() Limits {
	return Limits{
		MaxFileBytes:        8 << 20, // the host reader's own limit
		MaxPlaceholderBytes: 1 << 20,
		MaxTotalBytes:       256 << 20,
		MaxEntries:          50000,
		MaxListEntries:      4096,
		MaxArchiveBytes:     2*(256<<20) + tarOverhead,
	}
}

// Exercise runs the checks whose reads define the snapshot, on the
// recording host h, and says what they found.
type Exercise func(ctx context.Context, h *sysfs.Host) (checks []CheckStatus, exitCode int)

// VerbsEnumerator asks the real libibverbs for its device list (in the
// verbs child process) on the live host.
type VerbsEnumerator func(ctx context.Context) (*sysfs.VerbsEnumeration, error)

// Options configure a capture.
type Options struct {
	Exercise Exercise        // required
	Verbs    VerbsEnumerator // live host only; nil records the enumeration as unavailable
	// IB lists libibumad's ports on the live host (ib.*); nil records none.
	IB func(ctx context.Context) (*sysfs.IBUmadFacts, error)
	// IBFabric asks the fabric about each InfiniBand port (its SM, its
	// neighbour, its P_Key table) on the live host; nil records none.
	IBFabric func(ctx context.Context) (*sysfs.IBFabricFacts, error)
	Redact   bool
	Version  string // the tool's version, for the manifest
	Level    int    // the level of the exercised checks, for the manifest (default 1)
	Limits   Limits // zero: DefaultLimits()
	Now      func() time.Time
}

// Snapshot is a captured host: the copied tree, the facts and the manifest.
type Snapshot struct {
	Tree     *Tree
	Facts    *sysfs.Facts
	Manifest *Manifest
	// KernelLog is the RDMA part of the kernel log (sysfs.KernelLogFile),
	// nil when it could not be read (the facts say why).
	KernelLog []byte
}

// Capture runs opts.Exercise on h with recording on, then copies every path
// it read from h's root, gathers the facts, and (with opts.Redact) rewrites
// hostnames, addresses and GUIDs. The context's deadline bounds the whole
// capture; when it passes during the copy the snapshot is returned with
// Manifest.Complete false and the error.
func Capture(ctx context.Context, h *sysfs.Host, opts Options) (*Snapshot, error) {
	if opts.Exercise == nil {
		return nil, fmt.Errorf("capture: no checks to exercise")
	}
	if opts.Limits == (Limits{}) {
		opts.Limits = DefaultLimits()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Level == 0 {
		opts.Level = 1
	}
	start := opts.Now()
	uid, euid := processIDs()
	man := &Manifest{
		Schema: ManifestSchema, Tool: "rdmadoctor", Version: opts.Version, CapturedAt: start.UTC(),
		Source: h.Root(), Live: h.Live(), UID: uid, EUID: euid, Redacted: opts.Redact,
		Level: opts.Level, Complete: true,
	}

	h.Record()
	man.Checks, man.ExitCode = opts.Exercise(ctx, h)
	recorded := h.Recorded()

	facts := h.GatherFacts(recorded)
	if h.Live() {
		gatherLibraries(ctx, facts, opts)
	}
	man.Hostname = facts.Hostname
	if man.Hostname == "" {
		man.Hostname = h.Hostname()
	}

	c := &collector{ctx: ctx, src: h.Root(), lim: opts.Limits, tree: newTree(), man: man}
	err := c.collect(recorded)
	if err != nil {
		man.Complete = false
	}
	// Counted as Unpack counts them, so that what is written can be replayed.
	if n := (&Snapshot{Tree: c.tree}).archiveEntries(); n > opts.Limits.MaxEntries {
		return nil, fmt.Errorf("capture: %d entries, more than the limit of %d", n, opts.Limits.MaxEntries)
	}
	// A file that exists but failed to read (EINVAL counters, EACCES) fails
	// the same way on replay; one that was absent stays absent.
	s := &Snapshot{Tree: c.tree, Facts: facts, Manifest: man}
	captureKernelLog(h, s)
	for _, u := range man.Unreadable {
		if u.Errno != "" && u.Errno != "ENOENT" {
			if facts.ReadErrors == nil {
				facts.ReadErrors = map[string]string{}
			}
			facts.ReadErrors[u.Path] = u.Errno
		}
	}
	if len(facts.Unavailable) > 0 {
		man.FactsUnavailable = facts.Unavailable
	} else {
		facts.Unavailable = nil
	}
	if opts.Redact {
		redactSnapshot(s)
	}
	man.count(s.Tree, len(recorded))
	man.Duration = float64(opts.Now().Sub(start).Microseconds()) / 1000
	return s, err
}

// gatherLibraries adds what only the live host's libraries answer: the
// libibverbs enumeration, libibumad's ports and the InfiniBand fabric.
func gatherLibraries(ctx context.Context, facts *sysfs.Facts, opts Options) {
	gatherVerbs(ctx, facts, opts.Verbs)
	if opts.IB != nil {
		if v, err := opts.IB(ctx); err != nil {
			facts.Unavailable["ib_umad"] = err.Error()
		} else {
			facts.IBUmad = v
		}
	}
	if opts.IBFabric != nil {
		if v, err := opts.IBFabric(ctx); err != nil {
			facts.Unavailable["ib_fabric"] = err.Error()
		} else {
			facts.IBFabric = v
		}
	}
}

// gatherVerbs adds the libibverbs enumeration to the facts, or says why not.
func gatherVerbs(ctx context.Context, f *sysfs.Facts, enum VerbsEnumerator) {
	if f.Unavailable == nil {
		f.Unavailable = map[string]string{}
	}
	if enum == nil {
		f.Unavailable["libibverbs"] = "this build does not enumerate libibverbs devices during a capture"
		return
	}
	v, err := enum(ctx)
	if err != nil {
		f.Unavailable["libibverbs"] = err.Error()
		return
	}
	f.Libibverbs = v
}

// factsJSON and manifestJSON are the two files written at the top of a snapshot.
func (s *Snapshot) factsJSON() ([]byte, error) {
	b, err := json.MarshalIndent(s.Facts, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", sysfs.FactsFile, err)
	}
	return append(b, '\n'), nil
}

func (s *Snapshot) manifestJSON() ([]byte, error) {
	b, err := json.MarshalIndent(s.Manifest, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", ManifestFile, err)
	}
	return append(b, '\n'), nil
}
