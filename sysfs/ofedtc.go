package sysfs

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// OFEDTrafficClassPath is MLNX_OFED's (and DOCA-OFED's) per-port traffic
// class file of an mlx5 RDMA device. Writing "tclass=<N>" to it sets a
// global traffic class: every RoCE packet of the port leaves with that
// ToS byte, whatever class the application or rdma_cm asked for; reading
// it prints "Global tclass=<N>" while one is set. The upstream kernel has
// no such file.
func OFEDTrafficClassPath(dev string, port int) string {
	return path.Join(InfinibandClass, dev, "tc", strconv.Itoa(port), "traffic_class")
}

// OFEDTrafficClass is what the traffic_class file says of a port.
type OFEDTrafficClass struct {
	// Global is set when the file names a global class.
	Global bool
	// TClass is the global class's ToS byte (DSCP << 2 | ECN).
	TClass uint8
	// Other are the lines that are not the global class (per-flow rules
	// of later releases), kept for the report, not judged.
	Other []string
}

// ParseOFEDTrafficClass reads a traffic_class file: a "Global tclass=<N>"
// line sets the global class; an empty file, or a negative N (how the
// driver prints "unset"), sets none. A global class that is not a ToS
// byte is an error.
func ParseOFEDTrafficClass(s string) (OFEDTrafficClass, error) {
	var tc OFEDTrafficClass
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		v, ok := strings.CutPrefix(strings.ToLower(line), "global tclass=")
		if !ok {
			tc.Other = append(tc.Other, trimForMsg(line))
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		switch {
		case err != nil || n > 255:
			return OFEDTrafficClass{}, fmt.Errorf("traffic_class %q: global tclass is not a ToS byte (0-255)", trimForMsg(line))
		case n >= 0:
			tc.Global, tc.TClass = true, uint8(n)
		}
	}
	return tc, nil
}

// OFEDTrafficClass reads OFEDTrafficClassPath; a missing file (no
// MLNX_OFED, or another driver) returns an error satisfying IsNotExist.
func (h *Host) OFEDTrafficClass(dev string, port int) (OFEDTrafficClass, error) {
	p := OFEDTrafficClassPath(dev, port)
	s, err := h.ReadAttr(p)
	if err != nil {
		return OFEDTrafficClass{}, err
	}
	tc, err := ParseOFEDTrafficClass(s)
	if err != nil {
		return OFEDTrafficClass{}, fmt.Errorf("%s: %w", h.Display(p), err)
	}
	return tc, nil
}
