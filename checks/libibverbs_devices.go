package checks

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
	"github.com/rdmadoctor/rdmadoctor/verbs/probe"
)

func init() {
	register(Check{
		ID: "libibverbs.devices", Code: 17, Level: 1,
		Title:      "the real libibverbs lists every RDMA device the kernel has (ibv_devices)",
		Needs:      []string{"libibverbs.install", "uverbs.nodes"},
		Privileges: []Need{needUverbsNodes},
		Explain: Explanation{
			Judges: "Loads libibverbs.so.1 (or --libibverbs) in a child process with a deadline and calls ibv_get_device_list, as ibv_devices " +
				"does, then compares the names (and node GUIDs) with /sys/class/infiniband. In a fixture or snapshot the answer comes from " +
				"the facts file. No verbs resources are created.",
			Why: "This is the first thing every RDMA application does. The library lists only devices whose provider it could load and whose " +
				"uverbs node it could open; a device the kernel has but the library does not list is invisible to every application " +
				"(\"No IB devices found\").",
		},
		Run: runLibibverbsDevices,
	})
}

// nullListFix is for ibv_get_device_list failing without an errno.
const nullListFix = "The library gave up without saying why: `IBV_SHOW_WARNINGS=1 VERBS_LOG_LEVEL=3 ibv_devices` prints its own messages, and " +
	"`strace -f -e trace=openat,ioctl ibv_devices` shows the file or call that failed last (/sys/class/infiniband_verbs, /dev/infiniband, a provider)."

const noUverbsFix = "`modprobe ib_uverbs` (and the driver's RDMA module, e.g. mlx5_ib); add them to /etc/modules-load.d/rdma.conf. A kernel built " +
	"without CONFIG_INFINIBAND_USER_ACCESS cannot run verbs applications at all."

// verbsList is the library's device list, from the live child or from a
// snapshot's facts file: the judgement is the same.
type verbsList struct {
	Library    string
	LoadedFrom string
	LoadError  string
	Missing    []string // symbols the library lacks
	ListErrno  string   // "ENOSYS" when ibv_get_device_list returned NULL
	ListError  string
	Devices    []listedDevice
	Warnings   []string // what the library printed
	Providers  []string
}

type listedDevice struct {
	Name, GUID, Uverbs string
}

// VerbsFacts is the verbs child's answer (or its failure, err) in the
// facts file's form. The live check judges this form too, so a snapshot
// that records it replays to the same verdict, word for word.
func VerbsFacts(en *probe.Enumeration, err error) *sysfs.VerbsEnumeration {
	f := &sysfs.VerbsEnumeration{Devices: []sysfs.VerbsDevice{}}
	if err != nil {
		f.ChildError = err.Error()
	}
	if en == nil {
		if f.ChildError == "" {
			f.ChildError = "the verbs child gave no answer"
		}
		return f
	}
	f.Library, f.LibraryPath, f.LoadError = en.Library, en.LoadedFrom, en.LoadError
	f.MissingSymbols, f.Errno, f.ListError = en.MissingSymbols, en.ListErrnoName, en.ListError
	if f.Errno == "" && en.ListErrno != 0 {
		f.Errno = fmt.Sprintf("errno %d", en.ListErrno)
	}
	f.Providers, f.Warnings = en.Providers, en.Warnings
	for _, d := range en.Devices {
		f.Devices = append(f.Devices, sysfs.VerbsDevice{Name: d.Name, NodeGUID: d.NodeGUID, Uverbs: d.UverbsDev})
	}
	return f
}

func listFromFacts(f *sysfs.VerbsEnumeration) verbsList {
	l := verbsList{Library: f.Library, LoadedFrom: f.LibraryPath, LoadError: f.LoadError, Missing: f.MissingSymbols,
		ListErrno: f.Errno, ListError: f.ListError, Warnings: f.Warnings, Providers: f.Providers}
	if l.Library == "" {
		// An older facts file names only the file that was loaded.
		l.Library = f.LibraryPath
	}
	if l.ListError == "" && l.ListErrno != "" {
		l.ListError = "ibv_get_device_list: " + f.Errno
	}
	for _, d := range f.Devices {
		l.Devices = append(l.Devices, listedDevice{Name: d.Name, GUID: d.NodeGUID, Uverbs: d.Uverbs})
	}
	return l
}

// ibvShowWarnings says how to make the library tell why a provider did not load.
const ibvShowWarnings = "`IBV_SHOW_WARNINGS=1 VERBS_LOG_LEVEL=3 ibv_devices` prints the library's own reason for each provider it could not load."

// libibverbs.devices' findings: the library's failures and the snapshot's
// gaps are about the host; the comparison's findings about each device.
// The provider fixes name the distribution's packages ({provider_packages}).
var (
	verbsNoEnumeration = declare(Finding{ID: "libibverbs.devices/not-recorded", Status: report.Error,
		When:    "a snapshot does not record the library's answer",
		Message: "no libibverbs enumeration in the snapshot: {cause}",
		Fix:     "Take the snapshot again with a current rdmadoctor (it records the library's answer), or run on the host itself; by hand: `ibv_devices`."})
	verbsChildFailed = declare(Finding{ID: "libibverbs.devices/child-failed", Status: report.Error,
		When:    "the verbs child timed out or crashed in ibv_get_device_list (a provider hangs or crashes in its init)",
		Message: "could not enumerate through libibverbs: {cause}",
		Fix: "A provider that hangs or crashes in its initialisation stops every application here too: run " +
			"`strace -f -e trace=openat ibv_devices` to see which provider library it opens last (and `IBV_SHOW_WARNINGS=1 VERBS_LOG_LEVEL=3 ibv_devices` " +
			"for the library's own messages), then update or remove that provider."})
	verbsKernelUnreadable = declare(Finding{ID: "libibverbs.devices/kernel-unreadable", Status: report.Error,
		When:    "/sys/class/infiniband could not be listed to compare the library's list with",
		Message: "could not list the kernel's RDMA devices: {cause}",
		Fix:     "Run where /sys is mounted and readable; by hand: compare `ibv_devices` with `ls /sys/class/infiniband`."})
	verbsLoadFailed = declare(Finding{ID: "libibverbs.devices/load-failed", Status: report.Fail,
		When:    "the library does not load (the loader's message is shown)",
		Message: "{library} could not be loaded: {cause}", Fix: installLibFix})
	verbsNotVerbs = declare(Finding{ID: "libibverbs.devices/not-verbs", Status: report.Fail,
		When:    "the file loaded as libibverbs.so.1 lacks verbs",
		Message: "{library} is not a usable libibverbs: it lacks {count} verb(s): {symbols}",
		Fix: "The file the loader finds first as libibverbs.so.1 is not rdma-core's library (or a very old one): `ldconfig -p | grep libibverbs` " +
			"and LD_LIBRARY_PATH show which; remove it or fix the path. " + installLibFix})
	verbsNoUverbs = declare(Finding{ID: "libibverbs.devices/list-enosys", Status: report.Fail,
		When:    "ibv_get_device_list returns NULL with ENOSYS: the kernel has no uverbs",
		Message: "ibv_get_device_list returned NULL with ENOSYS: the kernel has no uverbs (no InfiniBand user access)", Fix: noUverbsFix})
	verbsListErrno = declare(Finding{ID: "libibverbs.devices/list-errno", Status: report.Fail,
		When:    "ibv_get_device_list returns NULL with another errno",
		Message: "ibv_get_device_list returned NULL with {errno}", Fix: genericVerbsFix})
	verbsListNoErrno = declare(Finding{ID: "libibverbs.devices/list-no-errno", Status: report.Fail,
		When:    "ibv_get_device_list returns NULL without setting errno",
		Message: "ibv_get_device_list returned NULL without setting errno: {cause}", Fix: nullListFix})
	verbsNothing = declare(Finding{ID: "libibverbs.devices/none", Status: report.Skip,
		When:    "the kernel has no RDMA device and the library lists none",
		Message: "the kernel has no RDMA device, and the library lists none"})
	verbsListed = declare(Finding{ID: "libibverbs.devices/listed", Status: report.Pass,
		When:    "the library lists the kernel's device, with the same node GUID",
		Message: "{device} ({guid})"})
	verbsNotListed = declare(Finding{ID: "libibverbs.devices/not-listed", Status: report.Fail,
		When:    "the library does not list a kernel device: the provider of its driver did not load",
		Message: "{device} (driver {driver}): not listed — most often its provider lib{provider}-rdmav*.so did not load{said}",
		Fix:     installProviderFix + "\n" + ibvShowWarnings})
	verbsNotListedNetns = declare(Finding{ID: "libibverbs.devices/not-listed-netns", Status: report.Fail,
		When: "the library does not list a kernel device while the RDMA subsystem is in exclusive netns mode: " +
			"it belongs to another network namespace (or its provider did not load)",
		Message: "{device} (driver {driver}): not listed — the RDMA subsystem is in exclusive netns mode, so the device belongs to another network namespace " +
			"(or its provider lib{provider}-rdmav*.so did not load){said}",
		Fix: exclusiveNetnsFix("{devices}") + " If the device does belong to this namespace, its provider did not load:\n" + installProviderFix + "\n" + ibvShowWarnings})
	verbsUnknownDriver = declare(Finding{ID: "libibverbs.devices/not-listed-unknown-driver", Status: report.Fail,
		When:    "the library does not list a kernel device whose driver has no known provider",
		Message: "{device}: in the kernel, not listed by the library (driver {driver} has no known provider)", Fix: installProviderFix})
	verbsStray = declare(Finding{ID: "libibverbs.devices/stray", Status: report.Warn,
		When:    "the library lists a device the kernel does not show",
		Message: "{device}: listed by the library, not in the kernel", Fix: strayFix})
	verbsGUIDDiffers = declare(Finding{ID: "libibverbs.devices/guid-differs", Status: report.Warn,
		When:    "the library sees another node GUID than sysfs",
		Message: "{device}: node GUID {library_guid} in the library, {sysfs_guid} in sysfs", Fix: strayFix})
)

const strayFix = "Two RDMA stacks or a stale sysfs view: compare `ibv_devices` with `ls /sys/class/infiniband`, and keep one libibverbs."

func runLibibverbsDevices(ctx context.Context, env *Env) Result {
	h := env.Host
	var f *sysfs.VerbsEnumeration
	if h.Live() {
		f = VerbsFacts(env.verbsEnumeration(ctx))
		env.noteJudgedVerbs(f)
	} else {
		rec, err := h.RecordedVerbs()
		if err != nil {
			r := verbsNoEnumeration.result("", Slots{"cause": err.Error()})
			r.Observed, r.Expected = "no recorded enumeration", "the facts file's libibverbs answer"
			return r
		}
		f = rec
	}
	if f.ChildError != "" {
		r := verbsChildFailed.result("", Slots{"cause": f.ChildError})
		r.Observed, r.Expected = "no answer from ibv_get_device_list", "ibv_get_device_list returns within the deadline"
		r.Details = append(r.Details, f.Warnings...)
		return r
	}
	list := listFromFacts(f)
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := verbsKernelUnreadable.result("", Slots{"cause": s.DevicesErr.Error()})
		r.Observed, r.Expected = "/sys/class/infiniband unreadable", "a readable /sys/class/infiniband to compare the library's list with"
		return r
	}
	family, pretty := "", ""
	if osr, err := h.OSRelease(); err == nil {
		family, pretty = osr.Family(), osr.PrettyName
	}
	netns := ""
	if m, err := h.RDMASystem(); err == nil {
		netns = m.NetnsMode
	}
	mods, _ := h.ReadModules()
	loaded := moduleInUse(mods)
	driverOf := func(d sysfs.RDMADevice) *Driver { return deviceDriver(d, loaded) }
	return judgeVerbsDevices(s.Devices, list, family, pretty, netns, driverOf)
}

// judgeVerbsDevices compares the library's list with the kernel's devices.
func judgeVerbsDevices(kernel []sysfs.RDMADevice, l verbsList, family, pretty, netns string, driverOf func(sysfs.RDMADevice) *Driver) Result {
	ev := verbsListEvidence(l)
	expected := "ibv_get_device_list lists every device in /sys/class/infiniband"
	if r, failed := libraryFailure(l, family, pretty, ev); failed {
		r.Expected, r.Evidence = expected, ev
		return r
	}
	c := compareVerbsDevices(kernel, l, family, netns == "exclusive", driverOf)
	ev["missing"] = nonNil(c.missingNames)
	c.details = append(c.details, l.Warnings...)
	var r Result
	switch {
	case len(kernel) == 0 && len(l.Devices) == 0:
		r = verbsNothing.result("", nil)
	case len(c.missingNames) > 0:
		r = c.missingResult(len(kernel))
	case c.strays > 0:
		r = c.strayResult()
	default:
		r = c.allListedResult()
	}
	r.Observed = fmt.Sprintf("%d of %d kernel device(s) listed", len(kernel)-len(c.missingNames), len(kernel))
	r.Expected = expected
	r.Details = c.details
	r.Evidence = ev
	return r
}

// verbsListEvidence records the library's answer: what it is, where it was
// loaded from, what it listed, and what it printed and loaded when it did.
func verbsListEvidence(l verbsList) map[string]any {
	ev := map[string]any{
		"library": l.Library, "loaded_from": l.LoadedFrom, "devices": nonNilListed(l.Devices),
	}
	if len(l.Warnings) > 0 {
		ev["library_messages"] = l.Warnings
	}
	if len(l.Providers) > 0 {
		ev["providers_loaded"] = l.Providers
	}
	return ev
}

// verbsUnit is one device's finding before it is rendered: the exclusive
// netns fix names every device the library misses.
type verbsUnit struct {
	f     *Finding
	unit  string
	slots Slots
}

// verbsComparison is the library's list held against the kernel's: a
// finding per device, the names of the kernel devices the library misses,
// how many it lists that the kernel does not show (or with another node
// GUID), and a table row per device.
type verbsComparison struct {
	listed       map[string]listedDevice
	exclusive    bool   // RDMA netns mode is exclusive
	packages     string // the provider packages of the distribution
	units        []verbsUnit
	findings     []report.Finding
	missingNames []string
	strays       int
	details      []string
}

// compareVerbsDevices walks the kernel's devices, then the ones only the
// library lists, building the comparison table and the findings.
func compareVerbsDevices(kernel []sysfs.RDMADevice, l verbsList, family string, exclusive bool, driverOf func(sysfs.RDMADevice) *Driver) *verbsComparison {
	c := &verbsComparison{listed: map[string]listedDevice{}, exclusive: exclusive, packages: providerPackages(family)}
	for _, d := range l.Devices {
		c.listed[d.Name] = d
	}
	c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", "device", "node GUID", "library"))
	inKernel := map[string]bool{}
	for _, k := range kernel {
		inKernel[k.Name] = true
		if d, ok := c.listed[k.Name]; ok {
			c.noteListed(k, d)
		} else {
			c.noteMissing(k, driverOf(k), l.Warnings)
		}
	}
	var extra []string
	for _, d := range l.Devices {
		if !inKernel[d.Name] {
			extra = append(extra, d.Name)
			c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", d.Name, d.GUID, "listed, not in the kernel"))
		}
	}
	sort.Strings(extra)
	for _, name := range extra {
		c.units = append(c.units, verbsUnit{verbsStray, name, Slots{"device": name}})
		c.strays++
	}
	for _, u := range c.units {
		c.findings = append(c.findings, u.f.At(u.unit, u.slots.with("devices", strings.Join(c.missingNames, ", "))))
	}
	return c
}

// noteListed records a kernel device the library lists, and a node GUID
// that differs between the two (two stacks, or a stale view).
func (c *verbsComparison) noteListed(k sysfs.RDMADevice, d listedDevice) {
	guid := firstOr([]string{d.GUID}, k.NodeGUID)
	c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", k.Name, guid, "listed"))
	if d.GUID != "" && k.NodeGUID != "" && normGUID(d.GUID) != normGUID(k.NodeGUID) {
		c.units = append(c.units, verbsUnit{verbsGUIDDiffers, k.Name, Slots{"device": k.Name, "library_guid": d.GUID, "sysfs_guid": k.NodeGUID}})
		c.strays++
		return
	}
	c.units = append(c.units, verbsUnit{verbsListed, k.Name, Slots{"device": k.Name, "guid": guid}})
}

// noteMissing records a kernel device the library does not list, with
// why: its provider, or in exclusive netns mode the namespace first, with
// what the library printed about the provider.
func (c *verbsComparison) noteMissing(k sysfs.RDMADevice, drv *Driver, warnings []string) {
	c.missingNames = append(c.missingNames, k.Name)
	c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", k.Name, k.NodeGUID, "MISSING"))
	slots := Slots{"device": k.Name, "provider_packages": c.packages}
	if drv == nil {
		c.units = append(c.units, verbsUnit{verbsUnknownDriver, k.Name, slots.with("driver", fmt.Sprintf("%q", k.Driver))})
		return
	}
	drvName := drv.PCIDriver
	if drvName == "" {
		drvName = drv.RDMAModule()
	}
	said := ""
	for _, w := range warnings {
		if strings.Contains(w, "lib"+drv.Provider+"-") || strings.Contains(w, "'"+drv.Provider+"'") {
			said = " — the library said: " + w
			break
		}
	}
	f := verbsNotListed
	if c.exclusive {
		// The provider is installed (libibverbs.install passed); in
		// exclusive mode the device is in another namespace.
		f = verbsNotListedNetns
	}
	c.units = append(c.units, verbsUnit{f, k.Name, slots.with("driver", drvName, "provider", drv.Provider, "said", said)})
}

// remedy is the fixes of the findings that did not pass, line by line,
// each line once: two devices missing their providers install them once.
func (c *verbsComparison) remedy() string {
	var lines []string
	for _, f := range c.findings {
		if f.Status == report.Pass || f.Fix == "" {
			continue
		}
		for _, l := range strings.Split(f.Fix, "\n") {
			lines = appendUnique(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// messages are the messages of the findings of one status.
func (c *verbsComparison) messages(st report.Status) []string {
	var out []string
	for _, f := range c.findings {
		if f.Status == st {
			out = append(out, f.Message)
		}
	}
	return out
}

// libibverbs.devices's headlines: the summary over the devices compared.
const (
	verbsMissingHead   headline = "the library lists {listed} of the kernel's {count} RDMA device(s): {missing}"
	verbsStrayHead     headline = "the library lists device(s) the kernel does not show: {devices}"
	verbsAllListedHead headline = "ibv_get_device_list lists all {count} kernel device(s): {devices}"
)

// missingResult fails: an application here sees fewer devices than the
// kernel has. In an exclusive RDMA netns the namespace comes first: it is
// the cause a provider reinstall would never fix.
func (c *verbsComparison) missingResult(kernel int) Result {
	missing := c.messages(report.Fail)
	r := Result{Status: worstStatus(c.findings), Findings: c.findings, Remedy: c.remedy(),
		Summary: verbsMissingHead.render(Slots{"listed": fmt.Sprint(kernel - len(missing)), "count": fmt.Sprint(kernel), "missing": strings.Join(missing, "; ")})}
	if c.exclusive {
		c.details = append([]string{"RDMA netns mode is exclusive (`rdma system`): a device is visible only in its own network namespace"}, c.details...)
	}
	return r
}

// strayResult warns: the library lists devices the kernel does not show,
// or sees another node GUID — two RDMA stacks or a stale sysfs view.
func (c *verbsComparison) strayResult() Result {
	var parts, extra []string
	for _, f := range c.findings {
		switch f.ID {
		case verbsStray.ID:
			extra = append(extra, f.Unit)
		case verbsGUIDDiffers.ID:
			parts = append(parts, f.Message)
		}
	}
	if len(extra) > 0 {
		parts = append([]string{verbsStrayHead.render(Slots{"devices": strings.Join(extra, ", ")})}, parts...)
	}
	return Result{Status: worstStatus(c.findings), Summary: strings.Join(parts, "; "), Remedy: c.remedy(), Findings: c.findings}
}

// allListedResult passes, naming each device with its node GUID.
func (c *verbsComparison) allListedResult() Result {
	names := c.messages(report.Pass)
	return Result{Status: worstStatus(c.findings), Findings: c.findings,
		Summary: verbsAllListedHead.render(Slots{"count": fmt.Sprint(len(names)), "devices": strings.Join(names, ", ")})}
}

// libraryFailure judges a library that did not answer with a list: it did
// not load, lacks verbs, or ibv_get_device_list returned NULL. It fills in
// ev and reports whether the library failed.
func libraryFailure(l verbsList, family, pretty string, ev map[string]any) (Result, bool) {
	name := orDefault(l.Library, LibibverbsSoname)
	install := libraryPackages(family, pretty)
	var r Result
	switch {
	case l.LoadError != "":
		ev["load_error"] = l.LoadError
		r = verbsLoadFailed.result("", install.with("library", name, "cause", l.LoadError))
		r.Observed = "not loadable"
	case len(l.Missing) > 0:
		ev["missing_symbols"] = l.Missing
		r = verbsNotVerbs.result("", install.with("library", orDefault(l.LoadedFrom, name), "count", fmt.Sprint(len(l.Missing)),
			"symbols", strings.Join(l.Missing, ", ")))
		r.Observed = "wrong library"
	case l.ListErrno == "ENOSYS":
		ev["list_errno"] = l.ListErrno
		r = verbsNoUverbs.result("", nil)
		r.Observed, r.Details = "NULL, "+l.ListErrno, l.Warnings
	case l.ListErrno != "":
		ev["list_errno"] = l.ListErrno
		r = verbsListErrno.result("", Slots{"errno": l.ListErrno})
		r.Observed, r.Details = "NULL, "+l.ListErrno, l.Warnings
	case l.ListError != "":
		// NULL without errno: the library failed and did not say why.
		// That is no empty list, and no provider's fault to guess at.
		ev["list_error"] = l.ListError
		r = verbsListNoErrno.result("", Slots{"cause": l.ListError})
		r.Observed, r.Details = "NULL, no errno", l.Warnings
	default:
		return Result{}, false
	}
	return r, true
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func normGUID(g string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(g, "0x"), ":", ""))
}

func nonNilListed(d []listedDevice) []map[string]string {
	out := []map[string]string{}
	for _, x := range d {
		m := map[string]string{"name": x.Name, "node_guid": x.GUID}
		if x.Uverbs != "" {
			m["uverbs"] = x.Uverbs
		}
		out = append(out, m)
	}
	return out
}
