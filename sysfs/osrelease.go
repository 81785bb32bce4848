package sysfs

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
)

// OSRelease is the distribution as /etc/os-release names it.
type OSRelease struct {
	ID         string   // "debian", "rocky"
	IDLike     []string // "rhel centos fedora"
	VersionID  string   // "12", "9.3"
	PrettyName string
	Source     string // the file it came from
}

// Family groups distributions by their packaging: "debian" (Debian, Ubuntu
// and their derivatives), "rhel" (RHEL, Rocky, Alma, CentOS, Fedora, Oracle,
// Amazon Linux), "suse" (SLES, openSUSE), or "" when unknown.
func (o OSRelease) Family() string {
	ids := append([]string{o.ID}, o.IDLike...)
	for _, id := range ids {
		switch {
		case id == "debian" || id == "ubuntu":
			return "debian"
		case id == "rhel" || id == "fedora" || id == "centos" || id == "rocky" || id == "almalinux" || id == "ol" || id == "amzn":
			return "rhel"
		case id == "suse" || id == "sles" || id == "sled" || strings.HasPrefix(id, "opensuse"):
			return "suse"
		}
	}
	return ""
}

// ParseOSRelease parses the os-release format: KEY=value lines, values
// optionally quoted with shell quoting; unknown keys and malformed lines
// are skipped, as os-release(5) tells readers to.
func ParseOSRelease(data []byte) OSRelease {
	var o OSRelease
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1024), 64*1024)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || l[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		v = unquoteOSRelease(v)
		switch k {
		case "ID":
			o.ID = strings.ToLower(v)
		case "ID_LIKE":
			o.IDLike = strings.Fields(strings.ToLower(v))
		case "VERSION_ID":
			o.VersionID = v
		case "PRETTY_NAME":
			o.PrettyName = v
		}
	}
	return o
}

func unquoteOSRelease(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
		if v[0] == '"' {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
		}
		return v[1 : len(v)-1]
	}
	return v
}

// OSRelease reads /etc/os-release, or /usr/lib/os-release when the first
// is absent.
func (h *Host) OSRelease() (OSRelease, error) {
	var firstErr error
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		data, err := h.ReadFile(p)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		o := ParseOSRelease(data)
		o.Source = h.Display(p)
		return o, nil
	}
	return OSRelease{}, firstErr
}
