package sysfs

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// The specificity of a pam_limits line, as pam_limits.c numbers its
// sources: a line sets a limit only when it is at least as specific as the
// line that set it before (a lower number is more specific), so a later
// line of the same specificity overrides an earlier one, and a `*` line in
// limits.d cannot undo a user's or a group's line in limits.conf.
const (
	pamSrcUser    = 0 // a user name, a UID or a UID range
	pamSrcGroup   = 1 // @group, @:gid, @min:max (the primary GID)
	pamSrcDefault = 4 // *
	pamSrcNone    = 6 // not set by any line
)

// PamUser is the user pam_limits opens a session for.
type PamUser struct {
	Name   string
	UID    uint32
	GID    uint32   // the primary group: @min:max ranges compare it alone
	Groups []string // names of every group the user is in
	GIDs   []uint32 // their IDs, for @:gid
}

// PamLimit is what pam_limits sets for one item. A nil SoftAt/HardAt means
// no line applies: the session keeps the value of the program that opened
// it. Stop, when set, is a "<domain> -" line that matched: pam_limits then
// sets no limit at all, whatever the other lines say.
type PamLimit struct {
	Soft, Hard     uint64
	SoftAt, HardAt *LimitsEntry
	Stop           *LimitsEntry
}

// pamRange is a parsed "min:max" domain (after an optional @ or %).
type pamRange struct {
	kind     int // rangeNone, rangeOne (":n"), rangeMin ("n:"), rangeMM ("n:m")
	min, max uint32
}

const (
	rangeNone = iota
	rangeOne
	rangeMin
	rangeMM
)

// parsePamRange reads a UID or GID range as parse_uid_range does; ok is
// false for a malformed one, which pam_limits skips with a warning.
func parsePamRange(domain string) (pamRange, bool) {
	i := strings.IndexByte(domain, ':')
	if i < 0 {
		return pamRange{kind: rangeNone}, true
	}
	lo, hi := domain[:i], domain[i+1:]
	if lo != "" && (lo[0] == '@' || lo[0] == '%') {
		lo = lo[1:]
	}
	num := func(s string) (uint32, bool) {
		v, err := strconv.ParseUint(s, 10, 32)
		return uint32(v), err == nil
	}
	r := pamRange{kind: rangeMM}
	if lo == "" {
		r.kind = rangeOne
	} else {
		v, ok := num(lo)
		if !ok {
			return r, false
		}
		r.min = v
	}
	if hi == "" {
		if r.kind == rangeOne {
			return r, false
		}
		r.kind = rangeMin
		return r, true
	}
	v, ok := num(hi)
	if !ok {
		return r, false
	}
	r.max = v
	if r.kind == rangeOne {
		r.min = v
	}
	return r, true
}

func (r pamRange) holds(id uint32) bool {
	switch r.kind {
	case rangeOne:
		return id == r.max
	case rangeMin:
		return id >= r.min
	case rangeMM:
		return id >= r.min && id <= r.max
	}
	return false
}

// inGroup reports whether u is in the group named name, or in the group
// with the ID of a "@:gid" domain.
func (u PamUser) inGroup(name string) bool {
	for _, g := range u.Groups {
		if g == name {
			return true
		}
	}
	return false
}

func (u PamUser) hasGID(gid uint32) bool {
	if u.GID == gid {
		return true
	}
	for _, g := range u.GIDs {
		if g == gid {
			return true
		}
	}
	return false
}

// pamSource is the specificity with which a line's domain matches u, and
// whether it matches at all (parse_config_file's domain rules). A `%`
// domain matches only maxlogins lines, never a resource limit.
func pamSource(e *LimitsEntry, u PamUser) (int, bool) {
	d := e.Domain
	r, ok := parsePamRange(d)
	if !ok {
		return 0, false
	}
	switch {
	case d == u.Name && u.Name != "":
		return pamSrcUser, true
	case strings.HasPrefix(d, "@"):
		switch r.kind {
		case rangeNone:
			return pamSrcGroup, u.inGroup(d[1:])
		case rangeOne:
			return pamSrcGroup, u.hasGID(r.max)
		}
		return pamSrcGroup, r.holds(u.GID)
	case strings.HasPrefix(d, "%"):
		return 0, false
	case r.kind == rangeNone:
		return pamSrcDefault, d == "*"
	}
	return pamSrcUser, r.holds(u.UID)
}

// stops reports whether a "<domain> -" line ends pam_limits for u: a user
// name, a group or a UID/GID range that matches (`*` does not).
func stops(e *LimitsEntry, u PamUser) bool {
	src, ok := pamSource(e, u)
	return ok && src != pamSrcDefault
}

// PamMemlockFor evaluates the memlock lines of limits.conf and limits.d,
// in the order pam_limits reads them, for user u, following pam_limits.c:
// a line counts when its domain matches and it is at least as specific as
// the line that set the value before; "-" sets soft then hard, and stops
// at soft when soft was set more specifically; values are KiB; a line
// whose value does not parse is skipped. Limits are not clamped here: the
// caller knows the starter's values that fill what no line set.
func PamMemlockFor(entries []LimitsEntry, u PamUser) PamLimit {
	var out PamLimit
	srcSoft, srcHard := pamSrcNone, pamSrcNone
	for i := range entries {
		e := &entries[i]
		if e.NoLimits {
			if stops(e, u) {
				return PamLimit{Stop: e}
			}
			continue
		}
		if e.Item != "memlock" {
			continue
		}
		src, ok := pamSource(e, u)
		if !ok {
			continue
		}
		v, err := ParseLimitsMemlock(e.Value)
		if err != nil {
			continue
		}
		soft, hard := e.Type == "soft" || e.Type == "-", e.Type == "hard" || e.Type == "-"
		if soft {
			if srcSoft < src {
				continue
			}
			out.Soft, out.SoftAt, srcSoft = v, e, src
		}
		if hard && srcHard >= src {
			out.Hard, out.HardAt, srcHard = v, e, src
		}
	}
	return out
}

// LoginDefs is where useradd takes the first UID of an ordinary user.
const LoginDefs = "/etc/login.defs"

// DefaultUIDMin is UID_MIN when login.defs does not set it (shadow's default).
const DefaultUIDMin = 1000

// ParseLoginDefsUIDMin returns UID_MIN from login.defs ("UID_MIN  1000";
// '#' comments; the last assignment wins) and whether it was set.
func ParseLoginDefsUIDMin(data []byte) (uint32, bool) {
	var v uint32
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "UID_MIN" {
			continue
		}
		if n, err := strconv.ParseUint(f[1], 10, 32); err == nil {
			v, found = uint32(n), true
		}
	}
	return v, found
}

// OrdinaryUID is the UID of a first ordinary user: UID_MIN from
// /etc/login.defs, else shadow's default 1000. It says where it came from.
func (h *Host) OrdinaryUID() (uint32, string) {
	data, err := h.ReadFile(LoginDefs)
	if err == nil {
		if v, ok := ParseLoginDefsUIDMin(data); ok {
			return v, "UID_MIN in " + h.Display(LoginDefs)
		}
	}
	return DefaultUIDMin, "shadow's default UID_MIN"
}
