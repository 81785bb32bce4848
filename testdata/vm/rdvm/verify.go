package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Verdicts of a scenario. PENDING is never a pass: the check the scenario
// judges is not in `rdmadoctor list` yet, so nothing was proven.
const (
	verdictPass    = "PASS"
	verdictFail    = "FAIL"
	verdictPending = "PENDING"
)

// catalogEntry is one row of `rdmadoctor list`.
type catalogEntry struct {
	Code  int
	Level int
}

var listRowRe = regexp.MustCompile(`^\s*(\d+)\s+([a-z][a-z0-9_]*\.[a-z0-9_.]+)\s+(\d+)\b`)

// parseList reads `rdmadoctor list`: CODE ID LEVEL TITLE rows.
func parseList(text string) map[string]catalogEntry {
	cat := map[string]catalogEntry{}
	for _, line := range strings.Split(text, "\n") {
		m := listRowRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		code, _ := strconv.Atoi(m[1])
		level, _ := strconv.Atoi(m[3])
		cat[m[2]] = catalogEntry{Code: code, Level: level}
	}
	return cat
}

// meta is a scenario record's "key value" lines, in order; keys may repeat.
type meta [][2]string

func parseMeta(text string) meta {
	var m meta
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" {
			continue
		}
		k, v, _ := strings.Cut(line, " ")
		m = append(m, [2]string{k, strings.TrimSpace(v)})
	}
	return m
}

func (m meta) get(k string) (string, bool) {
	for _, kv := range m {
		if kv[0] == k {
			return kv[1], true
		}
	}
	return "", false
}

// exitOf is an exit status key's worst value: the first that is not "0"
// (a scenario run in rounds records one per round), else "0"; "" when the
// key is absent.
func (m meta) exitOf(k string) string {
	all := m.all(k)
	for _, v := range all {
		if v != "0" {
			return v
		}
	}
	if len(all) > 0 {
		return "0"
	}
	return ""
}

func (m meta) all(k string) []string {
	var out []string
	for _, kv := range m {
		if kv[0] == k {
			out = append(out, kv[1])
		}
	}
	return out
}

// jsonReport is the part of rdmadoctor's JSON report the suite judges.
type jsonReport struct {
	Level     int             `json:"level"`
	ExitCode  *int            `json:"exit_code"`
	RootCause *string         `json:"root_cause"`
	Inventory json.RawMessage `json:"inventory"`
	Checks    []jsonCheck     `json:"checks"`
}

type jsonCheck struct {
	ID       string                     `json:"id"`
	Code     int                        `json:"code"`
	Status   string                     `json:"status"`
	Summary  string                     `json:"summary"`
	Observed string                     `json:"observed"`
	Expected string                     `json:"expected"`
	Details  []string                   `json:"details"`
	Remedy   string                     `json:"remedy"`
	Evidence map[string]json.RawMessage `json:"evidence"`
}

func (r *jsonReport) check(id string) *jsonCheck {
	for i := range r.Checks {
		if r.Checks[i].ID == id {
			return &r.Checks[i]
		}
	}
	return nil
}

// outcome is one scenario's judgement.
type outcome struct {
	Name     string
	Verdict  string
	ExpExit  string
	ObsExit  string
	ExpRoot  string
	ObsRoot  string
	Seconds  string // the time column: scenarioSeconds
	Failures []string
	Pending  []string
	Passed   []string
	Extra    []string // printed under the row whatever the verdict (tables)
}

func (o *outcome) fail(format string, a ...any) {
	o.Failures = append(o.Failures, fmt.Sprintf(format, a...))
}
func (o *outcome) pending(format string, a ...any) {
	o.Pending = append(o.Pending, fmt.Sprintf(format, a...))
}
func (o *outcome) ok(format string, a ...any) { o.Passed = append(o.Passed, fmt.Sprintf(format, a...)) }

type verifier struct {
	dir      string
	catalog  map[string]catalogEntry
	timingMD string
	maxRatio float64
	strict   bool
	warnings []string // printed before the summary; failures only with --strict
	pairMD   string   // --pair-md: where the pair's comparison table goes
	pairEnv  string
	pairRows []pairRow
}

func cmdVerify(args []string) (int, error) {
	fs := flag.NewFlagSet("verify", flag.ContinueOnError)
	strict := fs.Bool("strict", false, "count PENDING scenarios as failures")
	only := fs.String("only", "", "comma-separated scenario names that were run (others are not expected)")
	scenarios := fs.String("scenarios", "", "scenarios.sh, to know which records to expect")
	timingMD := fs.String("timing-md", "", "write the timing table to this Markdown file")
	maxRatio := fs.Float64("max-ratio", 1.5, "timing: level 1 may take at most this many times ibv_devinfo -v")
	pairMD := fs.String("pair-md", "", "write the pair's comparison table into this Markdown file's pair section")
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() != 1 {
		return 2, fmt.Errorf("usage: rdvm verify [flags] RESULTS-DIR")
	}
	v := &verifier{dir: fs.Arg(0), timingMD: *timingMD, maxRatio: *maxRatio, strict: *strict, pairMD: *pairMD}
	problems := 0

	listOut, listErr := os.ReadFile(filepath.Join(v.dir, "list", "stdout"))
	v.catalog = parseList(string(listOut))
	switch {
	case listErr != nil:
		fmt.Println("vm: FAIL: no `rdmadoctor list` record came back")
		problems++
	case len(v.catalog) == 0:
		// Everything would be PENDING: a suite that proves nothing must not pass.
		fmt.Printf("vm: FAIL: `rdmadoctor list` names no check (exit %s: %s)\n", readTrim(filepath.Join(v.dir, "list", "exit")),
			firstLines(readTrim(filepath.Join(v.dir, "list", "stderr")), 3))
		problems++
	default:
		ids := make([]string, 0, len(v.catalog))
		for id := range v.catalog {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b string) int { return v.catalog[a].Code - v.catalog[b].Code })
		fmt.Printf("vm: rdmadoctor list: %d checks: %s\n", len(ids), strings.Join(ids, " "))
	}

	names := expectedScenarios(*scenarios, *only)
	got := recordNames(v.dir)
	for _, n := range got {
		if n != "list" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var outs []*outcome
	for _, n := range names {
		outs = append(outs, v.scenario(n))
	}
	if _, err := os.Stat(filepath.Join(v.dir, ".done")); err != nil {
		fmt.Println("vm: FAIL: the guest never reached its end (no @@RDVM-DONE@@ on the console): it hung, crashed or was killed")
		problems++
	}
	printTable(outs)
	if err := v.pairTable(); err != nil {
		fmt.Printf("vm: FAIL: writing the pair's table: %v\n", err)
		problems++
	}
	pass, fail, pend := 0, 0, 0
	var pendNames []string
	for _, o := range outs {
		switch o.Verdict {
		case verdictPass:
			pass++
		case verdictFail:
			fail++
		default:
			pend++
			pendNames = append(pendNames, o.Name)
		}
	}
	if pend > 0 {
		fmt.Printf("vm: %d PENDING (their checks are not in `rdmadoctor list` yet; nothing about them was proven): %s\n", pend, strings.Join(pendNames, ", "))
	}
	for _, w := range v.warnings {
		fmt.Printf("vm: WARNING: %s\n", w)
	}
	if problems > 0 {
		fmt.Printf("vm: %d problem(s) outside the scenarios (see above)\n", problems)
	}
	fmt.Printf("vm: %d passed, %d failed, %d skipped\n", pass, fail+problems, pend)
	if fail > 0 || problems > 0 || (*strict && pend > 0) {
		return 1, nil
	}
	return 0, nil
}

var scenarioLineRe = regexp.MustCompile(`(?m)^[ \t]*(?:pair_)?scenario\s+([A-Za-z0-9._-]+)`)

// expectedScenarios lists the scenario names of scenarios.sh (those of
// --only when given), so a record that never came back is a failure.
func expectedScenarios(file, only string) []string {
	var names []string
	if only != "" {
		for _, n := range strings.Split(only, ",") {
			if n = strings.TrimSpace(n); n != "" {
				names = append(names, n)
			}
		}
		return names
	}
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	for _, m := range scenarioLineRe.FindAllStringSubmatch(string(data), -1) {
		// A scenario run in rounds is named once per round's line.
		if !slices.Contains(names, m[1]) {
			names = append(names, m[1])
		}
	}
	return names
}

func recordNames(dir string) []string {
	data, err := os.ReadFile(filepath.Join(dir, "order"))
	if err != nil {
		return nil
	}
	var out []string
	for _, n := range strings.Fields(string(data)) {
		out = append(out, n)
	}
	return out
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' || r == ' ' }) {
		out = append(out, f)
	}
	return out
}

// scenarioSeconds is the time column: the scenario's wall time, or for a
// scenario run in rounds (one "seconds" a round) the median of its rounds.
func scenarioSeconds(m meta) string {
	all := m.all("seconds")
	switch len(all) {
	case 0:
		return ""
	case 1:
		return all[0] + " s"
	}
	var secs []float64
	for _, s := range all {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			secs = append(secs, f)
		}
	}
	return fmt.Sprintf("%.1f s (median of %d rounds)", median(secs), len(all))
}

// scenario judges one record: the record's own health, the report, the
// kind's own judgement, then what the scenario asserts.
func (v *verifier) scenario(name string) *outcome {
	o := &outcome{Name: name, ExpExit: "-", ObsExit: "-", ExpRoot: "-", ObsRoot: "-"}
	dir := filepath.Join(v.dir, name)
	metaText, err := os.ReadFile(filepath.Join(dir, "meta"))
	if err != nil {
		o.fail("no record came back from the guest")
		o.Verdict = verdictFail
		return o
	}
	m := parseMeta(string(metaText))
	o.Seconds = scenarioSeconds(m)
	recordHealth(o, dir, m)
	obs := o.ObsExit
	rep := v.readReport(o, dir, m, obs)
	active := v.activeScenario(o, m)

	kind, _ := m.get("kind")
	switch kind {
	case "killprobe":
		v.killProbe(o, dir, active)
	case "timing":
		v.timing(o, dir, active)
	case "snapshot":
		v.snapshotRoundTrip(o, dir, m, active)
	case "rerun":
		v.rerun(o, dir, m, active)
	case "ref":
		v.refTool(o, name, dir, m)
	}
	if firstOf(m, "compare") == "1" {
		v.ourFigures(o, name, dir, m)
	}
	v.pairServer(o, name, m, active)
	if active {
		v.maxSeconds(o, dir, m)
		assertExitAndRoot(o, m, rep, obs)
		if word, ok := m.get("mentions"); ok && rep != nil {
			assertMentions(o, rep, word)
		}
	} else {
		// The expectations are shown even when they were not judged.
		o.ExpExit = firstOrDash(m, "exit")
		o.ExpRoot = firstOrDash(m, "root")
	}
	v.assertStatuses(o, m, rep)
	if allowed, ok := m.get("kernel-quiet"); ok && active {
		kernelQuiet(o, dir, allowed)
	}
	if r, _ := m.get("refs"); r == "1" {
		assertRefs(o, dir, rep)
	}

	switch {
	case len(o.Failures) > 0:
		o.Verdict = verdictFail
	case len(o.Pending) > 0:
		o.Verdict = verdictPending
	default:
		o.Verdict = verdictPass
	}
	return o
}

// recordHealth judges what the guest says of the run itself: the
// scenario's definition, its break and repair, and an exit status that
// means rdmadoctor hung or is missing. It sets o.ObsExit.
func recordHealth(o *outcome, dir string, m meta) {
	if e, ok := m.get("meta_error"); ok {
		o.fail("scenario definition: %s", e)
	}
	if e := m.exitOf("break_exit"); e != "" && e != "0" {
		o.fail("its --break failed (status %s): %s", e, firstLines(readTrim(filepath.Join(dir, "break.log")), 3))
	}
	if e := m.exitOf("repair_exit"); e != "0" {
		o.fail("the healthy state could not be restored afterwards (status %q): later scenarios are suspect: %s",
			e, firstLines(readTrim(filepath.Join(dir, "repair.log")), 3))
	}
	obs := readTrim(filepath.Join(dir, "exit"))
	o.ObsExit = obs
	if obs == "143" {
		lim, _ := m.get("run_limit")
		o.fail("rdmadoctor was killed after the guest's limit of %s s (hung?)", lim)
	}
	if obs == "127" {
		o.fail("rdmadoctor is not in the guest: %s", readTrim(filepath.Join(dir, "stderr")))
	}
}

// readReport parses the run's JSON report when it asked for one, checks
// the report's invariants and adds the checks it carries to the catalog;
// nil when there is none.
func (v *verifier) readReport(o *outcome, dir string, m meta, obs string) *jsonReport {
	args, _ := m.get("args")
	if !strings.Contains(args, "--format json") {
		return nil
	}
	stdout, _ := os.ReadFile(filepath.Join(dir, "stdout"))
	rep := &jsonReport{}
	if err := json.Unmarshal(stdout, rep); err != nil {
		o.fail("stdout is not a JSON report: %v (stderr: %s)", err, firstLines(readTrim(filepath.Join(dir, "stderr")), 3))
		return nil
	}
	o.ObsRoot = "none"
	if rep.RootCause != nil {
		o.ObsRoot = *rep.RootCause
	}
	// A `peer test` report holds the two-host checks only (a pair's
	// record has "pair" in its meta; its args are peer test's).
	_, pair := m.get("pair")
	v.reportInvariants(o, rep, obs, !strings.Contains(args, "--check") && !strings.HasPrefix(args, "peer ") && !pair)
	// A check the report carries exists, whether or not `rdmadoctor
	// list` names it (the two-host checks of `peer test` are not in the
	// host pipeline's list).
	for _, c := range rep.Checks {
		if _, ok := v.catalog[c.ID]; !ok && c.ID != "" {
			v.catalog[c.ID] = catalogEntry{Code: c.Code, Level: 2}
		}
	}
	return rep
}

// activeScenario says whether the checks a scenario --needs are in the
// catalog; a scenario whose checks are not is pending, not judged.
func (v *verifier) activeScenario(o *outcome, m meta) bool {
	needs := splitList(firstOf(m, "needs"))
	active := len(needs) == 0
	for _, id := range needs {
		if _, ok := v.catalog[id]; ok {
			active = true
		}
	}
	if !active {
		o.pending("%s not in `rdmadoctor list`", strings.Join(needs, "/"))
	}
	return active
}

func firstOrDash(m meta, k string) string {
	if v, ok := m.get(k); ok {
		return v
	}
	return "-"
}

// assertExitAndRoot holds the run to --exit and --root.
func assertExitAndRoot(o *outcome, m meta, rep *jsonReport, obs string) {
	if exp, ok := m.get("exit"); ok {
		o.ExpExit = exp
		if slices.Contains(splitList(exp), obs) {
			o.ok("exit %s", obs)
		} else {
			o.fail("exit code: expected %s, observed %s%s", exp, obs, rootCauseHint(rep))
		}
	}
	if exp, ok := m.get("root"); ok {
		o.ExpRoot = exp
		switch {
		case rep == nil:
			o.fail("--root needs a JSON report")
		case slices.Contains(splitList(exp), o.ObsRoot):
			o.ok("root cause %s", o.ObsRoot)
		default:
			o.fail("root cause: expected %s, observed %s", exp, o.ObsRoot)
		}
	}
}

// assertMentions holds the root-cause check's text to --mentions.
func assertMentions(o *outcome, rep *jsonReport, word string) {
	c := (*jsonCheck)(nil)
	if rep.RootCause != nil {
		c = rep.check(*rep.RootCause)
	}
	switch {
	case c == nil:
		o.fail("--mentions %s: the report has no root-cause check", word)
	case strings.Contains(strings.ToLower(checkText(c)), strings.ToLower(word)):
		o.ok("%s names %s", c.ID, word)
	default:
		o.fail("%s does not name %s: %q", c.ID, word, c.Summary)
	}
}

// assertStatuses holds each check named by --status to its statuses; a
// check the catalog does not have is pending.
func (v *verifier) assertStatuses(o *outcome, m meta, rep *jsonReport) {
	for _, st := range m.all("status") {
		id, want, _ := strings.Cut(st, "=")
		if _, ok := v.catalog[id]; !ok {
			o.pending("%s not in `rdmadoctor list`", id)
			continue
		}
		if rep == nil {
			o.fail("--status %s needs a JSON report", st)
			continue
		}
		c := rep.check(id)
		switch {
		case c == nil:
			o.fail("%s is missing from the report", id)
		case slices.Contains(splitList(want), c.Status):
			o.ok("%s %s", id, c.Status)
		default:
			o.fail("%s: expected %s, observed %s: %s", id, want, c.Status, c.Summary)
		}
	}
}

// assertRefs holds the report's inventory to the reference tools' view
// (--refs 1), and `rdmadoctor inventory` to it.
func assertRefs(o *outcome, dir string, rep *jsonReport) {
	if rep == nil {
		o.fail("--refs 1 needs a JSON report")
	} else {
		cmp := compareInventory(rep.Inventory, dir)
		for _, f := range cmp.failures {
			o.fail("inventory: %s", f)
		}
		o.Extra = append(o.Extra, fmt.Sprintf("inventory vs ibv_devices, ibv_devinfo -v, rdma -j link/dev, ip -j addr: %d fields agree, %d differ", cmp.agree, len(cmp.failures)))
		if cmp.agree == 0 && len(cmp.failures) == 0 {
			o.fail("inventory: nothing was compared")
		}
	}
	inventoryCommand(o, dir)
}

// kernelQuiet: the run wrote no kernel log line but those matching the
// regular expression allowed (the guest records the lines in kmsg.during).
func kernelQuiet(o *outcome, dir, allowed string) {
	re, err := regexp.Compile(allowed)
	if err != nil {
		o.fail("--kernel-quiet %q: %v", allowed, err)
		return
	}
	data, err := os.ReadFile(filepath.Join(dir, "kmsg.during"))
	if err != nil {
		o.fail("--kernel-quiet: the guest recorded no kernel log for the run: %v", err)
		return
	}
	var other []string
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		switch {
		case line == "":
		case re.MatchString(line):
			n++
		default:
			other = append(other, line)
		}
	}
	if len(other) > 0 {
		o.fail("the run made the kernel log %d line(s) beyond %q: %s", len(other), allowed, firstLines(strings.Join(other, "\n"), 3))
		return
	}
	o.ok("no kernel log line but %d allowed (%q)", n, allowed)
}

func firstOf(m meta, k string) string {
	v, _ := m.get(k)
	return v
}

func rootCauseHint(rep *jsonReport) string {
	if rep == nil || rep.RootCause == nil {
		return ""
	}
	if c := rep.check(*rep.RootCause); c != nil {
		return fmt.Sprintf(" (root cause %s: %s)", c.ID, c.Summary)
	}
	return ""
}

func checkText(c *jsonCheck) string {
	return strings.Join(append([]string{c.Summary, c.Observed, c.Expected, c.Remedy}, c.Details...), "\n")
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, " | ")
}

// reportInvariants holds for every JSON report whatever the scenario: the
// exit_code field is the process's status, the root cause follows the rule,
// and (unless --check narrowed the run) every catalog check up to the run's
// level is present.
func (v *verifier) reportInvariants(o *outcome, rep *jsonReport, obs string, complete bool) {
	if rep.ExitCode == nil {
		o.fail("the report has no exit_code")
	} else if strconv.Itoa(*rep.ExitCode) != obs {
		o.fail("the report's exit_code %d is not the process's exit status %s", *rep.ExitCode, obs)
	}
	if rep.RootCause != nil && rep.check(*rep.RootCause) == nil {
		o.fail("root_cause %s names no check of the report", *rep.RootCause)
	}
	if rep.RootCause != nil && rep.ExitCode != nil {
		// A problem exits with its root cause's code; an unknown verdict
		// (the root cause could not look: error) exits 4.
		if c := rep.check(*rep.RootCause); c != nil && c.Code != *rep.ExitCode && !(c.Status == "error" && *rep.ExitCode == 4) {
			o.fail("exit_code %d is not root cause %s's code %d", *rep.ExitCode, c.ID, c.Code)
		}
	}
	for id, e := range v.catalog {
		if complete && e.Level <= rep.Level && rep.check(id) == nil {
			o.fail("check %s (level %d) is missing from the level-%d report", id, e.Level, rep.Level)
		}
	}
}

// killProbe judges a killprobe record: a child holding verbs objects was
// killed, the kernel freed everything it held, and the parent reported the
// loss instead of crashing or calling the host healthy.
func (v *verifier) killProbe(o *outcome, dir string, active bool) {
	data, err := os.ReadFile(filepath.Join(dir, "killprobe.json"))
	if err != nil {
		if active {
			o.fail("no killprobe.json: %s", firstLines(readTrim(filepath.Join(dir, "killprobe.log")), 4))
		}
		return
	}
	var k killReport
	if err := json.Unmarshal(data, &k); err != nil {
		o.fail("killprobe.json: %v", err)
		return
	}
	o.Extra = append(o.Extra, fmt.Sprintf("verbs objects before %v, at the kill %v, after %v (settled in %d ms); %s",
		countsText(k.Baseline), countsText(k.AtKill), countsText(k.AfterExit), k.SettleMS, k.Note))
	if !active {
		return
	}
	if !k.Killed || !k.HeldAtKill {
		o.fail("no probe child was caught holding verbs objects in %d run(s): %s", k.Attempts, k.Note)
		return
	}
	o.ok("killed pid %d (%s) holding %v", k.ChildPID, k.ChildArgs, countsText(k.AtKill))
	if k.Leaked {
		o.fail("verbs objects leaked: before %v, after %v", countsText(k.Baseline), countsText(k.AfterExit))
	} else {
		o.ok("no verbs objects leaked")
	}
	switch k.ParentExit {
	case 0:
		o.fail("rdmadoctor exited 0 although its probe child was killed: a probe that died has not shown the host healthy")
	case 1, 2:
		o.fail("rdmadoctor exited %d (internal/usage error) when its probe child was killed", k.ParentExit)
	}
}

func countsText(c map[string]int64) string {
	if c == nil {
		return "?"
	}
	var parts []string
	for _, k := range resourceKeys {
		if c[k] != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, c[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

func printTable(outs []*outcome) {
	w, we, wr := 8, len("exit exp/obs"), len("root cause expected / observed")
	for _, o := range outs {
		w = max(w, len(o.Name))
		we = max(we, len(o.ExpExit+" / "+o.ObsExit))
		wr = max(wr, len(o.ExpRoot+" / "+o.ObsRoot))
	}
	wr = min(wr, 64) // a long list of allowed root causes overflows its row only
	fmt.Printf("vm: %-*s  %-7s  %-*s  %-*s  %s\n", w, "scenario", "result", we, "exit exp/obs", wr, "root cause expected / observed", "time")
	for _, o := range outs {
		fmt.Printf("vm: %-*s  %-7s  %-*s  %-*s  %s\n", w, o.Name, o.Verdict,
			we, o.ExpExit+" / "+o.ObsExit, wr, o.ExpRoot+" / "+o.ObsRoot, o.Seconds)
		for _, f := range o.Failures {
			fmt.Printf("vm:     FAIL: %s\n", f)
		}
		if o.Verdict != verdictFail {
			for _, p := range o.Pending {
				fmt.Printf("vm:     PENDING: %s\n", p)
			}
		}
		if o.Verdict == verdictPending && len(o.Passed) > 0 {
			fmt.Printf("vm:     (already holds: %s)\n", strings.Join(o.Passed, "; "))
		}
		for _, e := range o.Extra {
			for _, line := range strings.Split(e, "\n") {
				fmt.Printf("vm:     %s\n", line)
			}
		}
	}
}
