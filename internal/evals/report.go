package evals

import (
	"bytes"
	"fmt"
	"html/template"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Markdown is a run's report: totals per version, then every failed
// check with what was wrong, then each case on each version.
func Markdown(r agent.EvalRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Evaluation %s\n\nDataset `%s`, agent `%s`, %s.\n\n", r.EvalID, r.Dataset, r.AgentID, r.Status)
	b.WriteString("| version | score | passed | tokens | cost | latency p50 | latency max |\n|---|---|---|---|---|---|---|\n")
	for _, t := range r.Totals {
		fmt.Fprintf(&b, "| v%d | %.0f%% | %d/%d | %d | $%.4f | %d ms | %d ms |\n",
			t.Version, 100*t.Score(), t.Passed, t.Cases, t.Tokens, t.CostUSD, t.LatencyP50MS, t.LatencyMaxMS)
	}
	if changed := changes(r); len(changed) > 0 {
		b.WriteString("\n## Changed between the versions\n\n")
		for _, c := range changed {
			fmt.Fprintf(&b, "- `%s`: %s\n", c.caseID, c.what)
		}
	}
	writeReplay(&b, r)
	failed := failures(r)
	if len(failed) > 0 {
		b.WriteString("\n## Failures\n")
		for _, c := range failed {
			fmt.Fprintf(&b, "\n### `%s` on v%d (%s)\n\n", c.CaseID, c.Version, c.Status)
			for _, ch := range c.Checks {
				if !ch.Passed {
					fmt.Fprintf(&b, "- ✗ %s: %s\n", ch.Name, oneLine(ch.Detail))
				}
			}
			if c.Output != "" {
				fmt.Fprintf(&b, "- answer: %s\n", oneLine(words.Clip(c.Output, 300)))
			}
			fmt.Fprintf(&b, "- turn: `%s`\n", c.JobID)
		}
	}
	b.WriteString("\n## Cases\n\n| case |")
	for _, v := range r.Versions {
		fmt.Fprintf(&b, " v%d |", v)
	}
	b.WriteString("\n|---|")
	for range r.Versions {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, id := range caseIDs(r) {
		fmt.Fprintf(&b, "| `%s` |", id)
		for _, v := range r.Versions {
			c, ok := find(r, id, v)
			switch {
			case !ok:
				b.WriteString(" not run |")
			case c.Passed:
				fmt.Fprintf(&b, " pass, %d ms, %d tokens |", c.LatencyMS, c.Tokens)
			default:
				fmt.Fprintf(&b, " **FAIL**: %s |", strings.Join(failedNames(c), ", "))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// oneLine keeps a detail on its list item's line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func failures(r agent.EvalRun) []agent.EvalCaseResult {
	var out []agent.EvalCaseResult
	for _, c := range r.Cases {
		if !c.Passed {
			out = append(out, c)
		}
	}
	return out
}

func failedNames(c agent.EvalCaseResult) []string {
	var names []string
	for _, ch := range c.Checks {
		if !ch.Passed {
			names = append(names, ch.Name)
		}
	}
	return names
}

// caseIDs are the run's cases in the order they were stored.
func caseIDs(r agent.EvalRun) []string {
	var ids []string
	for _, c := range r.Cases {
		if !slices.Contains(ids, c.CaseID) {
			ids = append(ids, c.CaseID)
		}
	}
	return ids
}

func find(r agent.EvalRun, caseID string, version int) (agent.EvalCaseResult, bool) {
	for _, c := range r.Cases {
		if c.CaseID == caseID && c.Version == version {
			return c, true
		}
	}
	return agent.EvalCaseResult{}, false
}

type change struct{ caseID, what string }

// changes are the cases that pass on one version of a two-version run
// and fail on the other.
func changes(r agent.EvalRun) []change {
	if len(r.Versions) != 2 {
		return nil
	}
	a, b := r.Versions[0], r.Versions[1]
	var out []change
	for _, id := range caseIDs(r) {
		ca, okA := find(r, id, a)
		cb, okB := find(r, id, b)
		if !okA || !okB || ca.Passed == cb.Passed {
			continue
		}
		if ca.Passed {
			out = append(out, change{id, fmt.Sprintf("passes on v%d, fails on v%d (%s)", a, b, strings.Join(failedNames(cb), ", "))})
		} else {
			out = append(out, change{id, fmt.Sprintf("fails on v%d (%s), passes on v%d", a, strings.Join(failedNames(ca), ", "), b)})
		}
	}
	return out
}

// Compare is a report of two runs of the same dataset: each case's
// outcome in each (on each run's first version), and the totals.
func Compare(a, b agent.EvalRun) string {
	var out strings.Builder
	fmt.Fprintf(&out, "# %s against %s\n\n", a.EvalID, b.EvalID)
	if a.Dataset != b.Dataset {
		fmt.Fprintf(&out, "The runs are of different datasets (`%s`, `%s`): only the cases they share are compared.\n\n", a.Dataset, b.Dataset)
	}
	va, vb := firstVersion(a), firstVersion(b)
	ta, tb := agent.TotalsOf([]int{va}, a.Cases)[0], agent.TotalsOf([]int{vb}, b.Cases)[0]
	out.WriteString("| run | agent | score | passed | tokens | cost | latency p50 |\n|---|---|---|---|---|---|---|\n")
	for _, row := range []struct {
		r agent.EvalRun
		v int
		t agent.EvalTotals
	}{{a, va, ta}, {b, vb, tb}} {
		fmt.Fprintf(&out, "| %s | %s v%d | %.0f%% | %d/%d | %d | $%.4f | %d ms |\n", row.r.EvalID, row.r.AgentID, row.v,
			100*row.t.Score(), row.t.Passed, row.t.Cases, row.t.Tokens, row.t.CostUSD, row.t.LatencyP50MS)
	}
	out.WriteString("\n| case | " + a.EvalID + " | " + b.EvalID + " |\n|---|---|---|\n")
	for _, id := range caseIDs(a) {
		cb, ok := find(b, id, vb)
		if !ok {
			continue
		}
		ca, _ := find(a, id, va)
		mark := ""
		if ca.Passed != cb.Passed {
			mark = " ⟵ changed"
		}
		fmt.Fprintf(&out, "| `%s`%s | %s | %s |\n", id, mark, verdict(ca), verdict(cb))
	}
	return out.String()
}

func firstVersion(r agent.EvalRun) int {
	if len(r.Versions) == 0 {
		return 0
	}
	return r.Versions[0]
}

func verdict(c agent.EvalCaseResult) string {
	if c.Passed {
		return "pass"
	}
	return "FAIL: " + strings.Join(failedNames(c), ", ")
}

var htmlReport = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":        func(t agent.EvalTotals) string { return fmt.Sprintf("%.0f%%", 100*t.Score()) },
	"usd":        func(f float64) string { return fmt.Sprintf("$%.4f", f) },
	"replayDiff": func(s agent.ReplayScore) string { return replayDiff(s, "") },
	"share":      func(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) },
	"replayed":   replayedTotals,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Evaluation {{.EvalID}}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}.fail{color:#b00020;font-weight:600}.pass{color:#1b5e20}
pre{white-space:pre-wrap;background:#f6f6f6;padding:.5em}</style></head><body>
<h1>Evaluation {{.EvalID}}</h1>
<p>Dataset <code>{{.Dataset}}</code>, agent <code>{{.AgentID}}</code>, {{.Status}}.</p>
<table><tr><th>version</th><th>score</th><th>passed</th><th>tokens</th><th>cost</th><th>latency p50</th><th>latency max</th></tr>
{{range .Totals}}<tr><td>v{{.Version}}</td><td>{{pct .}}</td><td>{{.Passed}}/{{.Cases}}</td><td>{{.Tokens}}</td><td>{{usd .CostUSD}}</td><td>{{.LatencyP50MS}} ms</td><td>{{.LatencyMaxMS}} ms</td></tr>
{{end}}</table>
{{if replayed .Totals}}<h2>Replay against the recordings</h2>
<table><tr><th>version</th><th>replayed</th><th>answers agree</th><th>tool-call agreement</th><th>divergences</th><th>cost Δ</th><th>latency Δ (mean)</th><th>guardrail trips (recorded)</th></tr>
{{range $t := .Totals}}{{with $t.Replay}}<tr><td>v{{$t.Version}}</td><td>{{.Cases}}</td><td>{{.AnswersAgree}}/{{.Cases}}</td><td>{{share .ToolAgreement}}</td><td>{{.Divergences}}</td><td>{{usd .CostDeltaUSD}}</td><td>{{.LatencyDeltaMS}} ms</td><td>{{.GuardTrips}} ({{.RecordedGuardTrips}})</td></tr>
{{end}}{{end}}</table>
{{end}}<h2>Cases</h2>
<table><tr><th>case</th><th>version</th><th>result</th><th>checks</th><th>answer</th><th>tokens</th><th>latency</th></tr>
{{range .Cases}}<tr><td><code>{{.CaseID}}</code></td><td>v{{.Version}}</td>
<td>{{if .Passed}}<span class="pass">pass</span>{{else}}<span class="fail">FAIL</span>{{end}}</td>
<td>{{range .Checks}}<div class="{{if .Passed}}pass{{else}}fail{{end}}">{{if .Passed}}✓{{else}}✗{{end}} {{.Name}}{{if .Detail}}: {{.Detail}}{{end}}</div>{{end}}</td>
<td><pre>{{.Output}}</pre>{{with .Replay}}<div>recording <code>{{.RecordedJobID}}</code>: {{if .AnswerAgrees}}<span class="pass">same answer</span>{{else}}<span class="fail">other answer</span>{{end}},
{{.Matched}} calls agree, {{.Divergences}} divergent, cost {{usd .CostDeltaUSD}}, latency {{.LatencyDeltaMS}} ms</div>
{{with replayDiff .}}<pre class="diff">{{.}}</pre>{{end}}{{end}}</td><td>{{.Tokens}}</td><td>{{.LatencyMS}} ms</td></tr>
{{end}}</table></body></html>
`))

// HTML is a run's report as a page of its own.
func HTML(r agent.EvalRun) (string, error) {
	var b bytes.Buffer
	if err := htmlReport.Execute(&b, r); err != nil {
		return "", fmt.Errorf("render the report of %s: %w", r.EvalID, err)
	}
	return b.String(), nil
}

// writeReplay writes, for a run with recorded cases, each version's
// agreement with the recordings, and a diff of each replay that differs
// from its recording: answers and tool calls, "-" the recording's, "+"
// the replay's.
func writeReplay(b *strings.Builder, r agent.EvalRun) {
	if !replayedTotals(r.Totals) {
		return
	}
	b.WriteString("\n## Replay against the recordings\n\n")
	b.WriteString("| version | replayed | answers agree | tool-call agreement | divergences | cost Δ | latency Δ (mean) | guardrail trips (recorded) |\n|---|---|---|---|---|---|---|---|\n")
	for _, t := range r.Totals {
		if p := t.Replay; p != nil {
			fmt.Fprintf(b, "| v%d | %d | %d/%d | %.0f%% | %d | %+.4f $ | %+d ms | %d (%d) |\n",
				t.Version, p.Cases, p.AnswersAgree, p.Cases, 100*p.ToolAgreement, p.Divergences, p.CostDeltaUSD, p.LatencyDeltaMS,
				p.GuardTrips, p.RecordedGuardTrips)
		}
	}
	for _, c := range r.Cases {
		if c.Replay == nil || (c.Replay.AnswerAgrees && c.Replay.ToolAgreement() == 1) {
			continue
		}
		fmt.Fprintf(b, "\n### `%s` on v%d against recording `%s`\n\n```diff\n%s```\n", c.CaseID, c.Version, c.Replay.RecordedJobID,
			replayDiff(*c.Replay, c.Output))
	}
}

// replayedTotals reports whether any version replayed recorded cases.
func replayedTotals(totals []agent.EvalTotals) bool {
	return slices.ContainsFunc(totals, func(t agent.EvalTotals) bool { return t.Replay != nil })
}

// replayDiff is a diff of a replay against its recording: the answers
// (when output is given and differs) and the tool calls, matched calls
// unmarked.
func replayDiff(s agent.ReplayScore, output string) string {
	var b strings.Builder
	if output != "" && !s.AnswerAgrees {
		fmt.Fprintf(&b, "- answer: %s\n+ answer: %s\n", oneLine(words.Clip(s.RecordedAnswer, 300)), oneLine(words.Clip(output, 300)))
	}
	match := agent.MatchCalls(s.RecordedCalls, s.ReplayedCalls)
	used := make([]bool, len(s.RecordedCalls))
	for _, m := range match {
		if m >= 0 {
			used[m] = true
		}
	}
	for i, c := range s.RecordedCalls {
		if !used[i] {
			fmt.Fprintf(&b, "- call %s %s\n", c.Name, c.Arguments)
		}
	}
	for i, c := range s.ReplayedCalls {
		mark := " "
		if match[i] < 0 {
			mark = "+"
		}
		fmt.Fprintf(&b, "%s call %s %s\n", mark, c.Name, c.Arguments)
	}
	return b.String()
}
