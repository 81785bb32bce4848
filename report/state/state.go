// Package state is what rdmadoctor keeps between runs (--state FILE): each
// check's last result with when, at which level and under which
// expectations it ran; the error counters' history; the operator's
// acknowledgements; and what the Slurm adapter drained the node for. A run
// proves only what it ran: it updates the records of its own checks, and the
// others keep theirs and age (Verdict, with a maximum age).
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/rdmadoctor/rdmadoctor/report"
)

// Schema names the state document. Earlier versions kept the last run's
// report (rdmadoctor.report/v1) as the state; Decode migrates such a file.
const Schema = "rdmadoctor.state/v2"

// Bounds on what a state may hold: a state is read by node agents with small
// memory limits, and one that grew without bound (or was planted) must not
// take them down. What is beyond a bound is dropped, oldest first.
const (
	MaxBytes   = 16 << 20
	MaxChecks  = 256
	MaxAcks    = 256
	MaxDrained = 64
)

// State is the document kept in --state FILE.
type State struct {
	Schema string `json:"schema"`
	Host   string `json:"host"`
	// BootID is /proc/sys/kernel/random/boot_id at the last run: a new one
	// means the counters started again from zero.
	BootID  string    `json:"boot_id,omitempty"`
	Updated time.Time `json:"updated"`
	// Last is the newest run's whole report, as --format json wrote it.
	Last *report.Report `json:"last_run"`
	// Checks holds each check's last result, in catalog (code) order.
	Checks []CheckRecord `json:"checks"`
	// Counters is the error counters' history (counters.errors).
	Counters []CounterSeries `json:"counters,omitempty"`
	// KernelLog is the kernel.log check's own history: where it stopped
	// reading the kernel's ring, and the devlink reporters' error counts.
	// It is apart from Counters because checks run at once and each
	// writes only its own part of the state.
	KernelLog *KernelLogState `json:"kernel_log,omitempty"`
	// Acks are the levels an operator accepted (`rdmadoctor ack`).
	Acks []Ack `json:"acks,omitempty"`
	// Policy is the last run's: which warnings count as problems. The
	// adapters judge the records under it, as the run did.
	Policy Policy `json:"policy"`
	// UnknownRuns counts the consecutive runs whose verdict was unknown.
	UnknownRuns int `json:"unknown_runs"`
	// Drain is what the node was drained for, while it is.
	Drain *Drain `json:"drain,omitempty"`
	// Migrated names the schema this state was migrated from, once.
	Migrated string `json:"migrated_from,omitempty"`
}

// CheckRecord is one check's last result.
type CheckRecord struct {
	ID      string        `json:"id"`
	Code    int           `json:"code"`
	Title   string        `json:"title"`
	Level   int           `json:"level"`
	Status  report.Status `json:"status"`
	Summary string        `json:"summary"`
	Remedy  string        `json:"remedy,omitempty"`
	// Findings are the IDs of the result's findings (absent in a record
	// an earlier version wrote): the resume proof keys on them. Lead is
	// the one the summary speaks of (CheckResult.FindingID).
	Findings []string `json:"findings,omitempty"`
	Lead     string   `json:"lead,omitempty"`
	// Deviation: a fail that is only a deviation from the expectations.
	Deviation bool `json:"deviation,omitempty"`
	// Ran is when the run that judged it started; RunLevel that run's
	// --level; Expect the expectations it was judged against.
	Ran      time.Time          `json:"ran"`
	RunLevel int                `json:"run_level"`
	Expect   *report.ExpectInfo `json:"expect,omitempty"`
	// Since is when the check's status last changed to the present one.
	Since time.Time `json:"since"`
}

// KernelLogState is what the kernel.log check keeps between runs.
type KernelLogState struct {
	// Mark is where the last live reading of the ring stopped; nil until
	// one read it with sequence numbers.
	Mark *KernelLogMark `json:"mark,omitempty"`
	// Devlink holds the devlink health reporters' error counts, one series
	// per reporter, keyed "kernel.log/devlink/<bus>/<device>[/<port>]/<reporter>/error_count".
	Devlink []CounterSeries `json:"devlink,omitempty"`
}

// KernelLogMark is a position in the kernel's ring: the sequence number
// the next reading starts from, valid only in the boot it was read in.
type KernelLogMark struct {
	BootID string `json:"boot_id"`
	Seq    uint64 `json:"seq"`
}

// Policy is report.Policy as kept: --fail-on warn, and the checks whose
// warnings count (the expectations class's fail_on_warn).
type Policy struct {
	FailOnWarn       bool     `json:"fail_on_warn"`
	FailOnWarnChecks []string `json:"fail_on_warn_checks,omitempty"`
}

// Report is the policy as report.Judge takes it.
func (p Policy) Report() report.Policy {
	rp := report.Policy{FailOnWarn: p.FailOnWarn}
	if len(p.FailOnWarnChecks) > 0 {
		rp.FailOnWarnChecks = map[string]bool{}
		for _, id := range p.FailOnWarnChecks {
			rp.FailOnWarnChecks[id] = true
		}
	}
	return rp
}

// Drain is the checks a node was drained for and when: it is resumed only
// when every one of them has passed since.
type Drain struct {
	At     time.Time `json:"at"`
	Checks []string  `json:"checks"`
	Reason string    `json:"reason"`
}

// Ack is an operator's acceptance of a check's present level on a unit
// (`rdmadoctor ack CHECK --unit U --reason TEXT`).
type Ack struct {
	Check  string    `json:"check"`
	Unit   string    `json:"unit,omitempty"` // "" = every unit of the check
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
	// Values holds the counter values accepted, by counter key, for
	// checks that judge counters.
	Values map[string]uint64 `json:"values,omitempty"`
}

// New is an empty state for host.
func New(host string) *State { return &State{Schema: Schema, Host: host} }

// Decode reads a state document. A report/v1 document (what earlier
// versions kept) is migrated: its checks become the records, as of its
// start. Any other schema is refused with the reason — never silently reset,
// since the state holds what a drain is waiting for.
func Decode(data []byte) (*State, error) {
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("state larger than %d MiB", MaxBytes>>20)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("state is empty")
	}
	var head struct {
		Schema *string `json:"schema"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("state is not JSON (%v)", jsonErrText(err))
	}
	switch {
	case head.Schema == nil:
		return nil, fmt.Errorf("state has no \"schema\" (want %q)", Schema)
	case *head.Schema == report.Schema:
		rep, err := report.DecodeReport(data)
		if err != nil {
			return nil, fmt.Errorf("state (an %s report): %w", report.Schema, err)
		}
		if rep.Started.IsZero() {
			return nil, fmt.Errorf("state (an %s report) has no start time", report.Schema)
		}
		return migrateReport(rep), nil
	case *head.Schema != Schema:
		return nil, fmt.Errorf("state schema %q is not one this version reads (want %q, or an %s report); move the file aside to start a new history",
			*head.Schema, Schema, report.Schema)
	}
	var s State
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("state is corrupt (%v)", jsonErrText(err))
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	s.bound()
	return &s, nil
}

// validate refuses values no rdmadoctor writes.
func (s *State) validate() error {
	for i, c := range s.Checks {
		if c.ID == "" {
			return fmt.Errorf("state is corrupt: check record %d has no id", i)
		}
		switch c.Status {
		case report.Pass, report.Warn, report.Fail, report.Skip, report.Error:
		default:
			return fmt.Errorf("state is corrupt: check %s has status %q", c.ID, c.Status)
		}
	}
	if s.UnknownRuns < 0 {
		return fmt.Errorf("state is corrupt: unknown_runs %d", s.UnknownRuns)
	}
	return nil
}

// bound drops what is beyond the bounds, oldest first.
func (s *State) bound() {
	if len(s.Checks) > MaxChecks {
		sort.SliceStable(s.Checks, func(i, j int) bool { return s.Checks[i].Ran.After(s.Checks[j].Ran) })
		s.Checks = s.Checks[:MaxChecks]
		s.sortChecks()
	}
	if len(s.Acks) > MaxAcks {
		sort.SliceStable(s.Acks, func(i, j int) bool { return s.Acks[i].At.Before(s.Acks[j].At) })
		s.Acks = s.Acks[len(s.Acks)-MaxAcks:]
	}
	if s.Drain != nil && len(s.Drain.Checks) > MaxDrained {
		s.Drain.Checks = s.Drain.Checks[:MaxDrained]
	}
	s.Counters = boundCounters(s.Counters)
	if s.KernelLog != nil {
		s.KernelLog.Devlink = boundCounters(s.KernelLog.Devlink)
	}
}

func (s *State) sortChecks() {
	sort.SliceStable(s.Checks, func(i, j int) bool {
		if s.Checks[i].Code != s.Checks[j].Code {
			return s.Checks[i].Code < s.Checks[j].Code
		}
		return s.Checks[i].ID < s.Checks[j].ID
	})
}

// migrateReport makes a state of a report/v1 document: every check that ran
// in it (not one skipped for its level) is a record as of the report's start.
func migrateReport(rep *report.Report) *State {
	s := New(rep.Host.Hostname)
	s.Migrated = report.Schema
	s.Merge(rep, func(string) bool { return true })
	return s
}

// Encode writes the state as indented JSON.
func (s *State) Encode() ([]byte, error) {
	s.Schema = Schema
	s.bound()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// jsonErrText keeps a decoder's message short: the offset says where.
func jsonErrText(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Error() == "unexpected end of JSON input" {
		return "truncated"
	}
	if errors.As(err, &se) {
		return fmt.Sprintf("%v at byte %d", se, se.Offset)
	}
	if err.Error() == "unexpected EOF" {
		return "truncated"
	}
	return err.Error()
}
