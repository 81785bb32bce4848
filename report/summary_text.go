package report

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// WriteSummaryText renders the summary for a person: the header with the
// count of each verdict, the healthy, problem and unknown nodes each in a
// section of its own, the checks not passing with their nodes, the
// outliers, the InfiniBand identities the reports disagree on, the reports
// stale or from the future, and the files that could
// not be read. Node lists are folded into host ranges (node[01-64]).
// Everything taken from a report is printed on one line with its control
// characters escaped: a node's report must not forge lines of the summary.
func WriteSummaryText(w io.Writer, s *FleetSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rdmadoctor summarize: %d report(s) of %d host(s)", s.Reports, s.Hosts)
	if n := len(s.Unreadable); n > 0 {
		fmt.Fprintf(&b, ", %d file(s) unreadable", n)
	}
	fmt.Fprintf(&b, "\nas of %s: %d healthy, %d problem, %d unknown\n", s.Now.UTC().Format(time.RFC3339),
		s.Counts.Healthy, s.Counts.Problem, s.Counts.Unknown)
	for _, sec := range []struct {
		v     Verdict
		title string
	}{
		{Healthy, "HEALTHY"},
		{Problem, "PROBLEM (a check found a fault)"},
		{Unknown, "UNKNOWN (could not judge: a check could not look, or the run did not finish — not a fault found)"},
	} {
		writeVerdictSection(&b, s.Verdicts, sec.v, sec.title)
	}
	if len(s.Checks) > 0 {
		b.WriteString("\nCHECKS NOT PASSING\n")
		for _, c := range s.Checks {
			fmt.Fprintf(&b, "  %-5s %3d %-22s %5d  %s\n", Escape(string(c.Status)), c.Code, Escape(c.ID), len(c.Nodes), Escape(HostRanges(c.Nodes)))
		}
	}
	if len(s.Outliers) > 0 {
		b.WriteString("\nOUTLIERS (differ from the fleet's majority)\n")
		for _, o := range s.Outliers {
			writeOutlier(&b, o)
		}
	}
	if len(s.Fabric) > 0 {
		b.WriteString("\nINFINIBAND FABRIC (identities the reports disagree on)\n")
		for _, f := range s.Fabric {
			fmt.Fprintf(&b, "  %s\n", Escape(f.Message))
		}
	}
	writeTimes(&b, s)
	if len(s.Unreadable) > 0 {
		b.WriteString("\nUNREADABLE (not summarised)\n")
		for _, p := range s.Unreadable {
			fmt.Fprintf(&b, "  %s: %s\n", Escape(p.Path), Escape(p.Error))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeVerdictSection lists the groups of one verdict under its title;
// nothing when no node has it (the header counts it).
func writeVerdictSection(b *strings.Builder, groups []ExitGroup, v Verdict, title string) {
	first := true
	for _, g := range groups {
		if g.Verdict != v {
			continue
		}
		if first {
			b.WriteString("\n" + title + "\n")
			first = false
		}
		cause := g.RootCause
		switch {
		case v == Healthy:
			cause = "healthy"
		case cause == "" && g.ExitCode == ExitInternal:
			cause = "run did not finish"
		case cause == "":
			cause = "no root cause named"
		}
		fmt.Fprintf(b, "  exit %-3d %-22s %5d  %s\n", g.ExitCode, Escape(cause), len(g.Nodes), Escape(HostRanges(g.Nodes)))
	}
}

// writeTimes lists the stale reports and those from the future, both
// against the summary's own clock.
func writeTimes(b *strings.Builder, s *FleetSummary) {
	now := s.Now.UTC().Format(time.RFC3339)
	if len(s.Stale) > 0 {
		fmt.Fprintf(b, "\nSTALE (started more than %s before now, %s)\n", s.StaleAfter, now)
		for _, st := range s.Stale {
			fmt.Fprintf(b, "  %s  %s\n", st.Started.UTC().Format(time.RFC3339), Escape(st.Node))
		}
	}
	if len(s.Future) > 0 {
		fmt.Fprintf(b, "\nFROM THE FUTURE (started more than %s after now, %s: the node's clock is wrong; not taken as the newest)\n", s.FutureSkew, now)
		for _, st := range s.Future {
			fmt.Fprintf(b, "  %s  %s\n", st.Started.UTC().Format(time.RFC3339), Escape(st.Node))
		}
	}
}

func writeOutlier(b *strings.Builder, o Outlier) {
	name := Escape(strings.TrimSpace(o.Attribute + " " + o.Subject))
	if o.Majority != "" {
		fmt.Fprintf(b, "  %s: %s on %d node(s)\n", name, Escape(o.Majority), o.MajorityNodes)
	} else {
		fmt.Fprintf(b, "  %s: no majority\n", name)
	}
	for _, v := range o.Others {
		fmt.Fprintf(b, "    %s on %d: %s\n", Escape(v.Value), len(v.Nodes), Escape(HostRanges(v.Nodes)))
	}
}

// HostRanges folds host names that differ only in their last number into
// ranges, as Slurm writes them: node01 node02 node03 node07 → node[01-03,07].
// Names without a number, or with other text, are kept as they are.
func HostRanges(nodes []string) string {
	type key struct {
		prefix, suffix string
		width          int
	}
	groups := map[key][]int{}
	var order []key
	var plain []string
	for _, n := range nodes {
		p, num, s, ok := splitNumber(n)
		if !ok {
			plain = append(plain, n)
			continue
		}
		k := key{p, s, len(num)}
		if _, seen := groups[k]; !seen {
			order = append(order, k)
		}
		v, _ := strconv.Atoi(num)
		groups[k] = append(groups[k], v)
	}
	var parts []string
	for _, k := range order {
		nums := groups[k]
		sort.Ints(nums)
		nums = slices.Compact(nums)
		if len(nums) == 1 {
			parts = append(parts, fmt.Sprintf("%s%0*d%s", k.prefix, k.width, nums[0], k.suffix))
			continue
		}
		parts = append(parts, k.prefix+"["+numberRanges(nums, k.width)+"]"+k.suffix)
	}
	return strings.Join(append(parts, plain...), ", ")
}

// splitNumber cuts a host name around its last run of digits; names with
// characters that a range would make ambiguous are not split.
func splitNumber(n string) (prefix, num, suffix string, ok bool) {
	if strings.ContainsAny(n, "[], ()") {
		return "", "", "", false
	}
	end := strings.LastIndexFunc(n, func(r rune) bool { return r >= '0' && r <= '9' })
	if end < 0 {
		return "", "", "", false
	}
	start := end
	for start > 0 && n[start-1] >= '0' && n[start-1] <= '9' {
		start--
	}
	if end+1-start > 9 {
		return "", "", "", false // not a host number
	}
	return n[:start], n[start : end+1], n[end+1:], true
}

func numberRanges(nums []int, width int) string {
	var parts []string
	for i := 0; i < len(nums); {
		j := i
		for j+1 < len(nums) && nums[j+1] <= nums[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, fmt.Sprintf("%0*d", width, nums[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%0*d-%0*d", width, nums[i], width, nums[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
