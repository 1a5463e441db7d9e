package checker

import (
	"fmt"
	"strconv"
	"strings"
)

// Table renders reports as a Markdown table, one row per trial: the
// turns that ended and their rate over the workload's span, the writes, the events clients received, their
// resumes, the writes lost (ended ok, never received) and duplicated
// (applied more than once), the count of every other violation, and how
// long after the fault healed a probe turn succeeded. The violations
// follow the table, one line each, when there are any.
func Table(reports []Report) string {
	var b strings.Builder
	b.WriteString("| trial | turns | turns/s | writes | events | resumes | lost | duplicated | other violations | recovery |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range reports {
		lost, dup := r.Count(LostWrite), r.Count(DuplicateWrite)
		fmt.Fprintf(&b, "| %s | %s | %.1f | %s | %s | %s | %s | %s | %s | %s |\n",
			cell(r.Trial), thousands(r.Stats.Ended), r.Stats.Rate, thousands(r.Stats.Writes), thousands(r.Stats.Events),
			thousands(r.Stats.Resumes), thousands(lost), thousands(dup), thousands(len(r.Violations)-lost-dup),
			recovery(r.Stats))
	}
	first := true
	for _, r := range reports {
		for _, v := range r.Violations {
			if first {
				b.WriteString("\nViolations:\n\n")
				first = false
			}
			fmt.Fprintf(&b, "- %s: %s\n", cell(r.Trial), v)
		}
	}
	return b.String()
}

// recovery renders a trial's recovery: "4.2 s", "not recovered", or
// "no fault".
func recovery(s Stats) string {
	switch {
	case !s.Faulted:
		return "no fault"
	case !s.Recovered:
		return "not recovered"
	}
	return fmt.Sprintf("%.1f s", s.Recovery.Seconds())
}

// cell keeps a text on its line and within its cell.
func cell(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// thousands writes n with commas between groups of three digits: 9,812.
func thousands(n int) string {
	s := strconv.Itoa(n)
	sign := ""
	if n < 0 {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}
