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
			Failures: []Failure{
				{report.Fail, "the library does not load (the loader's message is shown)", "Install rdma-core's libibverbs for the distribution (`apt-get install libibverbs1 ibverbs-providers`, `dnf install libibverbs`, `zypper install libibverbs1 rdma-core`)."},
				{report.Fail, "the file loaded as libibverbs.so.1 lacks verbs", "Remove the foreign or ancient libibverbs.so.1 the loader finds first (`ldconfig -p | grep libibverbs`, LD_LIBRARY_PATH)."},
				{report.Fail, "ibv_get_device_list returns NULL with ENOSYS: the kernel has no uverbs", noUverbsFix},
				{report.Fail, "ibv_get_device_list returns NULL without setting errno", nullListFix},
				{report.Fail, "the library lists fewer devices than the kernel while the RDMA subsystem is in exclusive netns mode: they belong to another network namespace",
					exclusiveNetnsFix("")},
				{report.Fail, "the library lists fewer devices than the kernel: the provider of their driver did not load", "Install the provider package (`ibverbs-providers` on Debian/Ubuntu, `libibverbs` on RHEL/SUSE) or reinstall MLNX_OFED/DOCA-OFED."},
				{report.Warn, "the library lists a device the kernel does not show, or another node GUID", "Two RDMA stacks or a stale sysfs view: compare `ibv_devices` with `ls /sys/class/infiniband`."},
				{report.Error, "the verbs child timed out or crashed in ibv_get_device_list (a provider hangs or crashes in its init)", "Find the provider: `IBV_SHOW_WARNINGS=1 VERBS_LOG_LEVEL=3 ibv_devices`, and `strace -f -e trace=openat ibv_devices` shows the last provider opened before the hang or crash; update or remove it."},
			},
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

func runLibibverbsDevices(ctx context.Context, env *Env) Result {
	h := env.Host
	var f *sysfs.VerbsEnumeration
	if h.Live() {
		f = VerbsFacts(env.verbsEnumeration(ctx))
		env.noteJudgedVerbs(f)
	} else {
		rec, err := h.RecordedVerbs()
		if err != nil {
			r := errorf("no libibverbs enumeration in the snapshot: %v", err)
			r.Observed, r.Expected = "no recorded enumeration", "the facts file's libibverbs answer"
			r.Remedy = "Take the snapshot again with a current rdmadoctor (it records the library's answer), or run on the host itself; by hand: `ibv_devices`."
			return r
		}
		f = rec
	}
	if f.ChildError != "" {
		r := errorf("could not enumerate through libibverbs: %s", f.ChildError)
		r.Observed, r.Expected = "no answer from ibv_get_device_list", "ibv_get_device_list returns within the deadline"
		r.Remedy = "A provider that hangs or crashes in its initialisation stops every application here too: run " +
			"`strace -f -e trace=openat ibv_devices` to see which provider library it opens last (and `IBV_SHOW_WARNINGS=1 VERBS_LOG_LEVEL=3 ibv_devices` " +
			"for the library's own messages), then update or remove that provider."
		r.Details = append(r.Details, f.Warnings...)
		return r
	}
	list := listFromFacts(f)
	s := env.Survey()
	if s.DevicesErr != nil && !sysfs.IsNotExist(s.DevicesErr) {
		r := errorf("could not list the kernel's RDMA devices: %v", s.DevicesErr)
		r.Observed, r.Expected = "/sys/class/infiniband unreadable", "a readable /sys/class/infiniband to compare the library's list with"
		r.Remedy = "Run where /sys is mounted and readable; by hand: compare `ibv_devices` with `ls /sys/class/infiniband`."
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
	ev["missing"] = nonNil(c.missing)
	c.details = append(c.details, l.Warnings...)
	var r Result
	switch {
	case len(kernel) == 0 && len(l.Devices) == 0:
		r = skip("the kernel has no RDMA device, and the library lists none")
	case len(c.missing) > 0:
		r = c.missingResult(len(kernel), family)
	case len(c.extra) > 0 || len(c.mismatched) > 0:
		r = c.strayResult()
	default:
		r = c.allListedResult(kernel)
	}
	r.Observed = fmt.Sprintf("%d of %d kernel device(s) listed", len(kernel)-len(c.missing), len(kernel))
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

// verbsComparison is the library's list held against the kernel's: the
// kernel devices it misses (why, and by name), the node GUIDs that differ,
// the devices only it lists, a table row per device, and the remedies the
// missing devices call for.
type verbsComparison struct {
	listed                map[string]listedDevice
	exclusive             bool // RDMA netns mode is exclusive
	missing, missingNames []string
	mismatched, extra     []string
	details, remedies     []string
}

// compareVerbsDevices walks the kernel's devices, then the ones only the
// library lists, building the comparison table.
func compareVerbsDevices(kernel []sysfs.RDMADevice, l verbsList, family string, exclusive bool, driverOf func(sysfs.RDMADevice) *Driver) *verbsComparison {
	c := &verbsComparison{listed: map[string]listedDevice{}, exclusive: exclusive}
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
			c.noteMissing(k, driverOf(k), l.Warnings, family)
		}
	}
	for _, d := range l.Devices {
		if !inKernel[d.Name] {
			c.extra = append(c.extra, d.Name)
			c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", d.Name, d.GUID, "listed, not in the kernel"))
		}
	}
	sort.Strings(c.extra)
	return c
}

// noteListed records a kernel device the library lists, and a node GUID
// that differs between the two (two stacks, or a stale view).
func (c *verbsComparison) noteListed(k sysfs.RDMADevice, d listedDevice) {
	c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", k.Name, firstOr([]string{d.GUID}, k.NodeGUID), "listed"))
	if d.GUID != "" && k.NodeGUID != "" && normGUID(d.GUID) != normGUID(k.NodeGUID) {
		c.mismatched = append(c.mismatched, fmt.Sprintf("%s: node GUID %s in the library, %s in sysfs", k.Name, d.GUID, k.NodeGUID))
	}
}

// noteMissing records a kernel device the library does not list, with why;
// when its driver is known, its provider is the thing to install and the
// library's own messages say why it did not load.
func (c *verbsComparison) noteMissing(k sysfs.RDMADevice, drv *Driver, warnings []string, family string) {
	if drv != nil {
		c.remedies = appendUnique(c.remedies, installProviderRemedy(family))
		c.remedies = appendUnique(c.remedies, "`IBV_SHOW_WARNINGS=1 VERBS_LOG_LEVEL=3 ibv_devices` prints the library's own reason for each provider it could not load.")
	}
	c.missing = append(c.missing, notListed(k, drv, warnings, c.exclusive))
	c.missingNames = append(c.missingNames, k.Name)
	c.details = append(c.details, fmt.Sprintf("%-16s %-20s %s", k.Name, k.NodeGUID, "MISSING"))
}

// missingResult fails: an application here sees fewer devices than the
// kernel has. In an exclusive RDMA netns the namespace comes first: it is
// the cause a provider reinstall would never fix.
func (c *verbsComparison) missingResult(kernel int, family string) Result {
	r := fail(fmt.Sprintf("the library lists %d of the kernel's %d RDMA device(s): %s", kernel-len(c.missing), kernel, strings.Join(c.missing, "; ")))
	remedies := c.remedies
	if len(remedies) == 0 {
		remedies = append(remedies, installProviderRemedy(family))
	}
	if c.exclusive {
		c.details = append([]string{"RDMA netns mode is exclusive (`rdma system`): a device is visible only in its own network namespace"}, c.details...)
		remedies = append([]string{exclusiveNetnsFix(strings.Join(c.missingNames, ", ")) +
			" If the device does belong to this namespace, its provider did not load:"}, remedies...)
	}
	r.Remedy = strings.Join(remedies, "\n")
	return r
}

// strayResult warns: the library lists devices the kernel does not show,
// or sees another node GUID — two RDMA stacks or a stale sysfs view.
func (c *verbsComparison) strayResult() Result {
	var parts []string
	if len(c.extra) > 0 {
		parts = append(parts, "the library lists device(s) the kernel does not show: "+strings.Join(c.extra, ", "))
	}
	parts = append(parts, c.mismatched...)
	r := warn(strings.Join(parts, "; "))
	r.Remedy = "Two RDMA stacks or a stale sysfs view: compare `ibv_devices` with `ls /sys/class/infiniband`, and keep one libibverbs."
	return r
}

// allListedResult passes, naming each device with its node GUID.
func (c *verbsComparison) allListedResult(kernel []sysfs.RDMADevice) Result {
	var names []string
	for _, k := range kernel {
		names = append(names, fmt.Sprintf("%s (%s)", k.Name, firstOr([]string{c.listed[k.Name].GUID}, k.NodeGUID)))
	}
	return pass(fmt.Sprintf("ibv_get_device_list lists all %d kernel device(s): %s", len(kernel), strings.Join(names, ", ")))
}

// notListed says why the library may not list kernel device k of driver
// drv (nil: unknown), with what the library printed about its provider.
func notListed(k sysfs.RDMADevice, drv *Driver, warnings []string, exclusive bool) string {
	if drv == nil {
		return fmt.Sprintf("%s: in the kernel, not listed by the library (driver %q has no known provider)", k.Name, k.Driver)
	}
	drvName := drv.PCIDriver
	if drvName == "" {
		drvName = drv.RDMAModule()
	}
	what := fmt.Sprintf("%s (driver %s): not listed — most often its provider lib%s-rdmav*.so did not load", k.Name, drvName, drv.Provider)
	if exclusive {
		// The provider is installed (libibverbs.install passed); in
		// exclusive mode the device is in another namespace.
		what = fmt.Sprintf("%s (driver %s): not listed — the RDMA subsystem is in exclusive netns mode, so the device belongs to another network namespace "+
			"(or its provider lib%s-rdmav*.so did not load)", k.Name, drvName, drv.Provider)
	}
	for _, w := range warnings {
		if strings.Contains(w, "lib"+drv.Provider+"-") || strings.Contains(w, "'"+drv.Provider+"'") {
			return what + " — the library said: " + w
		}
	}
	return what
}

// libraryFailure judges a library that did not answer with a list: it did
// not load, lacks verbs, or ibv_get_device_list returned NULL. It fills in
// ev and reports whether the library failed.
func libraryFailure(l verbsList, family, pretty string, ev map[string]any) (Result, bool) {
	name := orDefault(l.Library, LibibverbsSoname)
	lib := orDefault(l.LoadedFrom, name)
	var r Result
	switch {
	case l.LoadError != "":
		ev["load_error"] = l.LoadError
		r = fail(fmt.Sprintf("%s could not be loaded: %s", name, l.LoadError))
		r.Observed, r.Remedy = "not loadable", installLibRemedy(family, pretty)
	case len(l.Missing) > 0:
		ev["missing_symbols"] = l.Missing
		r = fail(fmt.Sprintf("%s is not a usable libibverbs: it lacks %d verb(s): %s", lib, len(l.Missing), strings.Join(l.Missing, ", ")))
		r.Observed = "wrong library"
		r.Remedy = "The file the loader finds first as " + LibibverbsSoname + " is not rdma-core's library (or a very old one): `ldconfig -p | grep libibverbs` " +
			"and LD_LIBRARY_PATH show which; remove it or fix the path. " + installLibRemedy(family, pretty)
	case l.ListErrno != "":
		ev["list_errno"] = l.ListErrno
		r = fail(fmt.Sprintf("ibv_get_device_list returned NULL with %s", l.ListErrno))
		r.Observed, r.Remedy, r.Details = "NULL, "+l.ListErrno, genericVerbsFix, l.Warnings
		if l.ListErrno == "ENOSYS" {
			r.Summary += ": the kernel has no uverbs (no InfiniBand user access)"
			r.Remedy = noUverbsFix
		}
	case l.ListError != "":
		// NULL without errno: the library failed and did not say why.
		// That is no empty list, and no provider's fault to guess at.
		ev["list_error"] = l.ListError
		r = fail("ibv_get_device_list returned NULL without setting errno: " + l.ListError)
		r.Observed, r.Remedy, r.Details = "NULL, no errno", nullListFix, l.Warnings
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
