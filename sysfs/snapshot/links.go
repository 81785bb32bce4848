package snapshot

import (
	"archive/tar"
	"context"
	"fmt"
	"strings"
)

// Symlink resolution for an archive that has not been written yet: every
// symlink is resolved through the archive's own table, as the kernel would
// resolve it in the unpacked tree, and must stay inside the host root.
//
// The work is linear in the archive: each link's target is walked once and
// its result kept, so a link met again (inside another link's target, or as
// an entry of its own) costs one lookup; positions are tree nodes, never
// rebuilt path strings. A hostile archive of ~4 KB whose links are
// thousands of components long and chained through each other costs one
// walk per link instead of one walk per link per hop per component.
// Beyond that, the total number of steps is capped (maxLinkSteps) and ctx is
// checked as the walk goes, so the run's deadline and an interrupt bound
// this phase as they bound the reads.

// maxLinkSteps bounds the path components walked for all the links of one
// archive. A real snapshot has a few hundred links of about ten components
// each; the cap is three orders of magnitude above that and costs well
// under a second.
const maxLinkSteps = 1 << 22

// ctxEvery is how many steps pass between two looks at ctx: cheap enough
// to be invisible, frequent enough to stop within a millisecond.
const ctxEvery = 1024

// lnode is one path of the archive, relative to the host root: a directory
// (named or implied), a file, or a symlink with its target.
type lnode struct {
	parent *lnode
	name   string
	kids   map[string]*lnode
	link   bool
	target string
	// The link's resolution, once known: where it leads and how many links
	// the kernel follows to get there (this one included).
	state byte // unresolved, resolving, resolved
	res   pos
	hops  int
}

const (
	unresolved byte = iota
	resolving
	resolved
)

// pos is a place the walk has reached: the node, or — once the walk has
// gone below a name the archive does not hold — that node and how many
// names below it. Nothing in the archive lies under a missing name, so no
// link can be met there, and ".." only climbs back towards the node.
// Treating missing names as directories is the cautious reading: the
// kernel would stop at ENOENT, this walk goes on to see where ".." leads.
type pos struct {
	n    *lnode
	virt int
}

func (n *lnode) path() string {
	var els []string
	for ; n.parent != nil; n = n.parent {
		els = append(els, n.name)
	}
	for i, j := 0, len(els)-1; i < j; i, j = i+1, j-1 {
		els[i], els[j] = els[j], els[i]
	}
	return strings.Join(els, "/")
}

// linkFault is why a link was refused; through says the walk had expanded
// another link when it went wrong.
type linkFault struct {
	kind    byte // escape, loop, chain, steps
	through bool
	at      *lnode // the link that looped, for a loop
	stopped bool   // ctx was done: not a refusal
}

const (
	faultEscape byte = iota + 1
	faultLoop
	faultChain
	faultSteps
)

type resolver struct {
	ctx   context.Context
	root  *lnode
	steps int
}

// buildTree makes the node tree of every path the archive names or implies,
// relative to the host root (prefix is the root plus "/", or "").
func buildTree(plan []planned, kinds map[string]byte, prefix string) *lnode {
	root := &lnode{}
	add := func(rel string) *lnode {
		n := root
		for rest := rel; rest != ""; {
			var el string
			el, rest, _ = strings.Cut(rest, "/")
			kid := n.kids[el]
			if kid == nil {
				if n.kids == nil {
					n.kids = map[string]*lnode{}
				}
				kid = &lnode{parent: n, name: el}
				n.kids[el] = kid
			}
			n = kid
		}
		return n
	}
	for name := range kinds {
		if rel, ok := strings.CutPrefix(name, prefix); ok {
			add(rel)
		}
	}
	for _, p := range plan {
		if rel, ok := strings.CutPrefix(p.name, prefix); ok && p.kind == tar.TypeSymlink {
			n := add(rel)
			n.link, n.target = true, p.link
		}
	}
	return root
}

// resolve returns where link l leads and how many links that follows.
// depth is how many link resolutions enclose this one: it never exceeds
// maxHops, since each adds a hop.
func (r *resolver) resolve(l *lnode, depth int) (pos, int, *linkFault) {
	switch l.state {
	case resolved:
		return l.res, l.hops, nil
	case resolving:
		return pos{}, 0, &linkFault{kind: faultLoop, at: l, through: depth > 1}
	}
	if depth > maxHops {
		return pos{}, 0, &linkFault{kind: faultChain, through: true}
	}
	l.state = resolving
	at, hops, f := r.walk(pos{n: l.parent}, l.target, depth)
	if f != nil {
		return pos{}, 0, f
	}
	l.state, l.res, l.hops = resolved, at, hops+1
	if l.hops > maxHops {
		return pos{}, 0, &linkFault{kind: faultChain, through: true}
	}
	return at, l.hops, nil
}

// walk follows target from at, expanding the links it meets, and returns
// where it ends and the links it followed.
func (r *resolver) walk(at pos, target string, depth int) (pos, int, *linkFault) {
	hops := 0
	for rest := target; rest != ""; {
		var el string
		el, rest, _ = strings.Cut(rest, "/")
		if r.steps++; r.steps > maxLinkSteps {
			return pos{}, 0, &linkFault{kind: faultSteps}
		}
		if r.steps%ctxEvery == 0 && r.ctx.Err() != nil {
			return pos{}, 0, &linkFault{stopped: true}
		}
		switch {
		case el == "" || el == ".":
		case el == ".." && at.virt > 0:
			at.virt--
		case el == "..":
			if at.n == r.root {
				return pos{}, 0, &linkFault{kind: faultEscape, through: depth > 1 || hops > 0}
			}
			at.n = at.n.parent
		case at.virt > 0:
			at.virt++
		default:
			kid := at.n.kids[el]
			switch {
			case kid == nil:
				at.virt = 1
			case kid.link:
				res, h, f := r.resolve(kid, depth+1)
				if f != nil {
					return pos{}, 0, f
				}
				if hops += h; hops+1 > maxHops {
					return pos{}, 0, &linkFault{kind: faultChain, through: true}
				}
				at = res
			default:
				at.n = kid
			}
		}
	}
	return at, hops, nil
}

// checkLinks resolves every symlink of the plan, in archive order, as the
// kernel would: ".." after a link climbs from the link's target, so a chain
// of links that each look harmless can still lead out, and is refused
// here. The walls are those of the host root (relative to the archive
// root, "" for the archive root): a link in a top directory chosen as the
// host root may not climb into the archive root. A link the kernel would
// refuse to follow (a loop, or more than maxHops links in one resolution:
// ELOOP) is refused too — no real snapshot holds one, and accepting it
// would only make the next reader pay for it.
func checkLinks(ctx context.Context, name string, plan []planned, kinds map[string]byte, root string) error {
	prefix := ""
	if root != "" {
		prefix = root + "/"
	}
	r := &resolver{ctx: ctx, root: buildTree(plan, kinds, prefix)}
	for _, p := range plan {
		if p.kind != tar.TypeSymlink {
			continue
		}
		rel, ok := strings.CutPrefix(p.name, prefix)
		if !ok {
			return &UnpackError{Archive: name, Entry: p.name, Reason: fmt.Sprintf("symlink outside the host root %q", root)}
		}
		if ctx.Err() != nil {
			return stopped(ctx, name)
		}
		n := r.root
		for rest := rel; rest != ""; {
			var el string
			el, rest, _ = strings.Cut(rest, "/")
			n = n.kids[el]
		}
		if _, _, f := r.resolve(n, 1); f != nil {
			if f.stopped {
				return stopped(ctx, name)
			}
			return &UnpackError{Archive: name, Entry: p.name, Reason: f.reason(p.link, rel, root)}
		}
	}
	return nil
}

// reason says why the link to target (at rel in the host root) is refused.
func (f *linkFault) reason(target, rel, root string) string {
	shown := shortQuote(target)
	switch f.kind {
	case faultLoop:
		return fmt.Sprintf("symlink loop: resolving %s leads back to the link %s (the kernel refuses it: ELOOP)", shown, shortQuote(f.at.path()))
	case faultChain:
		return fmt.Sprintf("symlink to %s follows more than %d links (the kernel refuses it: ELOOP)", shown, maxHops)
	case faultSteps:
		return fmt.Sprintf("resolving the archive's symlinks takes more than %d path steps (a real snapshot takes a few thousand)", maxLinkSteps)
	}
	if root != "" && escapesLexically(rel, target) {
		return fmt.Sprintf("symlink to %s leads outside the host root %q", shown, root)
	}
	if !f.through {
		return fmt.Sprintf("symlink to %s leads outside the snapshot root", shown)
	}
	return fmt.Sprintf("symlink to %s leads outside the snapshot root through other links", shown)
}

// shortQuote quotes s for a message, cut to its first and last 60 bytes
// when longer: a hostile target is up to PATH_MAX bytes of "x/x/…", and
// the reason must stay readable on one line.
func shortQuote(s string) string {
	const keep = 60
	if len(s) <= 2*keep+16 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q…(%d bytes)…%q", s[:keep], len(s), s[len(s)-keep:])
}
