package snapshot

import (
	"errors"
	"io/fs"
	"os"
	"sort"
	"syscall"
	"time"
)

// ManifestFile is the name, at the top of a snapshot root, of the file that
// says how the snapshot was taken and what it lacks.
const ManifestFile = "rdmadoctor.manifest.json"

// ManifestSchema names the manifest format version.
const ManifestSchema = "rdmadoctor.manifest/v1"

// Manifest is what a support engineer reads first: who took the snapshot,
// when, how, and what could not be copied and why.
type Manifest struct {
	Schema     string    `json:"schema"`
	Tool       string    `json:"tool"`
	Version    string    `json:"version"`
	CapturedAt time.Time `json:"captured_at"`
	Hostname   string    `json:"hostname,omitempty"`
	// Source is the root that was captured: "/" for the live host.
	Source string `json:"source"`
	Live   bool   `json:"live"`
	// UID and EUID of the capturing process: the process limits and
	// capabilities in proc/self are that process's, and a capture without
	// root may not read everything.
	UID      int     `json:"uid"`
	EUID     int     `json:"euid"`
	Redacted bool    `json:"redacted"`
	Level    int     `json:"level"`
	Complete bool    `json:"complete"` // false when the deadline stopped the copy
	Duration float64 `json:"duration_ms"`
	// Checks are the statuses the checks gave while the snapshot was taken:
	// a replay of the snapshot should give the same.
	Checks   []CheckStatus `json:"checks"`
	ExitCode int           `json:"exit_code"`
	Counts   Counts        `json:"counts"`
	// Unreadable lists the paths a check read that the capture could not.
	Unreadable []Problem `json:"unreadable,omitempty"`
	// Skipped lists paths deliberately left out (devices, over the limits).
	Skipped []Problem `json:"skipped,omitempty"`
	// Rewritten lists symlinks stored with another target than the host's
	// (absolute links made relative so that they stay inside the root).
	Rewritten []Rewrite `json:"rewritten_links,omitempty"`
	// FactsUnavailable repeats the facts file's "unavailable" map.
	FactsUnavailable map[string]string `json:"facts_unavailable,omitempty"`
	// NotRedacted lists copied files that --redact could not rewrite
	// (binary content).
	NotRedacted []string `json:"not_redacted,omitempty"`
	// KernelLog describes the kernel log kept; absent when it could not be
	// read (facts_unavailable["kernel_log"] says why).
	KernelLog *KernelLogNote `json:"kernel_log,omitempty"`
}

// CheckStatus is one check's outcome at capture time.
type CheckStatus struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// Counts sums up the snapshot.
type Counts struct {
	Recorded     int   `json:"paths_recorded"` // distinct paths the checks used
	Files        int   `json:"files"`
	Placeholders int   `json:"placeholders"` // files listed or looked at but not read
	Dirs         int   `json:"dirs"`
	Symlinks     int   `json:"symlinks"`
	Bytes        int64 `json:"bytes"`
}

// Problem is one path and why it is not (fully) in the snapshot.
type Problem struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
	Errno  string `json:"errno,omitempty"`
}

// Rewrite is one symlink stored with a different target.
type Rewrite struct {
	Path   string `json:"path"`
	Target string `json:"target"` // as on the host
	Stored string `json:"stored"` // as in the snapshot
}

func (m *Manifest) unreadable(p string, err error) {
	m.Unreadable = append(m.Unreadable, Problem{Path: "/" + p, Reason: describe(err), Errno: errnoName(err)})
}

func (m *Manifest) skipped(p, reason string) {
	m.Skipped = append(m.Skipped, Problem{Path: "/" + p, Reason: reason})
}

func (m *Manifest) count(t *Tree, recorded int) {
	m.Counts = Counts{Recorded: recorded, Bytes: t.Bytes()}
	for _, e := range t.entries {
		switch e.Kind {
		case Dir:
			m.Counts.Dirs++
		case Symlink:
			m.Counts.Symlinks++
		case File:
			m.Counts.Files++
			if e.Placeholder {
				m.Counts.Placeholders++
			}
		}
	}
	byPath := func(ps []Problem) {
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].Path < ps[j].Path })
	}
	byPath(m.Unreadable)
	byPath(m.Skipped)
	sort.SliceStable(m.Rewritten, func(i, j int) bool { return m.Rewritten[i].Path < m.Rewritten[j].Path })
}

// describe is an error without Go's "open /path:" prefix.
func describe(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return err.Error()
}

func errnoName(err error) string {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return ""
	}
	switch errno {
	case syscall.EACCES:
		return "EACCES"
	case syscall.EPERM:
		return "EPERM"
	case syscall.EINVAL:
		return "EINVAL"
	case syscall.EAGAIN:
		return "EAGAIN"
	case syscall.EIO:
		return "EIO"
	case syscall.ENODEV:
		return "ENODEV"
	case syscall.EOPNOTSUPP:
		return "EOPNOTSUPP"
	case syscall.ENXIO:
		return "ENXIO"
	case syscall.EBUSY:
		return "EBUSY"
	}
	return errno.Error()
}

// ids of the capturing process, for the manifest.
func processIDs() (uid, euid int) { return os.Getuid(), os.Geteuid() }
