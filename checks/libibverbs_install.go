package checks

import (
	"context"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// LibibverbsSoname is the library every verbs application loads.
const LibibverbsSoname = "libibverbs.so.1"

func init() {
	register(Check{
		ID: "libibverbs.install", Code: 16, Level: 1,
		Title: "libibverbs.so.1 resolves through the loader, once, with a provider for every device's driver",
		Needs: []string{"rdma.devices"},
		Explain: Explanation{
			Judges: "Finds libibverbs.so.1 as the dynamic loader would: LD_LIBRARY_PATH (live runs), then /etc/ld.so.cache (parsed natively, " +
				"glibc's format and the old one; only the entries of the host's own ABI, the one its libc.so.6 is cached with — x86-64, or aarch64 on " +
				"Grace, Ampere and Kunpeng hosts — as that host's loader does), then the standard directories (/lib64, /usr/lib64, /lib/<multiarch>, /usr/lib/<multiarch>, /lib, /usr/lib). " +
				"Follows each hit's symlink chain to a 64-bit ELF file. Fails on a dangling link, on two different copies (an inbox rdma-core beside " +
				"MLNX_OFED's, or a hand-built one in /usr/local or /opt), and on a device whose driver has no provider: " +
				"/etc/libibverbs.d/<name>.driver naming it and lib<name>-rdmav*.so in the provider directory next to the library (<libdir>/libibverbs/).",
			Why: "Every RDMA application loads libibverbs.so.1 and, through it, one provider per device. A missing provider makes the library list " +
				"zero devices while the kernel shows them; two copies mean applications and providers from different builds meet at run time " +
				"(\"couldn't load driver\", ABI warnings, crashes); a dangling link is a half-removed package.",
		},
		Run: runLibibverbsInstall,
	})
}

// libibverbs.install's findings. A candidate's finding is about its path,
// a provider's about the provider's name, the rest about the host.
var (
	libCacheUnreadable = declare(Finding{ID: "libibverbs.install/cache-unreadable", Status: report.Error,
		When:    "/etc/ld.so.cache exists but could not be read or parsed",
		Message: "could not read the loader cache: {cause}",
		Fix: "Rebuild it with `ldconfig` (the loader ignores a corrupt cache and falls back to its built-in directories); " +
			"by hand: `ldconfig -p | grep libibverbs`."})
	libNotInstalled = declare(Finding{ID: "libibverbs.install/not-installed", Status: report.Fail,
		When:    "libibverbs.so.1 is in neither the loader cache nor a standard directory",
		Message: "libibverbs.so.1 not found in the loader cache or the standard directories",
		Fix:     installLibFix})
	libExplicitAbsent = declare(Finding{ID: "libibverbs.install/explicit-absent", Status: report.Fail,
		When:    "the file --libibverbs names does not exist",
		Message: "--libibverbs {path} does not exist",
		Fix:     "Give --libibverbs the path of an installed libibverbs.so.1, or leave it out to judge the copy the loader finds."})
	libDangling = declare(Finding{ID: "libibverbs.install/dangling", Status: report.Fail,
		When:    "a symlink in the chain is dangling: the last target does not exist",
		Message: "dangling symlink: {chain} (the last target does not exist)",
		Fix: "The link chain {chain} ends at a file that is gone: reinstall the package that owns {path} " +
			"(`dpkg -S {path}` or `rpm -qf {path}`), then run `ldconfig`."})
	libBrokenChain = declare(Finding{ID: "libibverbs.install/broken-chain", Status: report.Fail,
		When:    "the symlink chain cannot be followed (a loop, a link that cannot be read)",
		Message: "{chain}: {cause}",
		Fix:     "Reinstall the package that owns {path}, then run `ldconfig`."})
	libNotLoadable = declare(Finding{ID: "libibverbs.install/not-loadable", Status: report.Fail,
		When:    "the file the chain reaches is not a loadable 64-bit ELF library",
		Message: "{chain}: {cause}",
		Fix:     "Replace {file} with the real library from its package, then run `ldconfig`."})
	libTwoCopies = declare(Finding{ID: "libibverbs.install/two-copies", Status: report.Fail,
		When:    "two different copies of libibverbs.so.1 are reachable (an inbox rdma-core beside MLNX_OFED's, or a hand-built one)",
		Message: "{count} different copies of libibverbs.so.1: {copies}",
		Fix: "Keep one RDMA user-space stack. The loader uses {picked}; applications built against the other copy and its providers " +
			"meet this one at run time. Find the package that owns each copy: {owners} — a file no package owns was installed by hand. " +
			"Keep the copy that belongs to the kernel side in use: MLNX_OFED/DOCA-OFED kernel modules (`modinfo -F filename mlx5_core` under updates/ or extra/) " +
			"go with their own libibverbs, the distribution's kernel drivers with its rdma-core. " +
			"Remove the other copy's package (the distribution's rdma-core/libibverbs or MLNX_OFED/DOCA-OFED), or the " +
			"hand-built files and their /etc/ld.so.conf.d entry, then run `ldconfig`; `ldconfig -p | grep libibverbs` must then list one file."})
	libProviderOK = declare(Finding{ID: "libibverbs.install/provider", Status: report.Pass,
		When:    "a device's driver has its provider: a .driver file names it and its lib<name>-rdmav*.so loads",
		Message: "provider {provider} for {devices}: {driver_file}, {object}"})
	libProviderMissing = declare(Finding{ID: "libibverbs.install/provider-missing", Status: report.Fail,
		When:    "no provider for a device's driver (.driver file or lib<name>-rdmav*.so missing or broken)",
		Message: "no provider for {provider} ({devices}): {cause} — the library lists zero of these devices while the kernel shows them",
		Fix:     installProviderFix})
	libProviderConfUnreadable = declare(Finding{ID: "libibverbs.install/provider-config-unreadable", Status: report.Error,
		When:    "/etc/libibverbs.d could not be read",
		Message: "could not read the provider configuration: {cause}",
		Fix:     "Run where /etc/libibverbs.d and the library directory are readable; by hand: `ls -l /etc/libibverbs.d {provider_dir}`."})
	libNoCache = declare(Finding{ID: "libibverbs.install/no-cache", Status: report.Warn,
		When:    "there is no loader cache: the loader searches only its built-in directories",
		Message: "no loader cache ({cache}): run `ldconfig`", Fix: ldconfigFix})
	libCacheStale = declare(Finding{ID: "libibverbs.install/cache-stale", Status: report.Warn,
		When:    "the loader cache lists a libibverbs.so.1 that is gone",
		Message: "the loader cache lists {path}, which does not exist: run `ldconfig`", Fix: ldconfigFix})
	libNotCached = declare(Finding{ID: "libibverbs.install/not-cached", Status: report.Warn,
		When:    "the library is found only in a standard directory, not in the loader cache",
		Message: "libibverbs.so.1 is not in the loader cache; found in {dir}, which the loader searches only if it is one of its built-in directories: run `ldconfig`",
		Fix:     ldconfigFix})
	libInstalled = declare(Finding{ID: "libibverbs.install/ok", Status: report.Pass,
		When:    "one libibverbs.so.1, an intact link chain to a 64-bit ELF file, a provider for every device",
		Message: "{path} → {file}; {providers}"})
)

const ldconfigFix = "Run `ldconfig` so the loader cache matches the installed libraries."

// libCandidate is one place the loader would look for the library.
type libCandidate struct {
	path   string
	source string
	chain  sysfs.LinkChain
}

func runLibibverbsInstall(_ context.Context, env *Env) Result {
	li := &libInstall{h: env.Host, abi: sysfs.NativeLDFlags(), ev: map[string]any{}, missing: true}
	if r, failed := li.readCache(); failed {
		return r
	}
	li.ev["abi"] = sysfs.LDArchName(li.abi)
	li.gather(env.Opts.Libibverbs)
	for i := range li.cands {
		li.judge(&li.cands[i])
	}
	li.ev["candidates"] = li.candEv
	osr, osErr := li.h.OSRelease()
	family := ""
	if osErr == nil {
		family = osr.Family()
		li.ev["distribution"] = map[string]string{"id": osr.ID, "family": family}
	}
	if li.missing {
		return li.notInstalled(family, osr.PrettyName)
	}
	li.copiesFinding(family)
	if r, failed := li.providers(env.Survey(), family); failed {
		return r
	}
	return li.verdict(env.Survey())
}

// libInstall gathers what libibverbs.install finds: the loader's
// candidates for libibverbs.so.1, each judged, and the findings.
type libInstall struct {
	h     *sysfs.Host
	abi   int32
	cache *sysfs.LDCache
	ev    map[string]any

	cands    []libCandidate
	candEv   []map[string]any
	picked   *libCandidate   // the copy the loader uses
	copies   []*libCandidate // one per distinct file, loader order
	missing  bool            // no candidate exists at all
	details  []string
	findings []report.Finding
}

// add records a finding.
func (li *libInstall) add(f report.Finding) { li.findings = append(li.findings, f) }

// messages are the messages of the findings of one status, in order.
func (li *libInstall) messages(st report.Status) []string {
	var out []string
	for _, f := range li.findings {
		if f.Status == st {
			out = append(out, f.Message)
		}
	}
	return out
}

// readCache reads /etc/ld.so.cache; a cache that exists but cannot be read
// is the check's error (the loader then ignores it).
func (li *libInstall) readCache() (Result, bool) {
	h := li.h
	cache, err := h.ReadLDCache()
	switch {
	case err == nil:
		li.cache = cache
		li.ev["ld_cache"] = map[string]any{"format": cache.Format, "entries": len(cache.Entries), "generator": cache.Generator}
		// A snapshot of another architecture is judged by its own ABI.
		li.abi = cache.HostABI(li.abi)
	case sysfs.IsNotExist(err):
		li.details = append(li.details, h.Display(sysfs.LDSOCache)+" is missing: the loader searches only its built-in directories")
		li.add(libNoCache.At("", Slots{"cache": h.Display(sysfs.LDSOCache)}))
	default:
		r := libCacheUnreadable.result("", Slots{"cause": err.Error()})
		r.Observed, r.Expected = h.Display(sysfs.LDSOCache)+" unreadable", "a loader cache ldconfig wrote"
		r.Evidence = map[string]any{"ld_cache": h.Display(sysfs.LDSOCache), "error": err.Error()}
		return r, true
	}
	return Result{}, false
}

// gather lists the candidates in the loader's order: an explicit path,
// LD_LIBRARY_PATH (live runs), the cache, the default directories.
func (li *libInstall) gather(explicit string) {
	h := li.h
	seen := map[string]bool{}
	add := func(p, src string, mustExist bool) {
		p = path.Clean(p)
		if seen[p] {
			return
		}
		if mustExist {
			if _, err := h.Lstat(p); err != nil {
				return
			}
		}
		seen[p] = true
		li.cands = append(li.cands, libCandidate{path: p, source: src, chain: h.FollowLinks(p)})
	}
	if explicit != "" {
		add(explicit, "--libibverbs", false)
	}
	if h.Live() {
		for _, d := range strings.Split(os.Getenv("LD_LIBRARY_PATH"), ":") {
			if d != "" && path.IsAbs(d) {
				add(path.Join(d, LibibverbsSoname), "LD_LIBRARY_PATH", true)
			}
		}
	}
	if li.cache != nil {
		for _, e := range li.cache.Lookup(LibibverbsSoname, li.abi) {
			if e.HWCapsDir != "" {
				li.details = append(li.details, fmt.Sprintf("%s: a glibc-hwcaps (%s) variant in the cache", e.Path, e.HWCapsDir))
			}
			add(e.Path, sysfs.LDSOCache, false)
		}
	}
	for _, d := range sysfs.StandardLibDirs(li.abi) {
		add(path.Join(d, LibibverbsSoname), "standard directory", true)
	}
}

// judge judges one candidate: stale or absent, a broken link chain, not a
// loadable 64-bit ELF file, or a good copy (grouped by the file it reaches).

// judge judges one candidate: stale or absent, a broken link chain, not a
// loadable 64-bit ELF file, or a good copy (grouped by the file it reaches).
func (li *libInstall) judge(c *libCandidate) {
	cev := map[string]any{"path": c.path, "source": c.source, "chain": c.chain.Hops}
	li.candEv = append(li.candEv, cev)
	slots := Slots{"path": c.path, "chain": c.chain.String(), "file": c.chain.Final}
	fail := func(status string, f *Finding, detail string, slots Slots) {
		cev["status"] = status
		li.add(f.At(c.path, slots))
		li.details = append(li.details, fmt.Sprintf("%s (from %s): %s", c.path, c.source, detail))
	}
	switch {
	case c.chain.Absent && c.source == sysfs.LDSOCache:
		cev["status"] = "stale"
		li.details = append(li.details, fmt.Sprintf("%s (from %s): listed but does not exist", li.h.Display(c.path), c.source))
		li.add(libCacheStale.At(c.path, slots))
		return
	case c.chain.Absent:
		cev["status"] = "absent"
		li.details = append(li.details, fmt.Sprintf("%s (from %s): does not exist", li.h.Display(c.path), c.source))
		if c.source == "--libibverbs" {
			li.add(libExplicitAbsent.At(c.path, slots))
		}
		return
	}
	li.missing = false
	switch {
	case c.chain.Dangling:
		fail("dangling", libDangling, fmt.Sprintf("DANGLING %s", c.chain), slots)
		return
	case !c.chain.OK():
		fail("broken", libBrokenChain, fmt.Sprintf("%v", c.chain.Err), slots.with("cause", fmt.Sprint(c.chain.Err)))
		return
	}
	class, err := li.h.ELFClass(c.chain.Final)
	if err != nil || (class != 64 && li.abi != 0) {
		why := fmt.Sprintf("%v", err)
		if err == nil {
			why = fmt.Sprintf("a %d-bit library where a 64-bit one is loaded", class)
		}
		fail("not_loadable", libNotLoadable, why, slots.with("cause", why))
		return
	}
	cev["status"], cev["file"] = "ok", c.chain.Final
	if li.picked == nil {
		li.picked = c
	}
	dup := false
	for _, o := range li.copies {
		if sysfs.SameFile(o.chain, c.chain) {
			dup = true
		}
	}
	if !dup {
		li.copies = append(li.copies, c)
	}
	li.details = append(li.details, fmt.Sprintf("%s (from %s): %s", c.path, c.source, c.chain))
}

// notInstalled is the result when no candidate exists.
func (li *libInstall) notInstalled(family, pretty string) Result {
	if li.cache != nil {
		li.details = append(li.details, fmt.Sprintf("%s: %d entries, none for %s (%s)", li.h.Display(sysfs.LDSOCache), len(li.cache.Entries), LibibverbsSoname, sysfs.LDArchName(li.abi)))
	}
	li.details = append(li.details, "searched: "+strings.Join(sysfs.StandardLibDirs(li.abi), ", "))
	r := libNotInstalled.result("", libraryPackages(family, pretty))
	r.Findings = append(li.findings, r.Findings...)
	r.Observed, r.Expected = "not installed", LibibverbsSoname+" resolvable by the loader"
	r.Details, r.Evidence = li.details, li.ev
	return r
}

// copiesFinding fails two different copies of the library and says which
// one to keep.
func (li *libInstall) copiesFinding(family string) {
	var files []string
	for _, c := range li.copies {
		files = append(files, c.chain.Final)
	}
	li.ev["library_files"] = nonNil(files)
	if len(li.copies) < 2 {
		return
	}
	var list, owners []string
	for i, c := range li.copies {
		who := ""
		if i == 0 {
			who = " — the loader picks this one"
		}
		list = append(list, fmt.Sprintf("%s (%s, via %s)%s", c.chain.Final, c.path, c.source, who))
		owners = append(owners, ownerQuery(family, c.chain.Final))
	}
	li.add(libTwoCopies.At("", Slots{"count": fmt.Sprint(len(li.copies)), "copies": strings.Join(list, "; "),
		"picked": li.copies[0].chain.Final, "owners": strings.Join(owners, "; ")}))
}

// providers judges the providers next to the picked library; a provider
// configuration that cannot be read is the check's error when nothing
// else failed.
func (li *libInstall) providers(s *Survey, family string) (Result, bool) {
	p := li.picked
	if p == nil {
		return Result{}, false
	}
	li.ev["library"] = map[string]any{"path": p.path, "file": p.chain.Final, "source": p.source}
	pv, pd, pe, perr := judgeProviders(li.h, s, p, family)
	li.details = append(li.details, pd...)
	li.ev["providers"] = pe
	if perr != "" && len(li.messages(report.Fail)) == 0 {
		r := libProviderConfUnreadable.result("", Slots{"cause": perr,
			"provider_dir": path.Join(path.Dir(p.chain.Final), sysfs.ProviderSubdir)})
		r.Findings = append(li.findings, r.Findings...)
		r.Observed, r.Expected = "provider configuration unreadable", "a readable "+sysfs.LibibverbsConfDir+" naming each device's provider"
		r.Details, r.Evidence = li.details, li.ev
		return r, true
	}
	li.findings = append(li.findings, pv...)
	return Result{}, false
}

// libibverbs.install's words for the providers of a library that passes.
const (
	libProvidersHead        headline = "providers present for every device"
	libNoProviderNeededHead headline = "no RDMA device needs a provider"
)

// verdict turns the findings into the result: the failures, else the
// warnings, else the library and its providers. A candidate that exists
// either fails or is picked, so without a failure a copy is picked.
func (li *libInstall) verdict(s *Survey) Result {
	p := li.picked
	if p != nil && p.source == "standard directory" && li.cache != nil {
		li.add(libNotCached.At(p.path, Slots{"dir": path.Dir(p.path)}))
	}
	var installed report.Finding
	if len(li.messages(report.Fail))+len(li.messages(report.Warn)) == 0 {
		provs := libProvidersHead
		if len(s.Devices) == 0 {
			provs = libNoProviderNeededHead
		}
		installed = libInstalled.At(p.path, Slots{"path": p.path, "file": p.chain.Final, "providers": string(provs)})
		li.add(installed)
	}
	r := combineFindings(li.findings, false)
	switch fails := li.messages(report.Fail); {
	case len(fails) > 0:
		r.Observed = fmt.Sprintf("%d problem(s)", len(fails))
	case r.Status == report.Pass:
		r.Summary = installed.Message // the providers' passes are details
		fallthrough
	default:
		r.Observed = p.chain.Final // without a failure a copy is picked
	}
	r.Expected = "one " + LibibverbsSoname + " reached by the loader, an intact link chain, a provider for every device"
	r.Details, r.Evidence = li.details, li.ev
	return r
}

// judgeProviders checks that each device's driver has a provider that the
// picked library will load: its .driver file and the provider object.
// It returns a finding per provider, detail lines, evidence, and a
// could-not-look reason.
func judgeProviders(h *sysfs.Host, s *Survey, lib *libCandidate, family string) ([]report.Finding, []string, map[string]any, string) {
	ev := map[string]any{}
	need, details := providersNeeded(h, s)
	if len(need.order) == 0 {
		return nil, details, ev, ""
	}
	conf, confProblems, confErr := h.ConfiguredProviders()
	for _, p := range confProblems {
		details = append(details, p.Error())
	}
	if confErr != nil && !sysfs.IsNotExist(confErr) {
		return nil, details, ev, confErr.Error()
	}
	pl := newProviderLayout(h, lib, conf)
	ev["directory"] = pl.dir
	ev["config_dir"] = h.Display(sysfs.LibibverbsConfDir)
	var fs []report.Finding
	var evList []map[string]any
	packages := providerPackages(family)
	if c := h.Container(); c != "" {
		// Installed into a running container, a package is gone with
		// the container: the providers belong in its image.
		packages += " — in this container (" + c + "), in its image: add that install to the image's build (a Dockerfile RUN line) " +
			"and redeploy, since a package installed into a running container is lost when it restarts"
	}
	for _, name := range need.order {
		pv := pl.judge(name, need.devices[name], packages)
		evList = append(evList, pv.evidence)
		fs = append(fs, pv.finding)
		details = append(details, pv.detail)
	}
	sort.SliceStable(evList, func(i, j int) bool { return evList[i]["provider"].(string) < evList[j]["provider"].(string) })
	ev["needed"] = evList
	return fs, details, ev, ""
}

// providerNeeds are the providers the devices need, in the order first
// needed, with the devices that need each.
type providerNeeds struct {
	order   []string
	devices map[string][]string
}

// providersNeeded works out which provider each device needs from its
// driver; a device whose driver has no known provider is noted in the
// details and not judged.
func providersNeeded(h *sysfs.Host, s *Survey) (providerNeeds, []string) {
	need := providerNeeds{devices: map[string][]string{}}
	var details []string
	mods, _ := h.ReadModules()
	loaded := moduleInUse(mods)
	for _, d := range s.Devices {
		drv := deviceDriver(d, loaded)
		if drv == nil {
			details = append(details, fmt.Sprintf("%s: driver %q has no known provider; not judged", d.Name, d.Driver))
			continue
		}
		if _, ok := need.devices[drv.Provider]; !ok {
			need.order = append(need.order, drv.Provider)
		}
		need.devices[drv.Provider] = append(need.devices[drv.Provider], d.Name)
	}
	return need, details
}

// configuredProvider is a provider's .driver file and, when its line names
// an absolute path prefix instead of a name, that prefix.
type configuredProvider struct{ file, prefix string }

// providerLayout is where the picked library looks for providers: the
// configured .driver files by provider name, the provider directories
// next to the library, and the first of them that exists.
type providerLayout struct {
	h          *sysfs.Host
	lib        *libCandidate
	configured map[string]configuredProvider
	dirs       []string
	dir        string // "" when no provider directory exists
}

func newProviderLayout(h *sysfs.Host, lib *libCandidate, conf map[string]string) providerLayout {
	pl := providerLayout{h: h, lib: lib, configured: configuredByName(conf)}
	// The provider directory sits next to the library (rdma-core's
	// VERBS_PROVIDER_DIR is <libdir>/libibverbs).
	for _, d := range []string{path.Dir(lib.path), path.Dir(lib.chain.Final)} {
		pl.dirs = appendUnique(pl.dirs, path.Join(d, sysfs.ProviderSubdir))
	}
	for _, d := range pl.dirs {
		if ok, _ := h.Exists(d); ok {
			pl.dir = d
			break
		}
	}
	return pl
}

// configuredByName indexes the .driver lines by provider name. A line may
// name an absolute path prefix instead of a name: its base, less "lib", is
// the provider's name.
func configuredByName(conf map[string]string) map[string]configuredProvider {
	byName := map[string]configuredProvider{}
	for name, file := range conf {
		if strings.Contains(name, "/") {
			byName[strings.TrimPrefix(path.Base(name), "lib")] = configuredProvider{file, name}
		} else {
			byName[name] = configuredProvider{file, ""}
		}
	}
	return byName
}

// providerVerdict is one provider's judgement: its evidence, its detail
// line, and its finding.
type providerVerdict struct {
	evidence map[string]any
	detail   string
	finding  report.Finding
}

// judge checks one provider: a .driver file names it, and a provider
// object for it is found and loadable. Any problem makes it missing: the
// library then lists none of its devices although the kernel shows them.
// packages names the packages that carry the providers.
func (pl providerLayout) judge(name string, devs []string, packages string) providerVerdict {
	pe := map[string]any{"provider": name, "devices": devs}
	var problems []string
	c, configured := pl.configured[name]
	if configured {
		pe["driver_file"] = c.file
	} else {
		driverFile := path.Join(sysfs.LibibverbsConfDir, name+".driver")
		problems = append(problems, fmt.Sprintf("%s is missing (no .driver file names %q)", driverFile, name))
	}
	files := pl.providerFiles(name, c)
	good, broken := pl.loadable(files)
	problems = append(problems, broken...)
	if len(files) == 0 {
		problems = append(problems, "no "+pl.wanted(name))
	} else if good == "" && len(problems) == 0 {
		problems = append(problems, "no loadable lib"+name+"-rdmav*.so")
	}
	pe["files"] = nonNil(files)
	on := strings.Join(devs, ", ")
	slots := Slots{"provider": name, "devices": on}
	if len(problems) > 0 {
		pe["status"] = "missing"
		why := strings.Join(problems, "; ")
		return providerVerdict{evidence: pe, finding: libProviderMissing.At(name, slots.with("cause", why, "provider_packages", packages+newerProviders[name])),
			detail: fmt.Sprintf("provider %s for %s: MISSING — %s", name, on, why)}
	}
	pe["status"] = "ok"
	f := libProviderOK.At(name, slots.with("driver_file", c.file, "object", good))
	return providerVerdict{evidence: pe, finding: f, detail: f.Message}
}

// providerFiles finds the provider's objects in the first directory that
// has any: the .driver line's own prefix, the provider directory, then the
// library directory itself (the historical layout).
func (pl providerLayout) providerFiles(name string, c configuredProvider) []string {
	searchDirs := []string{}
	if c.prefix != "" {
		searchDirs = append(searchDirs, path.Dir(c.prefix))
	}
	if pl.dir != "" {
		searchDirs = append(searchDirs, pl.dir)
	}
	searchDirs = appendUnique(searchDirs, path.Dir(pl.lib.path))
	for _, d := range searchDirs {
		fs, err := pl.h.ProviderFiles(d, name)
		if err == nil && len(fs) > 0 {
			return fs
		}
	}
	return nil
}

// loadable follows each provider object's links: good is the first whole
// chain, problems name every broken one.
func (pl providerLayout) loadable(files []string) (good string, problems []string) {
	for _, f := range files {
		ch := pl.h.FollowLinks(f)
		if ch.OK() {
			if good == "" {
				good = ch.String()
			}
			continue
		}
		problems = append(problems, fmt.Sprintf("%s: %v", ch, ch.Err))
	}
	return good, problems
}

// wanted is where the provider's object should be, saying so when no
// provider directory exists at all.
func (pl providerLayout) wanted(name string) string {
	glob := "lib" + name + "-rdmav*.so"
	if pl.dir != "" {
		return path.Join(pl.dir, glob)
	}
	return path.Join(firstOr(pl.dirs, "<libdir>/libibverbs"), glob) + " (no provider directory " + strings.Join(pl.dirs, " or ") + ")"
}

// ownerQuery is the command that names the package owning file.
func ownerQuery(family, file string) string {
	switch family {
	case "debian":
		return "`dpkg -S " + file + "`"
	case "rhel", "suse":
		return "`rpm -qf " + file + "`"
	}
	return "`dpkg -S " + file + "` or `rpm -qf " + file + "`"
}

// The fixes that install the library or its providers: the templates say
// what to install, the slots {packages} and {provider_packages} how on
// this host's distribution (libraryPackages, providerPackages).
const (
	installLibFix      = "Install rdma-core's library and providers{on}: {packages}. With MLNX_OFED/DOCA-OFED, reinstall that stack instead."
	installProviderFix = "Install the providers: {provider_packages}. With MLNX_OFED/DOCA-OFED, reinstall that stack."
)

// libraryPackages are the slots of installLibFix: the packages that
// provide libibverbs.so.1 on the distribution family, and the
// distribution's name (pretty) when known.
func libraryPackages(family, pretty string) Slots {
	on := ""
	if pretty != "" {
		on = " on " + pretty
	}
	pk := "the distribution's rdma-core packages (Debian/Ubuntu: libibverbs1 ibverbs-providers; RHEL family: libibverbs; SUSE: libibverbs1 rdma-core)"
	switch family {
	case "debian":
		pk = "`apt-get install libibverbs1 ibverbs-providers`"
	case "rhel":
		pk = "`dnf install libibverbs` (yum on older releases)"
	case "suse":
		pk = "`zypper install libibverbs1 rdma-core` (and `libibverbs`, which carries the providers)"
	}
	return Slots{"on": on, "packages": pk}
}

// providerPackages names the packages that carry the providers on the
// distribution family.
func providerPackages(family string) string {
	switch family {
	case "debian":
		return "`apt-get install ibverbs-providers` (it ships /etc/libibverbs.d/*.driver and <libdir>/libibverbs/lib*-rdmav*.so)"
	case "rhel":
		return "`dnf reinstall libibverbs` (rdma-core's libibverbs carries /etc/libibverbs.d/*.driver and /usr/lib64/libibverbs/)"
	case "suse":
		return "`zypper install libibverbs`"
	}
	return "rdma-core's providers (Debian/Ubuntu: ibverbs-providers; RHEL family: libibverbs)"
}

// LocateLibibverbs is the libibverbs.so.1 the loader would use on h, found
// as libibverbs.install finds it (explicit, LD_LIBRARY_PATH, the loader
// cache, the standard directories) and never loaded: the path the loader
// opens and the file it reaches, or "" when no candidate is a loadable
// library. An unreadable cache leaves the standard directories.
func LocateLibibverbs(h *sysfs.Host, explicit string) (path, file string) {
	li := &libInstall{h: h, abi: sysfs.NativeLDFlags(), ev: map[string]any{}, missing: true}
	li.readCache()
	li.gather(explicit)
	for i := range li.cands {
		li.judge(&li.cands[i])
	}
	if li.picked == nil {
		return "", ""
	}
	return li.picked.path, li.picked.chain.Final
}

// newerProviders say where a provider comes from when distributions'
// rdma-core releases of the last years do not carry it yet: installing
// their provider package then does not help.
var newerProviders = map[string]string{
	"ionic": "; the ionic provider (AMD Pensando) is in rdma-core only from its 2025 releases on: with an older distribution rdma-core, " +
		"install a newer rdma-core or AMD's user-space package for the card (ionic-common), then check `ls <libdir>/libibverbs/libionic-rdmav*.so`",
}
