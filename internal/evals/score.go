package evals

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/words"
)

// Score checks a turn's result against a case: its status, tool calls
// and answer, one check each, in that order. A judge's check is the
// caller's to add (it calls a model): JudgePrompt and ParseVerdict.
func Score(c agent.EvalCase, res agent.TurnResult) []agent.EvalCheck {
	want := cmp.Or(c.Expect.Status, agent.StatusCompleted)
	status := agent.EvalCheck{Name: "status", Passed: res.Status == want}
	if !status.Passed {
		status.Detail = fmt.Sprintf("the turn ended %s, want %s", res.Status, want)
		if e := res.Error; e != nil {
			status.Detail += fmt.Sprintf(" (%s: %s)", e.Type, words.Clip(e.Message, 200))
		}
	}
	checks := []agent.EvalCheck{status}
	calls := res.Metadata.ToolCalls
	if len(c.Expect.ToolCalls) > 0 {
		checks = append(checks, toolCalls(c.Expect.ToolCalls, calls))
	}
	if c.Expect.NoToolCalls {
		ch := agent.EvalCheck{Name: "no tool calls", Passed: len(calls) == 0}
		if !ch.Passed {
			ch.Detail = "the turn called " + describeCalls(calls)
		}
		checks = append(checks, ch)
	}
	if a := c.Expect.Answer; a != nil {
		checks = append(checks, answer(*a, res.Output)...)
	}
	return checks
}

// toolCalls checks that the expected calls were made in order, others
// allowed between them.
func toolCalls(want []agent.ExpectedCall, got []agent.ToolCallRecord) agent.EvalCheck {
	ch := agent.EvalCheck{Name: "tool calls", Passed: true}
	next := 0
	for _, w := range want {
		found := false
		for next < len(got) {
			g := got[next]
			next++
			if g.Tool == w.Tool && argsContain(g.Args, w.Args) {
				found = true
				break
			}
		}
		if !found {
			ch.Passed = false
			ch.Detail = fmt.Sprintf("no call of %s%s in order; the turn called %s", w.Tool, argsText(w.Args), describeCalls(got))
			return ch
		}
	}
	return ch
}

// argsContain reports whether a call's arguments have every member of
// want with an equal value.
func argsContain(got, want json.RawMessage) bool {
	if len(want) == 0 {
		return true
	}
	var g, w map[string]any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
		return false
	}
	for k, v := range w {
		if gv, ok := g[k]; !ok || !reflect.DeepEqual(gv, v) {
			return false
		}
	}
	return true
}

func argsText(args json.RawMessage) string {
	if len(args) == 0 {
		return ""
	}
	return string(compact(args))
}

func compact(raw json.RawMessage) json.RawMessage {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

func describeCalls(calls []agent.ToolCallRecord) string {
	if len(calls) == 0 {
		return "no tool"
	}
	var parts []string
	for _, c := range calls {
		parts = append(parts, fmt.Sprintf("%s%s (%s)", c.Tool, words.Clip(argsText(c.Args), 120), c.Status))
	}
	return strings.Join(parts, ", ")
}

// answer checks the final answer by each rule the case gives.
func answer(a agent.AnswerExpect, output string) []agent.EvalCheck {
	var out []agent.EvalCheck
	got := strings.TrimSpace(output)
	quoted := fmt.Sprintf("%q", words.Clip(got, 200))
	if a.Exact != "" {
		ch := agent.EvalCheck{Name: "answer exact", Passed: got == strings.TrimSpace(a.Exact)}
		if !ch.Passed {
			ch.Detail = fmt.Sprintf("answered %s, want %q", quoted, a.Exact)
		}
		out = append(out, ch)
	}
	if len(a.Contains) > 0 {
		ch := agent.EvalCheck{Name: "answer contains", Passed: true}
		for _, s := range a.Contains {
			if !strings.Contains(got, s) {
				ch.Passed, ch.Detail = false, fmt.Sprintf("answered %s, which lacks %q", quoted, s)
				break
			}
		}
		out = append(out, ch)
	}
	if a.Regex != "" {
		re, err := regexp.Compile(a.Regex)
		ch := agent.EvalCheck{Name: "answer regex", Passed: err == nil && re.MatchString(got)}
		if !ch.Passed {
			ch.Detail = fmt.Sprintf("answered %s, which does not match %s", quoted, a.Regex)
		}
		out = append(out, ch)
	}
	if len(a.Schema) > 0 {
		ch := agent.EvalCheck{Name: "answer schema", Passed: true}
		s, err := structured.Compile(a.Schema)
		if err != nil {
			ch.Passed, ch.Detail = false, "the schema does not compile: "+err.Error()
		} else if _, problems := s.Check(got); len(problems) > 0 {
			ch.Passed, ch.Detail = false, fmt.Sprintf("answered %s: %s", quoted, problems.Error())
		}
		out = append(out, ch)
	}
	return out
}

// JudgeSystem is the judge model's system prompt.
const JudgeSystem = "You grade an assistant's answer against a rubric. Reply with PASS or FAIL as the first word, " +
	"then one short sentence saying why."

// JudgePrompt is what the judge model reads: the rubric, the request and
// the answer.
func JudgePrompt(j agent.JudgeExpect, prompt, output string) string {
	return fmt.Sprintf("Rubric:\n%s\n\nRequest:\n%s\n\nAnswer:\n%s\n", strings.TrimSpace(j.Rubric), prompt, strings.TrimSpace(output))
}

// ParseVerdict reads a judge's reply: PASS or FAIL first, then why. A
// reply that starts with neither fails the check, saying so.
func ParseVerdict(reply string) agent.EvalCheck {
	r := strings.TrimSpace(reply)
	word, rest, _ := strings.Cut(r, " ")
	word = strings.Trim(strings.ToUpper(word), ":.,!")
	why := strings.TrimLeft(strings.TrimSpace(rest), ":-— ")
	switch word {
	case "PASS":
		return agent.EvalCheck{Name: "answer judge", Passed: true, Detail: why}
	case "FAIL":
		return agent.EvalCheck{Name: "answer judge", Detail: why}
	}
	return agent.EvalCheck{Name: "answer judge", Detail: fmt.Sprintf("the judge did not say PASS or FAIL: %q", words.Clip(r, 200))}
}
