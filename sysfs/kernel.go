package sysfs

import (
	"fmt"
	"strconv"
	"strings"
)

// OSReleasePath holds the running kernel's release string (`uname -r`).
const OSReleasePath = "/proc/sys/kernel/osrelease"

// KernelRelease returns the running kernel's release, e.g. "6.1.0-18-amd64".
func (h *Host) KernelRelease() (string, error) {
	s, err := h.ReadAttr(OSReleasePath)
	if err != nil {
		return "", err
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("read %s: empty", h.Display(OSReleasePath))
	}
	return s, nil
}

// KernelVersion is the numeric head of a kernel release.
type KernelVersion struct{ Major, Minor, Patch int }

func (v KernelVersion) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// Less orders versions.
func (v KernelVersion) Less(o KernelVersion) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

// ParseKernelRelease reads "major.minor[.patch]" from the head of a release
// string such as "5.14.0-362.el9.x86_64" or "6.1.0-18-amd64".
func ParseKernelRelease(rel string) (KernelVersion, error) {
	rel = strings.TrimSpace(rel)
	head := rel
	if i := strings.IndexFunc(head, func(r rune) bool { return r != '.' && (r < '0' || r > '9') }); i >= 0 {
		head = head[:i]
	}
	parts := strings.Split(strings.Trim(head, "."), ".")
	if len(parts) < 2 {
		return KernelVersion{}, fmt.Errorf("kernel release %q: want major.minor", rel)
	}
	var nums [3]int
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil || n > 1<<20 {
			return KernelVersion{}, fmt.Errorf("kernel release %q: bad number %q", rel, parts[i])
		}
		nums[i] = n
	}
	return KernelVersion{nums[0], nums[1], nums[2]}, nil
}
