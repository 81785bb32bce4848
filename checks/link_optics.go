package checks

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

func init() {
	register(Check{
		ID: "link.optics", Code: 61, Level: 1,
		Title: "every RDMA port's plug-in module is within its own alarm and warning thresholds",
		Needs: []string{"rdma.devices"},
		Privileges: []Need{{Kind: NeedCapability, Cap: CapNetAdmin, Optional: true,
			For: "reads the modules' EEPROM (the kernel answers ethtool's module request only to CAP_NET_ADMIN); without it the modules are not judged"}},
		Explain: Explanation{
			Judges: "The plug-in module (QSFP, OSFP, QSFP-DD, SFP) of the netdev of every RDMA port — each slave of a RoCE LAG, an IPoIB netdev where the driver " +
				"offers it, a software device's parent — read through the ethtool netlink request MODULE_EEPROM_GET (the SIOCETHTOOL ioctl on kernels " +
				"before 5.13): lower page 00h, then by the identifier (SFF-8024) the pages the specification defines. SFF-8636 (QSFP+/QSFP28): upper page " +
				"00h for vendor, part, serial and transmitter technology, page 03h for thresholds; CMIS 4.0/5.x (QSFP-DD, OSFP): page 00h and the active " +
				"firmware, 01h for the monitors advertised, 02h for thresholds, 11h for the lane monitors; SFF-8472 (SFP): A0h and A2h. Module temperature " +
				"and supply voltage, and per lane Rx power, Tx power and laser bias, are judged against the module's OWN thresholds from the same EEPROM: " +
				"beyond an alarm fails, beyond a warning warns. A direct-attach copper cable (DAC, passive or active copper) has no laser: it passes, " +
				"named. A driver without module support (dummy, virtio, veth: EOPNOTSUPP) is skipped with the reason, as is an empty cage on a port " +
				"without link; an EEPROM that cannot be read on a port with link, or whose pages are short or garbled, is an error naming the page. " +
				"The expectations file can pin each port's module vendor, part and firmware (module_vendor, module_part, module_firmware); a port unused on purpose (<device>/<port>.unused = true) is not read.",
			Why: "A degrading transceiver or a dirty fibre shows in the module's optical power and laser bias long before the link drops: the " +
				"receiver's power falls towards its alarm, FEC corrects more, and then the link flaps under an AI job's all-reduce. The module carries " +
				"its maker's limits for each monitor, so judging against them needs no per-part table; the finding names the port, the module's " +
				"part and serial and the lane, so the right part is cleaned or replaced.",
		},
		Run: runLinkOptics,
	})
}

// Remedies of link.optics, by what is out of range.
const (
	opticsRxLowRemedy = "too little light arrives on this lane: clean both ends of the fibre (and the far end's port) with a fibre cleaner and " +
		"reseat the module; if it stays low, replace the fibre, then the far-end transceiver (its Tx power on this lane tells which)"
	opticsRxHighRemedy = "too much light arrives: the receiver is overdriven (a long-reach module on a short fibre); add an attenuator or use " +
		"the module type the fibre's reach calls for"
	opticsHotRemedy = "the module runs hot: check the chassis airflow (failed or slow fans, missing blanking panels, a reversed or blocked air " +
		"path) and the server's cooling profile; a module hotter than its neighbours in the same airflow is failing — replace it"
	opticsColdRemedy = "the module runs below its rated temperature: check the site's inlet air temperature"
	opticsByHand     = "Read it by hand: `ethtool -m {netdev}` (run as root: the kernel shows a module's EEPROM only to CAP_NET_ADMIN); " +
		"`mlxlink -d <pci> -m` on NVIDIA NICs."
	opticsPinFix = "{port}: replace the module with the qualified part the class names, or update {cite} if the change is on purpose."
)

// link.optics' findings, about a netdev whose module is read.
var (
	opticsOK = declare(Finding{ID: "link.optics/ok", Status: report.Pass,
		When:    "the module's temperature, voltage and every lane's Rx power, Tx power and bias are within its own warning thresholds",
		Message: "{port}: {module}: {readings}, within the module's thresholds"})
	opticsCopper = declare(Finding{ID: "link.optics/copper", Status: report.Pass,
		When:    "the module is a direct-attach copper cable (DAC, passive or active copper): no laser, no optical power to judge",
		Message: "{port}: {module}, a {media} cable (DAC): no laser, no optical power to judge"})
	opticsNoThresholds = declare(Finding{ID: "link.optics/no-thresholds", Status: report.Pass,
		When:    "an optic carries no thresholds (flat memory, or every threshold zero): its monitors are shown, not judged",
		Message: "{port}: {module}: {readings}; the module carries no thresholds to judge them against"})
	opticsNoDiagnostics = declare(Finding{ID: "link.optics/no-diagnostics", Status: report.Pass,
		When:    "an SFP reports no digital diagnostics, or only externally calibrated ones",
		Message: "{port}: {module}: {note}"})
	opticsTempAlarm = declare(Finding{ID: "link.optics/temp-alarm", Status: report.Fail,
		When:    "the module temperature is beyond its high or low alarm threshold",
		Message: "{port}: {module} at {value}, {bound} {limit}", Fix: "{port}, {module}: {remedy}."})
	opticsTempWarning = declare(Finding{ID: "link.optics/temp-warning", Status: report.Warn,
		When:    "the module temperature is beyond its high or low warning threshold",
		Message: "{port}: {module} at {value}, {bound} {limit}", Fix: "{port}, {module}: {remedy}."})
	opticsVccAlarm = declare(Finding{ID: "link.optics/vcc-alarm", Status: report.Fail,
		When:    "the module's supply voltage is beyond its alarm threshold",
		Message: "{port}: {module} supply {value}, {bound} {limit}", Fix: opticsVccFix})
	opticsVccWarning = declare(Finding{ID: "link.optics/vcc-warning", Status: report.Warn,
		When:    "the module's supply voltage is beyond its warning threshold",
		Message: "{port}: {module} supply {value}, {bound} {limit}", Fix: opticsVccFix})
	opticsRxAlarm = declare(Finding{ID: "link.optics/rx-power-alarm", Status: report.Fail,
		When:    "a lane's received optical power is beyond its alarm threshold (low: a dirty or broken fibre, or a dying far-end laser)",
		Message: opticsLaneMessage("Rx power"), Fix: "{port}, {module}, lane {lane}: {remedy}."})
	opticsRxWarning = declare(Finding{ID: "link.optics/rx-power-warning", Status: report.Warn,
		When:    "a lane's received optical power is beyond its warning threshold",
		Message: opticsLaneMessage("Rx power"), Fix: "{port}, {module}, lane {lane}: {remedy}."})
	opticsTxAlarm = declare(Finding{ID: "link.optics/tx-power-alarm", Status: report.Fail,
		When:    "a lane's transmitted optical power is beyond its alarm threshold: the module's own laser",
		Message: opticsLaneMessage("Tx power"), Fix: opticsTxFix})
	opticsTxWarning = declare(Finding{ID: "link.optics/tx-power-warning", Status: report.Warn,
		When:    "a lane's transmitted optical power is beyond its warning threshold",
		Message: opticsLaneMessage("Tx power"), Fix: opticsTxFix})
	opticsBiasAlarm = declare(Finding{ID: "link.optics/tx-bias-alarm", Status: report.Fail,
		When:    "a lane's laser bias current is beyond its alarm threshold (a rising bias is a laser compensating for its age)",
		Message: opticsLaneMessage("Tx bias"), Fix: opticsBiasFix})
	opticsBiasWarning = declare(Finding{ID: "link.optics/tx-bias-warning", Status: report.Warn,
		When:    "a lane's laser bias current is beyond its warning threshold",
		Message: opticsLaneMessage("Tx bias"), Fix: opticsBiasFix})
	opticsVendorDeviates = declare(Finding{ID: "link.optics/vendor-deviates", Status: report.Fail,
		When:    "the module's vendor is not the one the expectations file names (module_vendor)",
		Message: "{port}: {module}: vendor {got}, expected {want} by {cite}", Fix: opticsPinFix})
	opticsPartDeviates = declare(Finding{ID: "link.optics/part-deviates", Status: report.Fail,
		When:    "the module's part number is not the one the expectations file names (module_part)",
		Message: "{port}: {module}: part {got}, expected {want} by {cite}", Fix: opticsPinFix})
	opticsFirmwareDeviates = declare(Finding{ID: "link.optics/firmware-deviates", Status: report.Fail,
		When:    "the module's firmware (CMIS; the vendor revision on SFF-8636/SFF-8472) is not the one the expectations file names (module_firmware)",
		Message: "{port}: {module}: firmware {got}, expected {want} by {cite}",
		Fix:     "{port}: update the module's firmware to the version the class names (`mlxfwmanager`/`flint` on NVIDIA modules, the switch vendor's tools otherwise), or update {cite}."})
	opticsUnreadable = declare(Finding{ID: "link.optics/eeprom-unreadable", Status: report.Error,
		When:    "the module EEPROM could not be read on a port with link (an errno other than EOPNOTSUPP, or the reader failed)",
		Message: "{port}: module EEPROM unreadable ({page}): {cause}",
		Fix:     "{port}: a module that answers nothing while the link is up has a hung management interface: reseat it, and replace it if it stays unreadable. " + opticsByHand})
	opticsMalformed = declare(Finding{ID: "link.optics/eeprom-malformed", Status: report.Error,
		When:    "a page the specification defines is missing, short, failed or garbled",
		Message: "{port}: module EEPROM malformed: {cause}",
		Fix:     "{port}: reseat the module; if `ethtool -m {netdev}` shows the same, its EEPROM is corrupt: replace it. " + opticsByHand})
	opticsNoModuleSupport = declare(Finding{ID: "link.optics/no-module-support", Status: report.Skip,
		When:    "the netdev's driver has no module EEPROM (EOPNOTSUPP): a virtual or software interface (virtio, dummy, veth) — nothing to judge",
		Message: "{port}: the driver of {netdev} has no plug-in module ({answer}): nothing to judge"})
	opticsNoModuleDown = declare(Finding{ID: "link.optics/no-module-link-down", Status: report.Skip,
		When:    "no module answered and the netdev has no carrier: an empty cage or an unseated module (port.state judges the link)",
		Message: "{port}: no module answered ({answer}) and {netdev} has no carrier: an empty cage or an unseated module; port.state judges the link"})
	opticsNoPrivilege = declare(Finding{ID: "link.optics/no-privilege", Status: report.Skip,
		When:    "the kernel refused the module request (EPERM): reading a module's EEPROM needs CAP_NET_ADMIN",
		Message: "{port}: the kernel shows {netdev}'s module only to CAP_NET_ADMIN ({answer}): not judged"})
	opticsNotRecorded = declare(Finding{ID: "link.optics/not-recorded", Status: report.Skip,
		When:    "a snapshot or fixture holds no module pages for the netdev (taken before modules were captured)",
		Message: "{port}: no module EEPROM recorded for {netdev} in this snapshot: not judged"})
	opticsUnknownModule = declare(Finding{ID: "link.optics/identifier-unknown", Status: report.Skip,
		When:    "the module's identifier names a form factor this check does not decode (not SFF-8636, CMIS or SFF-8472)",
		Message: "{port}: module identifier {identifier}: not a layout this check decodes"})
	opticsNotCaptured = declare(Finding{ID: "link.optics/not-captured", Status: report.Skip,
		When:    "the snapshot or fixture records no module EEPROMs at all (taken before modules were captured)",
		Message: "this snapshot records no module EEPROMs: not judged"})
	opticsNoPort = declare(Finding{ID: "link.optics/no-port", Status: report.Skip,
		When:    "no RDMA port has a netdev here whose module could be read (VFs, representors, netdevs in other namespaces are not judged)",
		Message: "no RDMA port with a netdev here to read a module from ({count} not judged, see details)"})
)

const (
	opticsVccFix = "{port}, {module}: the module's supply is out of range: reseat it; if it persists, move it to another port — a module that is " +
		"fine there points at this cage's power on the NIC."
	opticsTxFix = "{port}, {module}: the module's own transmitter on lane {lane} is outside its limits: replace the module (serial {serial}); " +
		"cleaning or reseating does not bring back a laser."
	opticsBiasFix = "{port}, {module}: the laser of lane {lane} draws a bias outside its limits, the sign of a laser wearing out: replace " +
		"the module (serial {serial}) before the lane fails."
)

// opticsLaneMessage is the message of a lane monitor's finding.
func opticsLaneMessage(what string) string {
	return "{port}: {module} lane {lane}: " + what + " {value}, {bound} {limit}"
}

func runLinkOptics(_ context.Context, env *Env) Result {
	targets, notJudged := opticsTargets(env.Model(), env.Expect)
	if len(targets) > 0 && !env.Host.RecordsModules() {
		return opticsNotCaptured.result("", nil)
	}
	if len(targets) == 0 {
		r := opticsNoPort.result("", Slots{"count": fmt.Sprint(len(notJudged))})
		r.Details = notJudged
		return r
	}
	var fs []report.Finding
	for _, t := range targets {
		fs = append(fs, judgeOptics(env, t)...)
	}
	r := combineFindings(fs, false)
	r.Details = notJudged
	return r
}

// opticsTarget is one netdev whose module is read, and the port it carries.
type opticsTarget struct {
	netdev string
	port   *PortModel
}

// opticsTargets lists the netdevs to read: each port's own netdev, or each
// slave of a LAG's bond (the bond has no module); the ports not judged, why.
func opticsTargets(m *HostModel, class *expect.Class) ([]opticsTarget, []string) {
	var out []opticsTarget
	var notJudged []string
	seen := map[string]bool{}
	for _, pm := range m.Ports {
		var why string
		unused := class.Port(pm.Device.Dev.Name, pm.Port.Num).Unused
		switch {
		case unused != nil && unused.V:
			why = "unused on purpose (" + unused.Cite() + ")"
		case pm.Representor:
			why = "a representor: its module is the uplink's"
		case pm.IsVF():
			why = "a VF or sub-function: the module belongs to its PF"
		case pm.Netdev == "":
			why = "no netdev to ask for a module (an InfiniBand port without IPoIB: read it with `mlxlink -m`)"
		case !pm.NetdevHere:
			why = fmt.Sprintf("its netdev %s is in another network namespace", pm.Netdev)
		}
		if why != "" {
			notJudged = append(notJudged, pm.Label+": "+why)
			continue
		}
		netdevs := pm.DCBNetdevs
		if len(netdevs) == 0 {
			netdevs = []string{pm.Netdev}
		}
		for _, nd := range netdevs {
			if !seen[nd] {
				seen[nd] = true
				out = append(out, opticsTarget{netdev: nd, port: pm})
			}
		}
	}
	return out, notJudged
}

// judgeOptics reads and judges one netdev's module.
func judgeOptics(env *Env, t opticsTarget) []report.Finding {
	label := fmt.Sprintf("%s (%s)", t.port.Label, t.netdev)
	if t.port.Netdev != t.netdev {
		label = fmt.Sprintf("%s (%s, slave of %s)", t.port.Label, t.netdev, t.port.Netdev)
	}
	slots := Slots{"port": label, "netdev": t.netdev}
	raw, found, err := env.moduleEEPROM(t.netdev)
	switch {
	case err != nil:
		return []report.Finding{opticsUnreadable.At(t.netdev, slots.with("page", "lower page 00h", "cause", err.Error()))}
	case !found:
		return []report.Finding{opticsNotRecorded.At(t.netdev, slots)}
	case raw.Err != "":
		return []report.Finding{opticsAnswer(env, t.netdev, raw.Err, slots)}
	}
	mod, err := sysfs.DecodeTransceiver(raw)
	var unknown sysfs.UnknownIdentifierError
	if errors.As(err, &unknown) && (unknown.ID == 0x00 || unknown.ID == 0xff) {
		// SFF-8024's "unknown or unspecified", or an erased EEPROM: no
		// module answers so; the read returned no ID.
		return []report.Finding{opticsMalformed.At(t.netdev, slots.with("cause", err.Error()+" (no module reports that: blank or unread)"))}
	}
	if errors.As(err, &unknown) {
		return []report.Finding{opticsUnknownModule.At(t.netdev, slots.with("identifier", fmt.Sprintf("0x%02x", unknown.ID)))}
	}
	if err != nil {
		return []report.Finding{opticsMalformed.At(t.netdev, slots.with("cause", err.Error()))}
	}
	slots = slots.with("module", moduleName(mod), "serial", orUnset(mod.Serial), "media", mod.Media)
	fs := opticsPins(env.Expect.Port(t.port.Device.Dev.Name, t.port.Port.Num), mod, t.netdev, slots)
	return append(fs, judgeMonitors(mod, t.netdev, slots)...)
}

// opticsAnswer is the finding of a module request the kernel refused.
func opticsAnswer(env *Env, netdev, errno string, slots Slots) report.Finding {
	slots = slots.with("answer", errno)
	switch errno {
	case sysfs.ErrNoModule:
		return opticsNoModuleSupport.At(netdev, slots)
	case "EPERM", "EACCES":
		return opticsNoPrivilege.At(netdev, slots)
	}
	if nd, ok := env.Netdevs().byName[netdev]; ok && !nd.Carrier {
		return opticsNoModuleDown.At(netdev, slots)
	}
	return opticsUnreadable.At(netdev, slots.with("page", "lower page 00h", "cause", errno))
}

// moduleName names a module as a technician finds it on the label:
// "Mellanox MMA1B00-C100D SN MT2034FT01234 (QSFP28)".
func moduleName(m *sysfs.Transceiver) string {
	form := m.Form
	if form == "" {
		form = m.Spec
	}
	return fmt.Sprintf("%s %s SN %s (%s)", orUnset(m.Vendor), orUnset(m.Part), orUnset(m.Serial), form)
}

// orUnset says "unknown" for a field the module leaves blank.
func orUnset(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// opticsPins compares the module with the class's module keys.
func opticsPins(pe expect.PortExpect, m *sysfs.Transceiver, netdev string, slots Slots) []report.Finding {
	firmware := m.Firmware
	if firmware == "" {
		firmware = m.Revision // SFF-8636 and SFF-8472 define no firmware field
	}
	var fs []report.Finding
	for _, pin := range []struct {
		want *expect.Value[expect.Pattern]
		got  string
		f    *Finding
	}{{pe.ModuleVendor, m.Vendor, opticsVendorDeviates}, {pe.ModulePart, m.Part, opticsPartDeviates}, {pe.ModuleFirmware, firmware, opticsFirmwareDeviates}} {
		if pin.want != nil && !pin.want.V.Match(pin.got) {
			fs = append(fs, pin.f.At(netdev, slots.with("got", orUnset(pin.got), "want", pin.want.V.String(), "cite", pin.want.Cite())))
		}
	}
	return fs
}

// monitor is one kind of reading and the findings of its excursions.
type monitor struct {
	alarm, warning *Finding
	limits         func(*sysfs.ModuleThresholds) sysfs.Limits
	format         func(float64) string
}

var (
	monTemp = monitor{opticsTempAlarm, opticsTempWarning, func(t *sysfs.ModuleThresholds) sysfs.Limits { return t.Temp },
		func(v float64) string { return fmt.Sprintf("%.1f °C", v) }}
	monVcc = monitor{opticsVccAlarm, opticsVccWarning, func(t *sysfs.ModuleThresholds) sysfs.Limits { return t.Vcc },
		func(v float64) string { return fmt.Sprintf("%.3f V", v) }}
	monRx   = monitor{opticsRxAlarm, opticsRxWarning, func(t *sysfs.ModuleThresholds) sysfs.Limits { return t.RxPower }, formatPower}
	monTx   = monitor{opticsTxAlarm, opticsTxWarning, func(t *sysfs.ModuleThresholds) sysfs.Limits { return t.TxPower }, formatPower}
	monBias = monitor{opticsBiasAlarm, opticsBiasWarning, func(t *sysfs.ModuleThresholds) sysfs.Limits { return t.TxBias },
		func(v float64) string { return fmt.Sprintf("%.3f mA", v) }}
)

func formatPower(mw float64) string {
	if mw <= 0 {
		return "0 mW (no light)"
	}
	return fmt.Sprintf("%.4f mW (%.2f dBm)", mw, sysfs.DBm(mw))
}

// judgeMonitors judges a decoded module: copper and modules without
// diagnostics pass named; an optic's monitors against its thresholds.
func judgeMonitors(m *sysfs.Transceiver, netdev string, slots Slots) []report.Finding {
	switch {
	case m.Copper:
		return []report.Finding{opticsCopper.At(netdev, slots)}
	case m.MonitorNote != "":
		return []report.Finding{opticsNoDiagnostics.At(netdev, slots.with("note", m.MonitorNote))}
	}
	slots = slots.with("readings", readingsText(m))
	if m.Thresholds == nil || !anyLimitSet(m.Thresholds) {
		return []report.Finding{opticsNoThresholds.At(netdev, slots)}
	}
	var fs []report.Finding
	check := func(mon monitor, v *float64, lane int) {
		if v == nil {
			return
		}
		if f := judgeModuleReading(mon, *v, mon.limits(m.Thresholds), netdev, slots, lane); f != nil {
			fs = append(fs, *f)
		}
	}
	check(monTemp, m.Temp, 0)
	check(monVcc, m.Vcc, 0)
	for _, ln := range m.Lanes {
		check(monRx, ln.RxPowerMW, ln.N)
		check(monTx, ln.TxPowerMW, ln.N)
		check(monBias, ln.TxBiasMA, ln.N)
	}
	if len(fs) == 0 {
		return []report.Finding{opticsOK.At(netdev, slots)}
	}
	return fs
}

func anyLimitSet(t *sysfs.ModuleThresholds) bool {
	return t.Temp.Set || t.Vcc.Set || t.RxPower.Set || t.TxPower.Set || t.TxBias.Set
}

// judgeModuleReading is the finding of one reading beyond its module's limits,
// nil within them; the alarm outranks the warning.
func judgeModuleReading(mon monitor, v float64, l sysfs.Limits, netdev string, slots Slots, lane int) *report.Finding {
	if !l.Set {
		return nil
	}
	var f *Finding
	var bound string
	var limit float64
	switch {
	case v > l.HighAlarm:
		f, bound, limit = mon.alarm, "above its high alarm", l.HighAlarm
	case v < l.LowAlarm:
		f, bound, limit = mon.alarm, "below its low alarm", l.LowAlarm
	case v > l.HighWarn:
		f, bound, limit = mon.warning, "above its high warning", l.HighWarn
	case v < l.LowWarn:
		f, bound, limit = mon.warning, "below its low warning", l.LowWarn
	default:
		return nil
	}
	high := strings.HasPrefix(bound, "above")
	remedy := map[*Finding]map[bool]string{
		opticsTempAlarm: {true: opticsHotRemedy, false: opticsColdRemedy}, opticsTempWarning: {true: opticsHotRemedy, false: opticsColdRemedy},
		opticsRxAlarm: {true: opticsRxHighRemedy, false: opticsRxLowRemedy}, opticsRxWarning: {true: opticsRxHighRemedy, false: opticsRxLowRemedy},
	}[f][high]
	s := slots.with("value", mon.format(v), "bound", bound, "limit", mon.format(limit), "lane", fmt.Sprint(lane), "remedy", remedy)
	out := f.At(netdev, s)
	return &out
}

// readingsText sums a module's monitors up in one phrase: "32.9 °C,
// 3.296 V, Rx -0.30…1.64 dBm on 4 lanes".
func readingsText(m *sysfs.Transceiver) string {
	var parts []string
	if m.Temp != nil {
		parts = append(parts, monTemp.format(*m.Temp))
	}
	if m.Vcc != nil {
		parts = append(parts, monVcc.format(*m.Vcc))
	}
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for _, ln := range m.Lanes {
		if ln.RxPowerMW != nil {
			d := sysfs.DBm(*ln.RxPowerMW)
			lo, hi, n = math.Min(lo, d), math.Max(hi, d), n+1
		}
	}
	if n > 0 {
		parts = append(parts, fmt.Sprintf("Rx %.2f…%.2f dBm on %d lanes", lo, hi, n))
	}
	if len(parts) == 0 {
		return "no monitors"
	}
	return strings.Join(parts, ", ")
}

// inventoryModules names each netdev's plug-in module in the inventory,
// where its EEPROM could be read and decoded.
func inventoryModules(env *Env, nds []report.Netdev) {
	for i := range nds {
		raw, found, err := env.moduleEEPROM(nds[i].Name)
		if err != nil || !found || raw.Err != "" {
			continue
		}
		m, err := sysfs.DecodeTransceiver(raw)
		if err != nil {
			continue
		}
		nds[i].Module = &report.Module{Form: m.Form, Spec: m.Spec, Media: m.Media, Vendor: m.Vendor, Part: m.Part,
			Revision: m.Revision, Serial: m.Serial, Firmware: m.Firmware}
	}
}

// moduleCache holds the module EEPROMs one run read: link.optics and the
// inventory look at the same modules, and a live read is several I2C
// transactions through the NIC's firmware per module.
type moduleCache struct {
	mu sync.Mutex
	m  map[string]moduleAnswer
}

type moduleAnswer struct {
	raw   sysfs.ModuleEEPROM
	found bool
	err   error
}

// moduleEEPROM is Host.ModuleEEPROM, asked once per interface and run.
func (e *Env) moduleEEPROM(ifname string) (sysfs.ModuleEEPROM, bool, error) {
	e.modules.mu.Lock()
	defer e.modules.mu.Unlock()
	if a, ok := e.modules.m[ifname]; ok {
		return a.raw, a.found, a.err
	}
	raw, found, err := e.Host.ModuleEEPROM(ifname)
	if e.modules.m == nil {
		e.modules.m = map[string]moduleAnswer{}
	}
	e.modules.m[ifname] = moduleAnswer{raw, found, err}
	return raw, found, err
}

// expectModule offers the port's module as commented pins of the class
// (expect --from-host): vendor, part and firmware, when every netdev of
// the port (each LAG slave) carries the same module. Commented, because
// a fleet usually qualifies more than one part.
func expectModule(env *Env, pm *PortModel, unit string, candidate setter) {
	netdevs := pm.DCBNetdevs
	if len(netdevs) == 0 {
		netdevs = []string{pm.Netdev}
	}
	var first *sysfs.Transceiver
	for _, nd := range netdevs {
		raw, found, err := env.moduleEEPROM(nd)
		if err != nil || !found || raw.Err != "" {
			return
		}
		m, err := sysfs.DecodeTransceiver(raw)
		if err != nil || first != nil && (m.Vendor != first.Vendor || m.Part != first.Part || m.Firmware != first.Firmware) {
			return
		}
		first = m
	}
	if first == nil {
		return
	}
	why := "the module in " + strings.Join(netdevs, ", ") + " when this file was written: uncomment to pin it"
	for _, kv := range [][2]string{{"module_vendor", first.Vendor}, {"module_part", first.Part}, {"module_firmware", first.Firmware}} {
		if kv[1] != "" {
			candidate(unit+"."+kv[0], kv[1], why)
		}
	}
}
