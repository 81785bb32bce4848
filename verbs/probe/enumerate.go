package probe

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/verbs"
)

// enumerate is the child side of Enumerate: what ibv_devices would show.
func enumerate(em *emitter, library string) *Enumeration {
	t0 := time.Now()
	en := &Enumeration{Library: library, Devices: []EnumDevice{}}
	if en.Library == "" {
		en.Library = verbs.DefaultLibrary
	}
	defer func() { en.Millis = millis(time.Since(t0)) }()
	em.emit(event{Kind: "begin", Step: "dlopen " + en.Library})
	lib, err := verbs.Open(library)
	if err != nil {
		var le *verbs.LoadError
		var me *verbs.MissingSymbolsError
		switch {
		case errors.As(err, &le):
			en.LoadError = le.Loader
		case errors.As(err, &me):
			en.MissingSymbols = me.Symbols
			en.LoadedFrom, _ = mappedLibraries()
		default:
			en.LoadError = err.Error()
		}
		return en
	}
	_, before := mappedLibraries()
	em.emit(event{Kind: "begin", Step: "ibv_get_device_list"})
	dl, err := lib.GetDeviceList()
	var after []string
	en.LoadedFrom, after = mappedLibraries()
	en.Providers = newOnes(before, after)
	if err != nil {
		e := verbs.ErrnoOf(err)
		en.ListErrno = int(e)
		en.ListErrnoName = verbs.ErrnoName(e)
		en.ListError = err.Error()
		return en
	}
	defer dl.Free()
	for _, d := range dl.Devices {
		en.Devices = append(en.Devices, EnumDevice{
			Name:      d.Name,
			NodeGUID:  verbs.FormatGUID(d.GUID()),
			UverbsDev: d.DevName,
			IBDevPath: d.IBDevPath,
			NodeType:  int(d.NodeType),
			Transport: int(d.TransportType),
		})
	}
	return en
}

// mappedLibraries reads /proc/self/maps for the libibverbs file the loader
// mapped and every shared object mapped. The providers the library loads
// in ibv_get_device_list are the objects that appear during that call
// (lib<name>-rdmav<N>.so is often a symlink to lib<name>.so.1.*, which
// is the name the maps show).
func mappedLibraries() (libibverbs string, objects []string) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return "", nil
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 {
			continue
		}
		path := fields[len(fields)-1]
		base := filepath.Base(path)
		switch {
		case strings.HasPrefix(base, "libibverbs.so"):
			libibverbs = path
		}
		if strings.Contains(base, ".so") && !seen[path] {
			seen[path] = true
			objects = append(objects, path)
		}
	}
	sort.Strings(objects)
	return libibverbs, objects
}

// newOnes returns the elements of after that are not in before.
func newOnes(before, after []string) []string {
	had := map[string]bool{}
	for _, b := range before {
		had[b] = true
	}
	var out []string
	for _, a := range after {
		if !had[a] {
			out = append(out, a)
		}
	}
	return out
}

func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
