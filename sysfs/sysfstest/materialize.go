package sysfstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The host fixtures are not committed as trees: testdata/hosts/NAME is made
// from its source by Materialize, and is ignored by git. A fixture's source is
// either
//   - the generator (Fixtures, Fixture): its Go code is the fixture, and
//   - a host archive, testdata/host-archives/NAME.tree (see ParseArchive),
//     for a tree that is not generated: one captured from a real machine, with
//     its sources note at its head.
//
// so a fixture's change shows to a reviewer as the diff of that Go code or of
// that one archive.
const (
	// HostsDir is the directory, under testdata, that the trees are written to.
	HostsDir = "hosts"
	// ArchiveDir holds the archived fixtures, one NAME.tree each.
	ArchiveDir = "host-archives"
	// ArchiveExt ends an archived fixture's file name.
	ArchiveExt = ".tree"
	// stampFile records, per fixture, the digest of the source it was last
	// written from; beside the hosts rather than in them, since tests list
	// testdata/hosts and expect only host roots there.
	stampFile = "hosts.stamp"
	lockFile  = "hosts.lock"
	// writerVersion changes when the way a tree is written does, so that
	// every fixture is rewritten.
	writerVersion = "materialize v1"
)

// fixtureSource is one fixture to materialise: its digest and how to write it.
type fixtureSource struct {
	name   string
	digest string
	write  func(dir string) error
}

// Materialize makes testdata/hosts (testdata is the repository's testdata
// directory): every generated fixture and every archived one, each rewritten
// only when the digest of its source differs from the one testdata/hosts.stamp
// records for it, or its directory is gone. A fixture that no longer has a
// source is removed; other directories there are left alone. Test processes
// that call it at once (go test ./... runs packages in parallel) take turns
// on testdata/hosts.lock.
func Materialize(testdata string) error { return materialize(testdata, Fixtures()) }

// materialize is Materialize for the named generated fixtures only.
func materialize(testdata string, generated []string) (err error) {
	unlock, err := lockPath(filepath.Join(testdata, lockFile))
	if errors.Is(err, fs.ErrPermission) {
		return checkCurrent(testdata, generated)
	}
	if err != nil {
		return fmt.Errorf("materialize fixtures: lock: %w", err)
	}
	defer unlock()
	sources, err := fixtureSources(testdata, generated)
	if err != nil {
		return err
	}
	stampPath := filepath.Join(testdata, stampFile)
	stamp := readStamp(stampPath)
	hosts := filepath.Join(testdata, HostsDir)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		return fmt.Errorf("materialize fixtures: %w", err)
	}
	changed := false
	defer func() {
		if changed {
			err = errors.Join(err, writeStamp(stampPath, stamp))
		}
	}()
	for _, src := range staleSources(sources, stamp, hosts) {
		delete(stamp, src.name)
		changed = true
		if err := replaceTree(filepath.Join(hosts, src.name), src.write); err != nil {
			return fmt.Errorf("materialize fixture %s: %w", src.name, err)
		}
		stamp[src.name] = src.digest
	}
	current := map[string]bool{}
	for _, src := range sources {
		current[src.name] = true
	}
	for name := range stamp {
		if !current[name] {
			changed = true
			delete(stamp, name)
			if err := os.RemoveAll(filepath.Join(hosts, name)); err != nil {
				return fmt.Errorf("materialize fixtures: remove %s, which has no source any more: %w", name, err)
			}
		}
	}
	return nil
}

// staleSources are the sources whose tree is missing or was written from
// another digest.
func staleSources(sources []fixtureSource, stamp map[string]string, hosts string) []fixtureSource {
	var stale []fixtureSource
	for _, src := range sources {
		if _, err := os.Lstat(filepath.Join(hosts, src.name)); err != nil || stamp[src.name] != src.digest {
			stale = append(stale, src)
		}
	}
	return stale
}

// checkCurrent stands in for Materialize in a process that may not write
// testdata — a test's helper that the test re-runs as an unprivileged user:
// it can only use the fixtures as they are, so it only checks that they are
// current. One that may not even read testdata/hosts reads no fixture, and
// has nothing to check.
func checkCurrent(testdata string, generated []string) error {
	hosts := filepath.Join(testdata, HostsDir)
	if _, err := os.Stat(hosts); errors.Is(err, fs.ErrPermission) {
		return nil
	}
	sources, err := fixtureSources(testdata, generated)
	if err != nil {
		return err
	}
	if stale := staleSources(sources, readStamp(filepath.Join(testdata, stampFile)), hosts); len(stale) > 0 {
		return fmt.Errorf("materialize fixtures: %s is not current, and this user may not write %s (run make fixtures)", stale[0].name, hosts)
	}
	return nil
}

// replaceTree writes a tree beside dir and then puts it in dir's place, so a
// failed write leaves no half tree under the fixture's name.
func replaceTree(dir string, write func(string) error) error {
	tmp := filepath.Join(filepath.Dir(filepath.Dir(dir)), HostsDir+".tmp-"+filepath.Base(dir))
	if err := write(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// fixtureSources lists the named generated fixtures and the archived ones,
// sorted by name; a name given by both is an error.
func fixtureSources(testdata string, generated []string) ([]fixtureSource, error) {
	var out []fixtureSource
	for _, name := range generated {
		t, err := Fixture(name)
		if err != nil {
			return nil, err
		}
		out = append(out, fixtureSource{name: name, digest: treeDigest(t), write: t.WriteFixture})
	}
	archived, err := ArchivedFixtures(testdata)
	if err != nil {
		return nil, err
	}
	for _, name := range archived {
		if _, generated := fixtures[name]; generated {
			return nil, fmt.Errorf("fixture %s is both generated and archived (%s)", name, archivePath(testdata, name))
		}
		p := archivePath(testdata, name)
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("read fixture archive: %w", err)
		}
		sum := sha256.Sum256([]byte(writerVersion + "\narchive\n" + string(data)))
		out = append(out, fixtureSource{name: name, digest: hex.EncodeToString(sum[:]), write: func(dir string) error {
			_, t, err := ParseArchive(data)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			return t.Write(dir)
		}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// ArchivedFixtures lists the fixtures kept as host archives under
// testdata/host-archives, sorted.
func ArchivedFixtures(testdata string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(testdata, ArchiveDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list fixture archives: %w", err)
	}
	var names []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ArchiveExt); ok && e.Type().IsRegular() {
			names = append(names, name)
		}
	}
	return names, nil
}

// ArchivedFixture reads the named archived fixture's tree.
func ArchivedFixture(testdata, name string) (*Tree, error) {
	p := archivePath(testdata, name)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read fixture archive: %w", err)
	}
	_, t, err := ParseArchive(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return t, nil
}

func archivePath(testdata, name string) string {
	return filepath.Join(testdata, ArchiveDir, name+ArchiveExt)
}

// treeDigest is a hash of everything WriteFixture writes from t.
func treeDigest(t *Tree) string {
	h := sha256.New()
	io.WriteString(h, writerVersion+"\ngenerated\n")
	for _, p := range sortedKeys(t.Files) {
		fmt.Fprintf(h, "f %q %d\n", p, len(t.Files[p]))
		io.WriteString(h, t.Files[p])
	}
	for _, p := range sortedKeys(t.Links) {
		fmt.Fprintf(h, "l %q %q\n", p, t.Links[p])
	}
	for _, p := range sortedKeys(t.Dirs) {
		fmt.Fprintf(h, "d %q %v\n", p, t.hasChildren(p))
	}
	for _, p := range sortedKeys(t.Modes) {
		fmt.Fprintf(h, "m %q %o\n", p, t.Modes[p])
	}
	facts, _ := json.Marshal(t.Facts) // Facts holds plain data: it always marshals
	fmt.Fprintf(h, "facts %s\n", facts)
	return hex.EncodeToString(h.Sum(nil))
}

// readStamp reads "NAME DIGEST" lines; a missing or unreadable stamp is an
// empty one (every fixture is then written).
func readStamp(p string) map[string]string {
	stamp := map[string]string{}
	data, err := os.ReadFile(p)
	if err != nil {
		return stamp
	}
	for _, line := range strings.Split(string(data), "\n") {
		if name, digest, ok := strings.Cut(line, " "); ok {
			stamp[name] = digest
		}
	}
	return stamp
}

func writeStamp(p string, stamp map[string]string) error {
	var b strings.Builder
	for _, name := range sortedKeys(stamp) {
		fmt.Fprintf(&b, "%s %s\n", name, stamp[name])
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write fixture stamp: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("write fixture stamp: %w", err)
	}
	return nil
}
