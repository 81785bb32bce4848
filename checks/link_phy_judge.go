package checks

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// The driver statistics (`ethtool -S`) link.phy reads, by what they count,
// in the order they are looked for: mlx5 names first
// (drivers/net/ethernet/mellanox/mlx5/core/en_stats.c), then bnxt_en's
// (drivers/net/ethernet/broadcom/bnxt/bnxt_ethtool.c, port_stats_ext).
var (
	statCorrectedBits = []string{"rx_corrected_bits_phy", "rx_corrected_bits"}
	statBitsReceived  = []string{"rx_bits_phy", "rx_bits"}
	statUncorrectable = []string{"rx_fec_uncorrectable_blocks"} // bnxt_en; mlx5 and ice answer FEC_GET
	statSymbolErrors  = []string{"rx_symbol_err_phy"}
	statLinkDown      = []string{"link_down_events_phy", "link_down_events"}
	statPauseError    = []string{"tx_pause_storm_error_events"}
	statPauseWarning  = []string{"tx_pause_storm_warning_events"}
)

// phyStats are every statistic above: a driver that has none of them (and
// no FEC_GET) has nothing for link.phy to judge.
var phyStats = [][]string{statCorrectedBits, statBitsReceived, statUncorrectable, statSymbolErrors, statLinkDown, statPauseError, statPauseWarning}

// Rules of thumb and limits (docs/link-health.md gives their sources).
const (
	symbolErrorsPerHour = 120 // NVSentinel's degraded threshold for symbol errors (~BER 1e-12)
	flapsWarnPerDay     = 3   // gpud: down then up three times in a window
	flapsFailPerDay     = 5   // AzNHC: 5 lost carriers in 24 h drain the node
)

// phyJudge judges one netdev: its answers, its counters against their
// history, the findings and the notes (for the pass line and details).
type phyJudge struct {
	env       *Env
	hr        *historyRun
	netdev    string
	vf        bool
	pciDriver string // the driver of the port's PCI function, when it has one
	ans       sysfs.EthtoolAnswer
	slots     Slots
	notes     []string
	out       []report.Finding
}

func (j *phyJudge) judge() []report.Finding {
	if f, done := j.readable(); done {
		return []report.Finding{f}
	}
	if l := j.ans.Link; l != nil && l.Up != nil && !*l.Up {
		if l.ExtState == "" {
			return []report.Finding{phyDownNoCause.At(j.netdev, j.slots)}
		}
		cause := l.ExtState
		if l.ExtSubstate != "" {
			cause += " (" + l.ExtSubstate + ")"
		}
		return []report.Finding{downFinding(l.ExtState).At(j.netdev, j.slots.with("cause", cause))}
	}
	if f := j.ans.FEC; f != nil {
		j.note("FEC " + orWord(f.Active, "none active"))
	}
	j.uncorrectable()
	j.preFECBER()
	j.symbolErrors()
	j.flaps()
	j.pauseStorm()
	if len(j.out) == 0 {
		return []report.Finding{phyHealthy.At(j.netdev, j.slots.with("observed", "link up, "+strings.Join(j.notes, ", ")))}
	}
	return j.out
}

// readable is the finding of a netdev whose answers cannot be judged: a
// request that failed (error), or a driver with neither FEC nor PHY
// statistics (skip). done is false when the netdev is judged.
func (j *phyJudge) readable() (f report.Finding, done bool) {
	a := j.ans
	for _, q := range []struct{ request, err string }{
		{"FEC_GET", a.FECErr}, {"LINKSTATE_GET", a.LinkErr}, {"ETHTOOL_GSTATS (ethtool -S)", a.StatsErr},
	} {
		if q.err != "" && q.err != sysfs.ErrNotSupported {
			return phyUnreadable.At(j.netdev, j.slots.with("request", q.request, "cause", q.err)), true
		}
	}
	if a.FEC != nil {
		return f, false
	}
	for _, names := range phyStats {
		if _, _, ok := j.stat(names); ok {
			return f, false
		}
	}
	return phyNotApplicable.At(j.netdev, j.slots.with("driver", j.driver(), "errno", orWord(a.FECErr, "no answer"))), true
}

// driver names the netdev's driver for a message: "driver virtio_net", or
// a software netdev's lack of one.
func (j *phyJudge) driver() string {
	d := j.pciDriver
	if d == "" {
		d, _ = j.env.Host.LinkBase(sysfs.NetClass + "/" + j.netdev + "/device/driver")
	}
	switch {
	case d != "" && j.vf:
		return "driver " + d + " on a virtual function (its PF owns the PHY)"
	case d != "":
		return "driver " + d
	}
	return "a software netdev (no device)"
}

// stat is the first of names the driver reports.
func (j *phyJudge) stat(names []string) (v uint64, name string, ok bool) {
	for _, n := range names {
		if v, ok := j.ans.Stat(n); ok {
			return v, n, true
		}
	}
	return 0, "", false
}

func (j *phyJudge) note(s string) { j.notes = append(j.notes, s) }

func (j *phyJudge) add(f *Finding, kv ...string) {
	j.out = append(j.out, f.At(j.netdev, j.slots.with(kv...)))
}

// observe sets one counter's reading against its history.
func (j *phyJudge) observe(counter string, v uint64) riseReading {
	return j.hr.observe("link.phy/"+j.netdev+"/"+counter, v)
}

// hold is the hysteresis of one counter (a key under the netdev's) whose
// rise fails with f: failing marks it; while it is marked and no longer
// fails it is still failing, with f's fix, until its clean runs are done,
// and then the notes say it passes again.
func (j *phyJudge) hold(counter, what string, f *Finding, failing bool) {
	held, since, clean := j.hr.hold("link.phy/"+j.netdev+"/"+counter, failing)
	switch {
	case failing:
	case held:
		j.add(phyStillFailing, "what", what, "failing_since", stamp(since), "clean_runs", fmt.Sprint(j.hr.cleanRuns),
			"clean_so_far", fmt.Sprint(clean), "fix", render(f.Fix, j.slots))
	case !since.IsZero():
		j.note(fmt.Sprintf("%s: clean for %d runs after failing since %s: passes again", what, clean, stamp(since)))
	}
}

func (j *phyJudge) fecMode() string {
	if j.ans.FEC == nil {
		return "unknown"
	}
	return orWord(j.ans.FEC.Active, "none active")
}

// uncorrectable judges the uncorrectable FEC blocks: a rise since the
// previous run fails; a count since boot warns until a second run.
func (j *phyJudge) uncorrectable() {
	var v uint64
	var lanes []uint64
	if f := j.ans.FEC; f != nil && f.Uncorrectable != nil {
		v, lanes = f.Uncorrectable.Total, f.Uncorrectable.Lanes
	} else if sv, _, ok := j.stat(statUncorrectable); ok {
		v = sv
	} else {
		return
	}
	r := j.observe("fec_uncorrectable", v)
	var rose []string
	for i, lv := range lanes {
		if lr := j.observe(fmt.Sprintf("fec_uncorrectable/lane%d", i), lv); lr.Delta > 0 {
			rose = append(rose, fmt.Sprintf("lane %d: %d", i, lr.Delta))
		}
	}
	j.note(fmt.Sprintf("%d uncorrectable FEC blocks %s", r.Delta, r.Words()))
	j.hold("fec_uncorrectable", "uncorrectable FEC blocks rising", phyUncorrectable, r.Since == riseSincePrevious && r.Delta > 0)
	if r.Delta == 0 {
		return
	}
	switch r.Since {
	case riseSincePrevious:
		laneWords := ""
		if len(rose) > 0 {
			laneWords = " (" + strings.Join(rose, ", ") + ")"
		}
		j.add(phyUncorrectable, "count", strconv.FormatUint(r.Delta, 10), "over", r.Words(), "lanes", laneWords, "fec", j.fecMode())
	case riseSinceBoot:
		j.add(phySinceBoot, "count", strconv.FormatUint(r.Delta, 10), "what", "uncorrectable FEC blocks", "over", r.Words())
	}
}

// orWord is s, or the word for its absence.
func orWord(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// speedMbps is the link's speed: LINKMODES_GET's, else sysfs's; 0 unknown.
func (j *phyJudge) speedMbps() uint32 {
	if m := j.ans.Modes; m != nil && m.SpeedMbps > 0 {
		return m.SpeedMbps
	}
	s, err := j.env.Host.ReadAttr(sysfs.NetClass + "/" + j.netdev + "/speed")
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > 1<<31 {
		return 0
	}
	return uint32(n)
}

// bitsReceived is the count of bits the corrected bits r are out of: the
// NIC's own count of received bits over the same interval, else speed ×
// time (every bit slot of the interval: more than were received while the
// link was idle or down, so the BER it gives is a lower bound).
func (j *phyJudge) bitsReceived(r riseReading) (bits float64, from string) {
	if v, name, ok := j.stat(statBitsReceived); ok {
		if rr := j.observe("rx_bits", v); rr.Since == r.Since && rr.Delta > 0 {
			return float64(rr.Delta), name
		}
	}
	if s := j.speedMbps(); s > 0 && r.Over > 0 {
		return float64(s) * 1e6 * r.Over.Seconds(), fmt.Sprintf("%d Mb/s × time", s)
	}
	return 0, ""
}

// preFECBER judges the bit error ratio before FEC over the interval.
func (j *phyJudge) preFECBER() {
	var cb uint64
	if f := j.ans.FEC; f != nil && f.CorrectedBits != nil {
		cb = f.CorrectedBits.Total
	} else if v, _, ok := j.stat(statCorrectedBits); ok {
		cb = v
	} else {
		return
	}
	r := j.observe("fec_corrected_bits", cb)
	if r.Since == riseNewBaseline {
		return
	}
	bits, from := j.bitsReceived(r)
	if bits <= 0 {
		j.note("pre-FEC BER unknown (neither a received-bit count nor the speed and interval)")
		return
	}
	ber := float64(r.Delta) / bits
	j.note(fmt.Sprintf("pre-FEC BER %.1e %s", ber, r.Words()))
	var lanes uint32
	if m := j.ans.Modes; m != nil {
		lanes = m.Lanes
	}
	lim, ok := preFECLimit(j.fecMode(), j.speedMbps(), lanes)
	if ok && ber > lim.value {
		j.add(phyHighBER, "ber", fmt.Sprintf("%.1e", ber), "over", r.Words(), "bits_from", from,
			"limit", fmt.Sprintf("%.1e", lim.value), "fec_kind", lim.kind)
	}
}

// symbolErrors judges mlx5's rx_symbol_err_phy by its rate.
func (j *phyJudge) symbolErrors() {
	v, _, ok := j.stat(statSymbolErrors)
	if !ok {
		return
	}
	r := j.observe("rx_symbol_err_phy", v)
	rate, known := r.PerHour()
	if r.Since == riseNewBaseline || r.Delta == 0 {
		return
	}
	j.note(fmt.Sprintf("%d symbol errors %s", r.Delta, r.Words()))
	if known && rate > symbolErrorsPerHour {
		j.add(phySymbolErrors, "count", strconv.FormatUint(r.Delta, 10), "over", r.Words(), "rate", fmtRate(rate))
	}
}

// downEvents is the netdev's count of link-down events and what counted
// it: the kernel's (ETHTOOL_A_LINKSTATE_EXT_DOWN_CNT), the driver's, else
// the carrier drops sysfs counts.
func (j *phyJudge) downEvents() (v uint64, counter string, ok bool) {
	if l := j.ans.Link; l != nil && l.DownEvents != nil {
		return uint64(*l.DownEvents), "link-down events", true
	}
	if v, name, ok := j.stat(statLinkDown); ok {
		return v, name, true
	}
	s, err := j.env.Host.ReadAttr(sysfs.NetClass + "/" + j.netdev + "/carrier_down_count")
	if err != nil {
		return 0, "", false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, "carrier_down_count", err == nil
}

// flaps judges link-down events per day: 3 warn, 5 fail.
func (j *phyJudge) flaps() {
	v, counter, ok := j.downEvents()
	if !ok {
		return
	}
	r := j.observe("link_down/"+counter, v)
	if r.Since == riseNewBaseline {
		j.hold("link_down/"+counter, "the link flapping", phyFlappingDrain, false)
		return
	}
	n := r.Delta
	if r.Since == riseSinceBoot && counter == "carrier_down_count" && n > 0 {
		n-- // the driver drops the carrier once when it opens the netdev
	}
	perDay := float64(n)
	if r.Over > 24*time.Hour {
		perDay = float64(n) * float64(24*time.Hour) / float64(r.Over)
	}
	if n > 0 {
		j.note(fmt.Sprintf("%d link-down events %s", n, r.Words()))
	}
	kv := []string{"count", strconv.FormatUint(n, 10), "over", r.Words(), "counter", counter}
	j.hold("link_down/"+counter, "the link flapping", phyFlappingDrain, perDay >= flapsFailPerDay)
	switch {
	case perDay >= flapsFailPerDay:
		j.add(phyFlappingDrain, kv...)
	case perDay >= flapsWarnPerDay:
		j.add(phyFlapping, kv...)
	}
}

// pauseStorm judges mlx5's pause-storm events.
func (j *phyJudge) pauseStorm() {
	if v, _, ok := j.stat(statPauseError); ok {
		r := j.observe("tx_pause_storm_error_events", v)
		j.hold("tx_pause_storm_error_events", "pause-storm error events rising", phyPauseStorm, r.Since == riseSincePrevious && r.Delta > 0)
		count := strconv.FormatUint(r.Delta, 10)
		switch {
		case r.Delta == 0:
		case r.Since == riseSincePrevious:
			j.add(phyPauseStorm, "count", count, "over", r.Words())
		case r.Since == riseSinceBoot:
			j.add(phySinceBoot, "count", count, "what", "pause-storm error events", "over", r.Words())
		}
	}
	if v, _, ok := j.stat(statPauseWarning); ok {
		r := j.observe("tx_pause_storm_warning_events", v)
		if r.Since == riseSincePrevious && r.Delta > 0 {
			j.add(phyPauseWarning, "count", strconv.FormatUint(r.Delta, 10), "over", r.Words())
		}
	}
}
