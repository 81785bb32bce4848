package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SummarySchema names the JSON document of `rdmadoctor summarize --format json`.
const SummarySchema = "rdmadoctor.summary/v1"

// DecodeReport reads one rdmadoctor.report/v1 document (a report written with
// --format json, or a state file). Anything else is an error that says what
// it is: not JSON, JSON of another schema, or a report with impossible values.
func DecodeReport(data []byte) (*Report, error) {
	return decodeReport(data, func(string) bool { return true })
}

// DecodeReportForSummary is DecodeReport keeping only the evidence that
// Summarize reads (counters.errors'): a fleet of reports decodes in a
// fraction of the time.
func DecodeReportForSummary(data []byte) (*Report, error) {
	return decodeReport(data, func(id string) bool { return id == countersCheck })
}

const countersCheck = "counters.errors"

// lazyReport is a Report whose checks' evidence is left undecoded.
type lazyReport struct {
	Report
	Checks []lazyCheck `json:"checks"`
}

type lazyCheck struct {
	CheckResult
	Evidence json.RawMessage `json:"evidence"`
}

func decodeReport(data []byte, keepEvidence func(id string) bool) (*Report, error) {
	var lr lazyReport
	if err := json.Unmarshal(data, &lr); err != nil {
		if s, ok := schemaOf(data); ok && s != Schema {
			return nil, foreignSchema(s)
		}
		return nil, fmt.Errorf("corrupt JSON report: %w", err)
	}
	r := lr.Report
	if r.Schema != Schema {
		return nil, foreignSchema(r.Schema)
	}
	switch r.Verdict {
	case "", Healthy, Problem, Unknown: // "": written before the verdict existed
	default:
		return nil, fmt.Errorf("corrupt report: verdict %q is not healthy, problem or unknown", r.Verdict)
	}
	if r.ExitCode < 0 || r.ExitCode > 125 {
		return nil, fmt.Errorf("corrupt report: exit_code %d is outside 0-125", r.ExitCode)
	}
	r.Checks = make([]CheckResult, len(lr.Checks))
	for i, c := range lr.Checks {
		if c.ID == "" {
			return nil, fmt.Errorf("corrupt report: check %d has no id", i)
		}
		r.Checks[i] = c.CheckResult
		if len(c.Evidence) > 0 && keepEvidence(c.ID) {
			if err := json.Unmarshal(c.Evidence, &r.Checks[i].Evidence); err != nil {
				return nil, fmt.Errorf("corrupt report: evidence of %s: %w", c.ID, err)
			}
		}
	}
	return &r, nil
}

// schemaOf reads just the top-level "schema" string of a JSON object.
func schemaOf(data []byte) (string, bool) {
	var head struct {
		Schema *string `json:"schema"`
	}
	if json.Unmarshal(data, &head) != nil || head.Schema == nil {
		return "", false
	}
	return *head.Schema, true
}

func foreignSchema(s string) error {
	if s == "" {
		return fmt.Errorf("not an rdmadoctor report: no \"schema\" (want %q)", Schema)
	}
	return fmt.Errorf("foreign schema %q, want %q", s, Schema)
}

// FleetReport is one node's report as summarize read it.
type FleetReport struct {
	Path   string
	Report *Report
	// Kept, for a state file, is the state's merged verdict as of the
	// summary's now: the node's verdict and checks are these, not its last
	// run's alone (a partial run proves only what it ran). Report is then
	// the state's last run, read for the host, its time and the outliers.
	Kept *KeptVerdict
}

// KeptVerdict is a kept state's verdict over its per-check records.
type KeptVerdict struct {
	Verdict   Verdict
	RootCause string // "" when healthy
	ExitCode  int
	Checks    []CheckResult
}

// FileProblem is a file summarize could not use, and why.
type FileProblem struct {
	Path  string `json:"path"`
	Error string `json:"error"`
}

// FleetSummary is many nodes' reports folded into one view.
type FleetSummary struct {
	Schema     string        `json:"schema"`
	Reports    int           `json:"reports"`
	Hosts      int           `json:"hosts"`
	Unreadable []FileProblem `json:"unreadable"`
	// Counts is how many nodes have each verdict.
	Counts   VerdictCounts `json:"verdict_counts"`
	Verdicts []ExitGroup   `json:"verdicts"`
	Checks   []CheckNodes  `json:"checks"`
	Outliers []Outlier     `json:"outliers"`
	// Fabric are the InfiniBand identities the reports disagree on: a LID
	// or a port GUID on two hosts, hosts off the fleet's subnet prefix.
	Fabric []FabricFinding `json:"fabric"`
	// Now is the summary's own clock: the reference time of staleness. A
	// node's clock is never taken for it — one report dated years ahead
	// would make every other node look stale.
	Now time.Time `json:"now"`
	// Stale are the reports that started more than StaleAfter before Now:
	// their node has not been checked since.
	Stale      []StaleReport `json:"stale"`
	StaleAfter string        `json:"stale_after"` // a Go duration; "0s" when not judged
	// Future are the reports that started more than FutureSkew after Now:
	// their node's clock is wrong. They are neither stale nor the newest.
	Future     []StaleReport `json:"future"`
	FutureSkew string        `json:"future_skew"`
	// Newest is the newest start among the reports not from the future.
	Newest time.Time `json:"newest"`
}

// VerdictCounts counts the nodes by verdict.
type VerdictCounts struct {
	Healthy int `json:"healthy"`
	Problem int `json:"problem"`
	Unknown int `json:"unknown"`
}

// StaleReport is a node and when its report started: one too old beside
// the summary's clock, or one ahead of it.
type StaleReport struct {
	Node    string    `json:"node"`
	Started time.Time `json:"started"`
}

// DefaultFutureSkew is how far ahead of the summary's clock a report may
// start before it is called from the future: a fleet's clocks disagree a
// little.
const DefaultFutureSkew = 5 * time.Minute

// SummaryOptions tune Summarize.
type SummaryOptions struct {
	// Now is the summary's clock; zero means time.Now().
	Now time.Time
	// StaleAfter: a report that started this long before Now is listed as
	// stale; 0 lists none.
	StaleAfter time.Duration
	// FutureSkew: a report that started more than this after Now is listed
	// as from the future (0 tolerates none; DefaultFutureSkew is the CLI's).
	FutureSkew time.Duration
}

// ExitGroup is the nodes that have one verdict, exit code and root cause.
type ExitGroup struct {
	Verdict   Verdict  `json:"verdict"`
	ExitCode  int      `json:"exit_code"`
	RootCause string   `json:"root_cause"` // "" when healthy or when a run did not finish
	Nodes     []string `json:"nodes"`
}

// CheckNodes is the nodes on which one check has one non-passing status.
type CheckNodes struct {
	ID     string   `json:"id"`
	Code   int      `json:"code"`
	Status Status   `json:"status"`
	Nodes  []string `json:"nodes"`
}

// Outlier is an attribute of the same kind of part (a NIC model, a port, a
// counter) whose value differs between nodes: the majority's value, and
// each other value with its nodes. Majority is "" when no value has more
// than half the nodes; then every value is in Others.
type Outlier struct {
	Attribute     string       `json:"attribute"`
	Subject       string       `json:"subject"`
	Majority      string       `json:"majority"`
	MajorityNodes int          `json:"majority_nodes"`
	Others        []ValueNodes `json:"others"`
}

// ValueNodes is one value of an attribute and the nodes that have it.
type ValueNodes struct {
	Value string   `json:"value"`
	Nodes []string `json:"nodes"`
}

// Summarize folds the reports into verdicts, non-passing checks and the
// outliers from the fleet's majority; problems are the files that could not
// be read, listed as they are.
func Summarize(reports []FleetReport, problems []FileProblem, opts SummaryOptions) *FleetSummary {
	if opts.Now.IsZero() {
		opts.Now = time.Now()
	}
	s := &FleetSummary{Schema: SummarySchema, Reports: len(reports), Unreadable: problems,
		Verdicts: []ExitGroup{}, Checks: []CheckNodes{}, Outliers: []Outlier{}, Stale: []StaleReport{},
		Future: []StaleReport{}, Now: opts.Now.UTC(), StaleAfter: opts.StaleAfter.String(), FutureSkew: opts.FutureSkew.String()}
	if s.Unreadable == nil {
		s.Unreadable = []FileProblem{}
	}
	names := nodeNames(reports)
	hosts := map[string]bool{}
	obs := observations{}
	fabric := &fabricIdentities{}
	for i, fr := range reports {
		hosts[fr.Report.Host.Hostname] = true
		s.addVerdict(fr, names[i])
		s.addChecks(fr, names[i])
		obs.collect(fr.Report, names[i])
		fabric.collect(fr.Report, names[i])
	}
	s.Hosts = len(hosts)
	sortSummary(s)
	s.Outliers = obs.outliers()
	s.Fabric = fabric.findings()
	s.findStale(reports, names, opts)
	return s
}

// findStale sorts the reports by start against the summary's clock: from
// the future (beyond the skew, left out of Newest), stale (older than
// StaleAfter), each list oldest first.
func (s *FleetSummary) findStale(reports []FleetReport, names []string, opts SummaryOptions) {
	for i, fr := range reports {
		started := fr.Report.Started
		switch {
		case started.Sub(opts.Now) > opts.FutureSkew:
			s.Future = append(s.Future, StaleReport{Node: names[i], Started: started})
		case opts.StaleAfter > 0 && opts.Now.Sub(started) > opts.StaleAfter:
			s.Stale = append(s.Stale, StaleReport{Node: names[i], Started: started})
			fallthrough
		default:
			if started.After(s.Newest) {
				s.Newest = started
			}
		}
	}
	for _, l := range [][]StaleReport{s.Stale, s.Future} {
		sort.SliceStable(l, func(i, j int) bool { return l[i].Started.Before(l[j].Started) })
	}
}

// nodeNames names each report by its host name; a name that several files
// carry (or none) gets the file name beside it, so that no two collapse.
func nodeNames(reports []FleetReport) []string {
	count := map[string]int{}
	for _, fr := range reports {
		count[fr.Report.Host.Hostname]++
	}
	names := make([]string, len(reports))
	for i, fr := range reports {
		h := fr.Report.Host.Hostname
		switch {
		case h == "":
			names[i] = filepath.Base(fr.Path)
		case count[h] > 1:
			names[i] = fmt.Sprintf("%s (%s)", h, filepath.Base(fr.Path))
		default:
			names[i] = h
		}
	}
	return names
}

// NodeVerdict is a node's verdict, root cause and exit code: a kept
// state's merged verdict; else the report's own. A run that did not finish
// (exit 1) is unknown whatever it recorded. A report written before the
// verdict existed is judged from its checks; a warning it counted
// (--fail-on warn) shows only in its exit code.
func NodeVerdict(fr FleetReport) (v Verdict, rootCause string, exitCode int) {
	if k := fr.Kept; k != nil {
		return k.Verdict, k.RootCause, k.ExitCode
	}
	r := fr.Report
	if r.RootCause != nil {
		rootCause = *r.RootCause
	}
	switch {
	case r.ExitCode == ExitInternal:
		return Unknown, rootCause, r.ExitCode
	case r.Verdict != "":
		return r.Verdict, rootCause, r.ExitCode
	}
	v, _ = Judge(r.Checks, Policy{})
	if v == Healthy && r.ExitCode >= 10 {
		v = Problem
	}
	return v, rootCause, r.ExitCode
}

func (s *FleetSummary) addVerdict(fr FleetReport, node string) {
	verdict, cause, exit := NodeVerdict(fr)
	switch verdict {
	case Healthy:
		s.Counts.Healthy++
	case Problem:
		s.Counts.Problem++
	default:
		s.Counts.Unknown++
	}
	for i := range s.Verdicts {
		if v := &s.Verdicts[i]; v.Verdict == verdict && v.ExitCode == exit && v.RootCause == cause {
			v.Nodes = append(v.Nodes, node)
			return
		}
	}
	s.Verdicts = append(s.Verdicts, ExitGroup{Verdict: verdict, ExitCode: exit, RootCause: cause, Nodes: []string{node}})
}

func (s *FleetSummary) addChecks(fr FleetReport, node string) {
	checks := fr.Report.Checks
	if fr.Kept != nil {
		checks = fr.Kept.Checks
	}
	for _, c := range checks {
		if c.Status != Fail && c.Status != Error && c.Status != Warn {
			continue
		}
		found := false
		for i := range s.Checks {
			if e := &s.Checks[i]; e.ID == c.ID && e.Status == c.Status {
				e.Nodes, found = append(e.Nodes, node), true
				break
			}
		}
		if !found {
			s.Checks = append(s.Checks, CheckNodes{ID: c.ID, Code: c.Code, Status: c.Status, Nodes: []string{node}})
		}
	}
}

var statusRank = map[Status]int{Fail: 0, Error: 1, Warn: 2}

var verdictRank = map[Verdict]int{Healthy: 0, Problem: 1, Unknown: 2}

func sortSummary(s *FleetSummary) {
	sort.Slice(s.Verdicts, func(i, j int) bool {
		a, b := s.Verdicts[i], s.Verdicts[j]
		if a.Verdict != b.Verdict {
			return verdictRank[a.Verdict] < verdictRank[b.Verdict]
		}
		if a.ExitCode != b.ExitCode {
			return a.ExitCode < b.ExitCode
		}
		return a.RootCause < b.RootCause
	})
	sort.Slice(s.Checks, func(i, j int) bool {
		a, b := s.Checks[i], s.Checks[j]
		if a.Code != b.Code {
			return a.Code < b.Code
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return statusRank[a.Status] < statusRank[b.Status]
	})
	for i := range s.Verdicts {
		SortNodes(s.Verdicts[i].Nodes)
	}
	for i := range s.Checks {
		SortNodes(s.Checks[i].Nodes)
	}
}

// SortNodes sorts host names with their numbers in numeric order
// (node2 before node10).
func SortNodes(nodes []string) {
	sort.Slice(nodes, func(i, j int) bool {
		a, b := nodes[i], nodes[j]
		return naturalLess(a, b) || (!naturalLess(b, a) && a < b)
	})
}

func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// observations holds, per attribute and subject, each node's value.
type observations map[[2]string]map[string]string

// attribute order in the output
var attributes = []string{"rdmadoctor version", "kernel", "firmware", "PCIe link", "port rate", "MTU", "error counter"}

func (o observations) add(attr, subject, node, value string) {
	k := [2]string{attr, subject}
	if o[k] == nil {
		o[k] = map[string]string{}
	}
	if old, ok := o[k][node]; ok && old != value {
		// one node, two parts of one kind that differ: the sorted set
		parts := append(strings.Split(old, ", "), value)
		sort.Strings(parts)
		value = strings.Join(slices.Compact(parts), ", ")
	}
	o[k][node] = value
}

// collect records what one report shows of each compared attribute.
func (o observations) collect(r *Report, node string) {
	if r.Host.Kernel != "" {
		o.add("kernel", "", node, r.Host.Kernel)
	}
	if r.Version != "" {
		o.add("rdmadoctor version", "", node, r.Version)
	}
	products := map[string]string{}
	for _, f := range r.Inventory.PCIFunctions {
		products[f.Address] = f.Product
		if f.Link != nil && f.PhysFn == "" {
			o.add("PCIe link", nonEmpty(f.Product, f.DeviceID), node, fmt.Sprintf("%s x%d", f.Link.Speed, f.Link.Width))
		}
	}
	mtu := map[string]int{}
	for _, n := range r.Inventory.Netdevs {
		mtu[n.Name] = n.MTU
	}
	for _, d := range r.Inventory.RDMADevices {
		if d.Function == "VF" || d.Kind == "software" {
			continue // VFs follow their PF; software devices have no firmware or link of their own
		}
		model := nonEmpty(products[d.PCI], d.HCAType, d.Driver)
		if d.FWVer != "" {
			o.add("firmware", model, node, d.FWVer)
		}
		for _, p := range d.Ports {
			port := fmt.Sprintf("%s port %d", model, p.Port)
			if p.Rate != "" {
				o.add("port rate", port, node, p.Rate)
			}
			if m, ok := mtu[p.Netdev]; ok && m > 0 {
				o.add("MTU", port, node, strconv.Itoa(m))
			}
		}
	}
	o.collectCounters(r, node)
}

// collectCounters records each error counter's level (0, 1-9, 10-99, …)
// summed over the node's ports, from counters.errors' evidence.
func (o observations) collectCounters(r *Report, node string) {
	for _, c := range r.Checks {
		if c.ID != countersCheck || (c.Status != Pass && c.Status != Warn && c.Status != Fail) {
			continue
		}
		units, _ := c.Evidence["units"].(map[string]any)
		sums := map[string]float64{}
		for _, u := range units {
			um, _ := u.(map[string]any)
			nz, _ := um["nonzero_or_unknown"].(map[string]any)
			for name, v := range nz {
				if f, ok := v.(float64); ok && f > 0 {
					sums[name] += f
				}
			}
		}
		for name, v := range sums {
			o.add("error counter", name, node, counterLevel(v))
		}
		o.add("error counter", "", node, "") // marks the node as one whose counters were read
	}
}

// counterLevel is a counter's order of magnitude: "1-9", "10-99", …
func counterLevel(v float64) string {
	if v < 1 {
		return "0"
	}
	e := int(math.Floor(math.Log10(v)))
	lo := math.Pow10(e)
	return fmt.Sprintf("%.0f-%.0f", lo, lo*10-1)
}

func nonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return "unknown"
}

// outliers compares each attribute across the nodes that have it.
func (o observations) outliers() []Outlier {
	read := o[[2]string{"error counter", ""}] // nodes whose counters were read
	var out []Outlier
	for k, byNode := range o {
		if k[0] == "error counter" {
			if k[1] == "" {
				continue
			}
			for n := range read {
				if _, ok := byNode[n]; !ok {
					byNode[n] = "0"
				}
			}
		}
		if ol, ok := compare(k[0], k[1], byNode); ok {
			out = append(out, ol)
		}
	}
	rank := map[string]int{}
	for i, a := range attributes {
		rank[a] = i
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Attribute != out[j].Attribute {
			return rank[out[i].Attribute] < rank[out[j].Attribute]
		}
		return naturalLess(out[i].Subject, out[j].Subject)
	})
	if out == nil {
		out = []Outlier{}
	}
	return out
}

// compare finds the majority value among at least two nodes; ok is false
// when they all agree.
func compare(attr, subject string, byNode map[string]string) (Outlier, bool) {
	groups := map[string][]string{}
	for n, v := range byNode {
		groups[v] = append(groups[v], n)
	}
	if len(byNode) < 2 || len(groups) < 2 {
		return Outlier{}, false
	}
	vals := make([]ValueNodes, 0, len(groups))
	for v, nodes := range groups {
		SortNodes(nodes)
		vals = append(vals, ValueNodes{Value: v, Nodes: nodes})
	}
	sort.Slice(vals, func(i, j int) bool {
		if len(vals[i].Nodes) != len(vals[j].Nodes) {
			return len(vals[i].Nodes) > len(vals[j].Nodes)
		}
		return naturalLess(vals[i].Value, vals[j].Value)
	})
	ol := Outlier{Attribute: attr, Subject: subject, Others: vals}
	if 2*len(vals[0].Nodes) > len(byNode) {
		ol.Majority, ol.MajorityNodes, ol.Others = vals[0].Value, len(vals[0].Nodes), vals[1:]
	}
	return ol, true
}

// WriteSummaryJSON renders the summary as the rdmadoctor.summary/v1 document.
func WriteSummaryJSON(w interface{ Write([]byte) (int, error) }, s *FleetSummary) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}
