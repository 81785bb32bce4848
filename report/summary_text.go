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

// WriteSummaryText renders the summary for a person: the header, nodes by
// verdict, the checks not passing with their nodes, the outliers, and the
// files that could not be read. Node lists are folded into host ranges
// (node[01-64]).
func WriteSummaryText(w io.Writer, s *FleetSummary) error {
	var b strings.Builder
	fmt.Fprintf(&b, "rdmadoctor summarize: %d report(s) of %d host(s)", s.Reports, s.Hosts)
	if n := len(s.Unreadable); n > 0 {
		fmt.Fprintf(&b, ", %d file(s) unreadable", n)
	}
	b.WriteString("\n\nVERDICT\n")
	for _, v := range s.Verdicts {
		cause := "healthy"
		if v.ExitCode != ExitOK {
			cause = nonEmpty(v.RootCause, "internal error or partial run")
		}
		fmt.Fprintf(&b, "  exit %-3d %-22s %5d  %s\n", v.ExitCode, cause, len(v.Nodes), HostRanges(v.Nodes))
	}
	if len(s.Checks) > 0 {
		b.WriteString("\nCHECKS NOT PASSING\n")
		for _, c := range s.Checks {
			fmt.Fprintf(&b, "  %-5s %3d %-22s %5d  %s\n", c.Status, c.Code, c.ID, len(c.Nodes), HostRanges(c.Nodes))
		}
	}
	if len(s.Outliers) > 0 {
		b.WriteString("\nOUTLIERS (differ from the fleet's majority)\n")
		for _, o := range s.Outliers {
			writeOutlier(&b, o)
		}
	}
	if len(s.Stale) > 0 {
		fmt.Fprintf(&b, "\nSTALE (started more than %s before the newest report, %s)\n", s.StaleAfter, s.Newest.UTC().Format(time.RFC3339))
		for _, st := range s.Stale {
			fmt.Fprintf(&b, "  %s  %s\n", st.Started.UTC().Format(time.RFC3339), st.Node)
		}
	}
	if len(s.Unreadable) > 0 {
		b.WriteString("\nUNREADABLE (not summarised)\n")
		for _, p := range s.Unreadable {
			fmt.Fprintf(&b, "  %s: %s\n", p.Path, p.Error)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func writeOutlier(b *strings.Builder, o Outlier) {
	name := strings.TrimSpace(o.Attribute + " " + o.Subject)
	if o.Majority != "" {
		fmt.Fprintf(b, "  %s: %s on %d node(s)\n", name, o.Majority, o.MajorityNodes)
	} else {
		fmt.Fprintf(b, "  %s: no majority\n", name)
	}
	for _, v := range o.Others {
		fmt.Fprintf(b, "    %s on %d: %s\n", v.Value, len(v.Nodes), HostRanges(v.Nodes))
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
