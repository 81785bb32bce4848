package checks

// berLimit is the highest pre-FEC bit error ratio a FEC is specified to
// repair to the standard's frame-loss objective, and the kind of FEC and
// line it applies to.
type berLimit struct {
	value float64
	kind  string
}

// The limits (docs/link-health.md, "PHY and FEC (link.phy)", gives the
// sources and which are rules of thumb).
var (
	// IEEE 802.3 RS(544,514) "KP4" FEC (clause 91 as extended by 802.3bs,
	// 802.3cd and 802.3ck) on PAM4 lanes of 50G and faster: the PMDs are
	// specified to a BER of 2.4e-4 before FEC.
	berRS544 = berLimit{2.4e-4, "RS(544,514) FEC on PAM4 lanes"}
	// IEEE 802.3 RS(528,514) "KR4" FEC (clause 91) on 25G NRZ lanes: the
	// 802.3by 25GBASE-CR/KR and 100GBASE-CR4 channels with RS-FEC are
	// specified to a BER of 5e-5.
	berRS528 = berLimit{5e-5, "RS(528,514) FEC on 25G NRZ lanes"}
	// Lanes unknown at 50 or 100 Gb/s (NRZ 2/4 lanes, or PAM4 1/2 lanes):
	// the looser limit, so that a healthy PAM4 link never warns.
	berRSUnknownLanes = berLimit{2.4e-4, "RS-FEC (lanes unknown: the PAM4 limit, the looser)"}
)

// preFECLimit is the limit for the active FEC mode at the link's speed and
// lane count (0 when unknown); ok is false where no limit applies: no FEC
// active, BASE-R (Firecode) or LLRS, whose corrected bits this check does
// not judge.
func preFECLimit(fec string, speedMbps, lanes uint32) (berLimit, bool) {
	if fec != "RS" || speedMbps == 0 {
		return berLimit{}, false
	}
	if lanes > 0 {
		if speedMbps/lanes >= 50000 {
			return berRS544, true
		}
		return berRS528, true
	}
	switch {
	case speedMbps >= 200000:
		return berRS544, true // 200G and faster Ethernet runs PAM4 lanes
	case speedMbps <= 25000:
		return berRS528, true
	}
	return berRSUnknownLanes, true
}
