package sysfs

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// PortRate is a port's "rate" attribute: "100 Gb/sec (4X EDR)".
type PortRate struct {
	Gbps  float64 // 100
	Width string  // "4X"
	Speed string  // "EDR"; "" when the kernel printed none
}

// ParseRate parses the kernel's rate format, "<n>[.5] Gb/sec (<w>X <SPEED>)"
// (the width and speed part is optional, as some drivers print only the rate).
func ParseRate(s string) (PortRate, error) {
	s = strings.TrimSpace(s)
	num, rest, ok := strings.Cut(s, " ")
	if !ok {
		return PortRate{}, fmt.Errorf("rate %q: want \"<n> Gb/sec (<width>X <speed>)\"", trimForMsg(s))
	}
	g, err := strconv.ParseFloat(num, 64)
	if err != nil || g < 0 || math.IsNaN(g) || math.IsInf(g, 0) || g > 1e6 {
		return PortRate{}, fmt.Errorf("rate %q: bad number %q", trimForMsg(s), trimForMsg(num))
	}
	rest = strings.TrimSpace(rest)
	unit, paren, _ := strings.Cut(rest, "(")
	if strings.TrimSpace(unit) != "Gb/sec" {
		return PortRate{}, fmt.Errorf("rate %q: unit is not Gb/sec", trimForMsg(s))
	}
	r := PortRate{Gbps: g}
	if paren != "" {
		inner, ok := strings.CutSuffix(strings.TrimSpace(paren), ")")
		if !ok {
			return PortRate{}, fmt.Errorf("rate %q: unclosed parenthesis", trimForMsg(s))
		}
		f := strings.Fields(inner)
		if len(f) == 0 || len(f) > 2 || !strings.HasSuffix(f[0], "X") {
			return PortRate{}, fmt.Errorf("rate %q: want (<width>X <speed>)", trimForMsg(s))
		}
		if _, err := strconv.Atoi(strings.TrimSuffix(f[0], "X")); err != nil {
			return PortRate{}, fmt.Errorf("rate %q: bad width %q", trimForMsg(s), trimForMsg(f[0]))
		}
		r.Width = f[0]
		if len(f) == 2 {
			r.Speed = f[1]
		}
	}
	return r, nil
}
