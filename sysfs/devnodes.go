package sysfs

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// DevInfiniband is where udev creates the RDMA character devices
// (uverbsN, rdma_cm, umadN, issmN).
const DevInfiniband = "/dev/infiniband"

// DevNode is one /dev entry as stat(2) saw it and as open(2) answered the
// user who looked. A fixture or snapshot cannot hold character devices, so
// these facts travel in the facts file ("dev_nodes"); a live host stats and
// opens the real node.
type DevNode struct {
	Path  string `json:"path"`            // "/dev/infiniband/uverbs0"
	Type  string `json:"type"`            // DevChar, "block", "dir", "file", "symlink", "other"
	Major uint32 `json:"major,omitempty"` // device number of a char or block node
	Minor uint32 `json:"minor,omitempty"`
	Mode  string `json:"mode"` // permission bits in octal, "0666"
	UID   int    `json:"uid"`
	GID   int    `json:"gid"`
	// Open is what open(O_RDWR) answered the capturing user: "ok", an errno
	// name ("EACCES", "ENXIO"), or "" when it was not tried (not a char device).
	Open string `json:"open,omitempty"`
}

// Node types of DevNode.Type.
const (
	DevChar   = "char"
	DevOpenOK = "ok"
)

// DevNodeFacts is the "dev_nodes" section of the facts file: the directories
// that were listed and every node found in them. A path inside a listed
// directory that is not among Nodes did not exist; a path outside them was
// not recorded.
type DevNodeFacts struct {
	// User is who opened the nodes: "uid=1000 gid=1000", or "uid=0 gid=0".
	User  string    `json:"user,omitempty"`
	Dirs  []string  `json:"dirs"`
	Nodes []DevNode `json:"nodes"`

	indexOnce sync.Once
	byPath    map[string]int // clean path → index in Nodes
	byDir     map[string][]int
}

// index builds the path and directory lookups once: a large host records
// a node per device, and every device looks its node up.
func (df *DevNodeFacts) index() {
	df.indexOnce.Do(func() {
		df.byPath = make(map[string]int, len(df.Nodes))
		df.byDir = map[string][]int{}
		for i, n := range df.Nodes {
			c := path.Clean("/" + n.Path)
			if _, dup := df.byPath[c]; !dup {
				df.byPath[c] = i
			}
			df.byDir[path.Dir(c)] = append(df.byDir[path.Dir(c)], i)
		}
	})
}

// DevNumber prints major:minor as the kernel's "dev" attribute does.
func (n DevNode) DevNumber() string { return fmt.Sprintf("%d:%d", n.Major, n.Minor) }

// ParseDevNumber parses a sysfs "dev" attribute, "231:192".
func ParseDevNumber(s string) (major, minor uint32, err error) {
	s = strings.TrimSpace(s)
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not major:minor", trimForMsg(s))
	}
	ma, err1 := strconv.ParseUint(a, 10, 32)
	mi, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("%q is not major:minor", trimForMsg(s))
	}
	return uint32(ma), uint32(mi), nil
}

// DevNode describes one device node: live by stat and a trial open (closed
// at once; opening a uverbs node creates no verbs resources), in a fixture
// from the facts file. A node that does not exist is an error for which
// IsNotExist is true.
func (h *Host) DevNode(p string) (DevNode, error) {
	p = path.Clean("/" + p)
	h.note(p, AccessStat)
	if h.Live() {
		return statDevNode(p)
	}
	df, err := h.devNodeFacts(path.Dir(p))
	if err != nil {
		return DevNode{}, err
	}
	df.index()
	if i, ok := df.byPath[p]; ok {
		return df.Nodes[i], nil
	}
	return DevNode{}, &PathError{Op: "stat", Path: p + " (recorded in " + h.Display(FactsFile) + ")", Err: fs.ErrNotExist}
}

// DevNodes lists the nodes in a /dev directory, sorted by path.
func (h *Host) DevNodes(dir string) ([]DevNode, error) {
	dir = path.Clean("/" + dir)
	h.note(dir, AccessList)
	if h.Live() {
		names, err := h.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		out := make([]DevNode, 0, len(names))
		for _, n := range names {
			if dn, err := statDevNode(path.Join(dir, n)); err == nil {
				out = append(out, dn)
			}
		}
		return out, nil
	}
	df, err := h.devNodeFacts(dir)
	if err != nil {
		return nil, err
	}
	df.index()
	_, dirExists := df.byPath[dir]
	var out []DevNode
	for _, i := range df.byDir[dir] {
		if n := df.Nodes[i]; path.Clean("/"+n.Path) != dir {
			out = append(out, n)
		}
	}
	if !dirExists && len(out) == 0 {
		return nil, &PathError{Op: "list", Path: dir + " (recorded in " + h.Display(FactsFile) + ")", Err: fs.ErrNotExist}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// DevNodeUser says who opened the recorded nodes ("" when live or unknown).
func (h *Host) DevNodeUser() string {
	if h.facts != nil && h.facts.DevNodes != nil {
		return h.facts.DevNodes.User
	}
	return ""
}

// devNodeFacts returns the recorded dev nodes when dir was one of the
// directories listed at capture time.
func (h *Host) devNodeFacts(dir string) (*DevNodeFacts, error) {
	if h.facts == nil || h.facts.DevNodes == nil {
		return nil, h.noFacts("dev_nodes")
	}
	df := h.facts.DevNodes
	for _, d := range df.Dirs {
		if path.Clean("/"+d) == dir {
			return df, nil
		}
	}
	return nil, fmt.Errorf("%s unknown: the directory was not listed in %s (dev_nodes.dirs)", dir, h.Display(FactsFile))
}

// CaptureDevNodes lists dirs on the live host, stat-ing and trial-opening
// every node, in the form the facts file records them.
func CaptureDevNodes(dirs ...string) *DevNodeFacts {
	out := &DevNodeFacts{User: currentUser(), Dirs: []string{}, Nodes: []DevNode{}}
	live := OpenLive()
	for _, d := range dirs {
		d = path.Clean("/" + d)
		out.Dirs = append(out.Dirs, d)
		dn, err := statDevNode(d)
		if err != nil {
			continue
		}
		out.Nodes = append(out.Nodes, dn)
		nodes, err := live.DevNodes(d)
		if err == nil {
			out.Nodes = append(out.Nodes, nodes...)
		}
	}
	return out
}

// fileType names the type bits of a mode.
func fileType(m fs.FileMode) string {
	switch {
	case m&fs.ModeCharDevice != 0:
		return DevChar
	case m&fs.ModeDevice != 0:
		return "block"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

// CurrentUser describes the effective user of this process, "uid=1000 gid=1000".
func CurrentUser() string { return currentUser() }
