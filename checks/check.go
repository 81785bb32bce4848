// Package checks is rdmadoctor's catalog and pipeline: a registry of checks,
// each a value with an ID, an exit code, a level, the checks it needs and a
// Run function that judges one aspect of the host, and the runner that walks
// them in catalog order. One file per check holds its judgement and its
// remedy text; adding a check is adding one file.
package checks

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rdmadoctor/rdmadoctor/checks/expect"
	"github.com/rdmadoctor/rdmadoctor/report"
	"github.com/rdmadoctor/rdmadoctor/report/state"
	"github.com/rdmadoctor/rdmadoctor/sysfs"
)

// Check is one entry of the catalog.
type Check struct {
	ID    string // "kernel.modules"
	Code  int    // exit code when this check is the root cause; stable forever
	Level int    // 1 read-only, 2 creates verbs resources
	Title string // one line for `rdmadoctor list`
	// Needs are the checks that must not fail before this one can judge.
	Needs []string
	// Privileges are what the check needs of the process on a live host
	// (privileges.go): the shipped deployments grant the required ones of
	// the checks they run, and `explain` lists them.
	Privileges []Need
	Explain    Explanation
	Run        func(ctx context.Context, env *Env) Result
}

// Explanation is what `rdmadoctor explain` prints.
type Explanation struct {
	Judges   string    // what the check looks at and how it decides
	Why      string    // why an operator should care
	Failures []Failure // every finding it can report, with the fix for each
}

// Failure is one finding a check can report and its fix.
type Failure struct {
	Status  report.Status
	Finding string
	Fix     string
}

// Result is what a check's Run returns; the runner adds the catalog fields.
type Result struct {
	Status   report.Status
	Summary  string // one sentence: what was observed
	Observed string // the observed value, short
	Expected string // the value a healthy host has
	Details  []string
	Remedy   string
	Evidence map[string]any
	// BlocksNothing marks a fail that is only a deviation from the
	// expectations file (a firmware version, a device count): the units
	// exist and work, so the checks that need this one still judge them
	// and the run's gating (Run) does not block them.
	BlocksNothing bool
	// NothingBeyond marks a skip that leaves the checks needing this one
	// nothing to judge (a cloud VM without RDMA by its machine type): they
	// are skipped as blocked by it instead of failing on what cannot exist.
	NothingBeyond bool
	// Findings are the declared findings the result was rendered from,
	// one per unit judged (finding.go).
	Findings []report.Finding
}

// Options are the thresholds and switches that flags set.
type Options struct {
	Level          int
	CheckTimeout   time.Duration // deadline of one check
	MinMemlock     uint64        // bytes; limits.memlock
	ExpectRate     float64       // Gb/s; 0 = any
	ExpectLossless bool
	RoCETC         int           // the traffic class RoCE applications use (--roce-tc)
	RoCETCSet      bool          // RoCETC was given
	Interval       time.Duration // counters.errors sampling window; 0 = one sample
	ProbeSize      int
	ProbeTimeout   time.Duration
	Libibverbs     string // path override for libibverbs.so.1
	Executable     string // this binary, re-executed for the verbs child
	// Expect is the expectations class this host matched (--expect), nil
	// when none: the checks judge against it as well as the hardware.
	Expect *expect.Class
	// State is what earlier runs kept (--state), nil without it: the
	// counter history is read from it and this run's readings added to it.
	State *state.State
}

// Env is what a check may look at: the host reader, the options and the
// survey of the host that several checks share.
type Env struct {
	Host *sysfs.Host
	Opts Options
	// Expect is Opts.Expect: the class this host must match, nil when none.
	// Its methods are nil-safe, so a check asks it without a nil test.
	Expect *expect.Class

	surveyOnce sync.Once
	survey     *Survey
	modelOnce  sync.Once
	model      *HostModel
	netdevOnce sync.Once
	netdevs    *netdevTable
	gpuOnce    sync.Once
	gpus       *gpuSurvey

	verbs verbsState // the verbs child's work, done once per run (verbs_session.go)

	// stateMu guards Opts.State: the checks that keep a history run
	// concurrently (historyRun.lock).
	stateMu sync.Mutex

	modules moduleCache  // the modules' EEPROMs, read once per run (link_optics.go)
	ibLinks ibLinkLayers // whether sysfs lists only non-InfiniBand ports, read once per run (ib_mad.go)
}

// NewEnv prepares an environment for one run.
func NewEnv(h *sysfs.Host, opts Options) *Env {
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 10 * time.Second
	}
	return &Env{Host: h, Opts: opts, Expect: opts.Expect}
}

// Survey returns the shared, once-read picture of the host's RDMA hardware.
func (e *Env) Survey() *Survey {
	e.surveyOnce.Do(func() { e.survey = takeSurvey(e.Host) })
	return e.survey
}

var (
	registry = map[string]*Check{}
	byCode   = map[int]*Check{}
)

// register adds a check to the catalog; it is called from each check file's
// init. A duplicate ID or code is a programming error and panics at start.
func register(c Check) {
	if c.ID == "" || c.Code <= 2 || c.Code > 125 || c.Run == nil || c.Level < 1 {
		panic(fmt.Sprintf("checks: bad catalog entry %+v", c))
	}
	if _, dup := registry[c.ID]; dup {
		panic("checks: duplicate check id " + c.ID)
	}
	if _, dup := byCode[c.Code]; dup {
		panic(fmt.Sprintf("checks: duplicate exit code %d", c.Code))
	}
	cc := c
	registry[c.ID] = &cc
	byCode[c.Code] = &cc
}

// Catalog returns every check in catalog (exit-code) order.
func Catalog() []*Check {
	out := make([]*Check, 0, len(registry))
	for _, c := range registry {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Lookup finds a check by ID or by its code written as a number.
func Lookup(idOrCode string) (*Check, bool) {
	if c, ok := registry[idOrCode]; ok {
		return c, true
	}
	var code int
	if _, err := fmt.Sscanf(idOrCode, "%d", &code); err == nil && fmt.Sprint(code) == idOrCode {
		c, ok := byCode[code]
		return c, ok
	}
	return nil, false
}

// IDs lists the catalog's IDs in order, for usage messages.
func IDs() []string {
	var ids []string
	for _, c := range Catalog() {
		ids = append(ids, c.ID)
	}
	return ids
}

// expectedTC is the RoCE traffic class applications are expected to use:
// --roce-tc, -1 when none is given, and where it comes from.
func (e *Env) expectedTC() (int, string) {
	if e.Opts.RoCETC >= 0 && e.Opts.RoCETCSet {
		return e.Opts.RoCETC, fmt.Sprintf("--roce-tc %d", e.Opts.RoCETC)
	}
	if v := e.Expect.ExpectedRoCETC(); v != nil {
		return v.V, v.Cite()
	}
	return -1, ""
}

// expectLossless tells whether a RoCE netdev that is not lossless fails,
// and why.
func (e *Env) expectLossless() (bool, string) {
	if e.Opts.ExpectLossless {
		return true, "--expect-lossless"
	}
	if v := e.Expect.ExpectedLossless(); v != nil {
		return v.V, v.Cite()
	}
	return false, ""
}
