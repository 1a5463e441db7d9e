package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// An evaluation runs a dataset of cases — prompts with what a good answer
// does — against one or two versions of an agent, as durable turns, and
// scores each case: the Evaluation workflow fans the cases out as child
// turns, a few at a time, and stores each case's score as it comes.

// Evaluation bounds.
const (
	MaxEvalCases       = 500
	MaxEvalVersions    = 2
	MaxEvalConcurrency = 16
	// DefaultEvalConcurrency is how many cases run at once by default.
	DefaultEvalConcurrency = 4
	maxEvalHistory         = 50
	maxRubricBytes         = 4 << 10
)

// EvalDataset is a set of cases for one agent, as a dataset file holds it.
type EvalDataset struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Agent is the agent the cases are for (a run may name another).
	Agent string     `json:"agent,omitempty"`
	Cases []EvalCase `json:"cases"`
}

// EvalCase is one prompt and what a good answer to it does.
type EvalCase struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	// History is the conversation before the prompt (user and assistant
	// messages), which the turn reads as its session's.
	History []Message  `json:"history,omitempty"`
	Expect  EvalExpect `json:"expect,omitzero"`
	// Recording, when set, makes the case a replay of a recorded turn
	// (by reference: Prompt and History stay empty and are read from the
	// recording when the case runs). Expect is then optional: the case
	// is scored against the recording (ReplayScore).
	Recording *Recording `json:"recording,omitempty"`
}

// EvalExpect is what a case checks. Every check set must pass.
type EvalExpect struct {
	// Status is the turn's result status; default completed.
	Status string `json:"status,omitempty"`
	// ToolCalls are calls the turn must make, in this order among its
	// calls (others may come between): the tool, and arguments the call's
	// must contain (a JSON object, compared member by member).
	ToolCalls []ExpectedCall `json:"tool_calls,omitempty"`
	// NoToolCalls: the turn must call no tool.
	NoToolCalls bool `json:"no_tool_calls,omitempty"`
	// Answer checks the final answer.
	Answer *AnswerExpect `json:"answer,omitempty"`
}

// ExpectedCall is a tool call a case expects.
type ExpectedCall struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args,omitempty"`
}

// AnswerExpect checks a final answer: each rule set must hold.
type AnswerExpect struct {
	// Exact: the answer, trimmed, equals this.
	Exact string `json:"exact,omitempty"`
	// Contains: the answer contains each of these.
	Contains []string `json:"contains,omitempty"`
	// Regex: the answer matches this (RE2).
	Regex string `json:"regex,omitempty"`
	// Schema: the answer is JSON valid against this JSON Schema.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Judge: a model reads the answer with a rubric and says PASS or FAIL.
	Judge *JudgeExpect `json:"judge,omitempty"`
}

// JudgeExpect asks a model to grade an answer by a rubric.
type JudgeExpect struct {
	Rubric string `json:"rubric"`
	// Model grades ("provider:model"); default: the agent's model.
	Model string `json:"model,omitempty"`
}

// Validate checks a dataset and names the case and field of what is
// wrong. (A schema's JSON Schema is compiled where it is scored.)
func (d EvalDataset) Validate() error {
	if strings.TrimSpace(d.Name) == "" {
		return Errorf(CodeInvalid, "dataset: name is required")
	}
	if err := ValidateID("dataset name", d.Name); err != nil {
		return err
	}
	if err := ValidateID("dataset agent", d.Agent); err != nil {
		return err
	}
	switch {
	case len(d.Cases) == 0:
		return Errorf(CodeInvalid, "dataset %s: cases: at least one case is required", d.Name)
	case len(d.Cases) > MaxEvalCases:
		return Errorf(CodeInvalid, "dataset %s: %d cases; the limit is %d (split the dataset)", d.Name, len(d.Cases), MaxEvalCases)
	}
	for i, c := range d.Cases {
		if err := c.validate(); err != nil {
			return Errorf(CodeInvalid, "dataset %s: cases[%d] (%s): %s", d.Name, i, orNone(c.ID), err.Error())
		}
		for _, prev := range d.Cases[:i] {
			if prev.ID == c.ID {
				return Errorf(CodeInvalid, "dataset %s: cases[%d]: id %q is used twice", d.Name, i, c.ID)
			}
		}
	}
	return nil
}

func orNone(id string) string {
	if id == "" {
		return "no id"
	}
	return "id " + id
}

func (c EvalCase) validate() error {
	if c.Recording != nil {
		return c.validateRecorded()
	}
	switch {
	case strings.TrimSpace(c.ID) == "":
		return Errorf(CodeInvalid, "id is required")
	case len(c.ID) > 64:
		return Errorf(CodeInvalid, "id is longer than 64 bytes")
	case strings.TrimSpace(c.Prompt) == "":
		return Errorf(CodeInvalid, "prompt is required")
	case len(c.Prompt) > MaxPromptBytes:
		return Errorf(CodeInvalid, "prompt is longer than %d bytes", MaxPromptBytes)
	case len(c.History) > maxEvalHistory:
		return Errorf(CodeInvalid, "history has %d messages; the limit is %d", len(c.History), maxEvalHistory)
	}
	if err := ValidateID("id", c.ID); err != nil {
		return err
	}
	for i, m := range c.History {
		if m.Role != RoleUser && m.Role != RoleAssistant {
			return Errorf(CodeInvalid, "history[%d]: role %q: want user or assistant", i, m.Role)
		}
		if strings.TrimSpace(m.Content) == "" {
			return Errorf(CodeInvalid, "history[%d]: content is required", i)
		}
	}
	return c.Expect.validate()
}

// validateRecorded checks a case that replays a recording: its prompt
// and history are the recording's.
func (c EvalCase) validateRecorded() error {
	switch {
	case strings.TrimSpace(c.ID) == "":
		return Errorf(CodeInvalid, "id is required")
	case len(c.ID) > 64:
		return Errorf(CodeInvalid, "id is longer than 64 bytes")
	case c.Prompt != "" || len(c.History) > 0:
		return Errorf(CodeInvalid, "a recorded case takes its prompt and history from the recording: leave them out")
	}
	if err := ValidateID("id", c.ID); err != nil {
		return err
	}
	if err := c.Recording.validate(); err != nil {
		return err
	}
	if c.Expect.empty() {
		return nil
	}
	return c.Expect.validate()
}

func (e EvalExpect) empty() bool {
	return e.Status == "" && len(e.ToolCalls) == 0 && !e.NoToolCalls && e.Answer == nil
}

func (e EvalExpect) validate() error {
	switch e.Status {
	case "", StatusCompleted, StatusFailed, StatusRejected, StatusCanceled:
	default:
		return Errorf(CodeInvalid, "expect.status %q: want completed, failed, rejected or canceled", e.Status)
	}
	if e.NoToolCalls && len(e.ToolCalls) > 0 {
		return Errorf(CodeInvalid, "expect: no_tool_calls and tool_calls: choose one")
	}
	for i, c := range e.ToolCalls {
		if strings.TrimSpace(c.Tool) == "" {
			return Errorf(CodeInvalid, "expect.tool_calls[%d]: tool is required", i)
		}
		if len(c.Args) > 0 && !isObject(c.Args) {
			return Errorf(CodeInvalid, "expect.tool_calls[%d].args: want a JSON object (the members the call's arguments must have)", i)
		}
	}
	if a := e.Answer; a != nil {
		if a.Exact == "" && len(a.Contains) == 0 && a.Regex == "" && len(a.Schema) == 0 && a.Judge == nil {
			return Errorf(CodeInvalid, "expect.answer: give exact, contains, regex, schema or judge")
		}
		if a.Regex != "" {
			if _, err := regexp.Compile(a.Regex); err != nil {
				return Errorf(CodeInvalid, "expect.answer.regex: %v", err)
			}
		}
		if len(a.Schema) > 0 && !isObject(a.Schema) {
			return Errorf(CodeInvalid, "expect.answer.schema: want a JSON Schema object")
		}
		if j := a.Judge; j != nil {
			switch {
			case strings.TrimSpace(j.Rubric) == "":
				return Errorf(CodeInvalid, "expect.answer.judge.rubric is required")
			case len(j.Rubric) > maxRubricBytes:
				return Errorf(CodeInvalid, "expect.answer.judge.rubric is longer than %d bytes", maxRubricBytes)
			}
			if j.Model != "" {
				if _, _, err := ParseModel(j.Model); err != nil {
					return Errorf(CodeInvalid, "expect.answer.judge.model: %s", err.Error())
				}
			}
		}
	}
	if e.Status == "" && len(e.ToolCalls) == 0 && !e.NoToolCalls && e.Answer == nil {
		return Errorf(CodeInvalid, "expect: nothing to check: give status, tool_calls, no_tool_calls or answer")
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

// EvalInput is the Evaluation workflow's input.
type EvalInput struct {
	TenantID string `json:"tenant_id"`
	EvalID   string `json:"eval_id"`
	AgentID  string `json:"agent_id"`
	// Versions are the agent's versions to run the cases on: one, or two
	// to compare.
	Versions    []int       `json:"versions"`
	Concurrency int         `json:"concurrency,omitempty"`
	Dataset     EvalDataset `json:"dataset"`
	// Build, "deployment:build", pins the evaluation (and so its turns,
	// which start on their parent's build) to a worker build that need
	// not take traffic yet: a deploy gate evaluates a candidate build so.
	// Empty: the deployment's current build, as any new workflow.
	Build string `json:"build,omitempty"`
}

// SplitBuild splits "deployment:build" into its names.
func SplitBuild(build string) (deployment, id string, err error) {
	deployment, id, ok := strings.Cut(build, ":")
	if !ok || deployment == "" || id == "" || strings.Contains(id, ":") {
		return "", "", Errorf(CodeInvalid, "build %q: want deployment:build", build)
	}
	return deployment, id, nil
}

// Validate checks the input as the workflow receives it.
func (in EvalInput) Validate() error {
	for _, f := range []struct{ name, v string }{{"tenant_id", in.TenantID}, {"eval_id", in.EvalID}, {"agent_id", in.AgentID}} {
		if strings.TrimSpace(f.v) == "" {
			return Errorf(CodeInvalid, "%s is required", f.name)
		}
		if err := ValidateID(f.name, f.v); err != nil {
			return err
		}
	}
	if len(in.EvalID) > 80 {
		return Errorf(CodeInvalid, "eval_id is longer than 80 bytes")
	}
	if in.Build != "" {
		if _, _, err := SplitBuild(in.Build); err != nil {
			return err
		}
	}
	switch {
	case len(in.Versions) == 0 || len(in.Versions) > MaxEvalVersions:
		return Errorf(CodeInvalid, "versions: give one agent version, or two to compare")
	case len(in.Versions) == 2 && in.Versions[0] == in.Versions[1]:
		return Errorf(CodeInvalid, "versions: %d twice; give two different versions to compare", in.Versions[0])
	case slices.ContainsFunc(in.Versions, func(v int) bool { return v < 1 }):
		return Errorf(CodeInvalid, "versions: a version is a number from 1")
	case in.Concurrency < 0 || in.Concurrency > MaxEvalConcurrency:
		return Errorf(CodeInvalid, "concurrency is %d; want 1 to %d", in.Concurrency, MaxEvalConcurrency)
	}
	return in.Dataset.Validate()
}

// EvalJobID is the job id of a case's turn on a version: the same for
// every attempt, so that a resumed evaluation finds the turn it started.
func EvalJobID(evalID, caseID string, version int) string {
	return fmt.Sprintf("%s-v%d-%s", evalID, version, caseID)
}

// EvalCheck is one check of a case and how it went.
type EvalCheck struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Detail string `json:"detail,omitempty"`
}

// EvalCaseResult is a case's outcome on one version.
type EvalCaseResult struct {
	CaseID    string      `json:"case_id"`
	Version   int         `json:"version"`
	JobID     string      `json:"job_id"`
	Status    string      `json:"status"`
	Passed    bool        `json:"passed"`
	Checks    []EvalCheck `json:"checks"`
	Output    string      `json:"output,omitempty"`
	Tokens    int         `json:"tokens"`
	CostUSD   float64     `json:"cost_usd"`
	LatencyMS int64       `json:"latency_ms"`
	// Replay is how a recorded case's replay compares with its
	// recording; nil for other cases.
	Replay *ReplayScore `json:"replay,omitempty"`
}

// EvalTotals sums a version's cases.
type EvalTotals struct {
	Version      int     `json:"version"`
	Cases        int     `json:"cases"`
	Passed       int     `json:"passed"`
	Tokens       int     `json:"tokens"`
	CostUSD      float64 `json:"cost_usd"`
	LatencyP50MS int64   `json:"latency_p50_ms"`
	LatencyMaxMS int64   `json:"latency_max_ms"`
	// Replay sums the version's replayed cases (those with a
	// ReplayScore); nil when it has none.
	Replay *ReplayTotals `json:"replay,omitempty"`
}

// ReplayTotals sums the replays of a version's recorded cases.
type ReplayTotals struct {
	Cases        int `json:"cases"`
	AnswersAgree int `json:"answers_agree"`
	// ToolAgreement is the mean of the cases' ReplayScore.ToolAgreement.
	ToolAgreement float64 `json:"tool_agreement"`
	Divergences   int     `json:"divergences"`
	// CostDeltaUSD is the replays' cost less the recordings', summed;
	// LatencyDeltaMS the mean of the cases' latency deltas.
	CostDeltaUSD   float64 `json:"cost_delta_usd"`
	LatencyDeltaMS int64   `json:"latency_delta_ms"`
	// GuardTrips counts the replays a guardrail stopped, RecordedGuardTrips
	// the recorded turns one stopped.
	GuardTrips         int `json:"guard_trips,omitempty"`
	RecordedGuardTrips int `json:"recorded_guard_trips,omitempty"`
}

func (t *EvalTotals) addReplay(s ReplayScore) {
	if t.Replay == nil {
		t.Replay = &ReplayTotals{}
	}
	r := t.Replay
	r.ToolAgreement = (r.ToolAgreement*float64(r.Cases) + s.ToolAgreement()) / float64(r.Cases+1)
	r.Cases++
	if s.AnswerAgrees {
		r.AnswersAgree++
	}
	r.Divergences += s.Divergences
	if s.GuardTripped {
		r.GuardTrips++
	}
	if s.RecordedGuardTripped {
		r.RecordedGuardTrips++
	}
	r.CostDeltaUSD += s.CostDeltaUSD
	r.LatencyDeltaMS += s.LatencyDeltaMS // a sum until TotalsOf takes the mean
}

// Score is the share of cases that passed, 0 to 1.
func (t EvalTotals) Score() float64 {
	if t.Cases == 0 {
		return 0
	}
	return float64(t.Passed) / float64(t.Cases)
}

// Eval states.
const (
	EvalRunning   = "running"
	EvalCompleted = "completed"
)

// EvalRun is an evaluation as stored: its cases' results and totals.
type EvalRun struct {
	TenantID   string           `json:"tenant_id"`
	EvalID     string           `json:"eval_id"`
	Dataset    string           `json:"dataset"`
	AgentID    string           `json:"agent_id"`
	Versions   []int            `json:"versions"`
	Status     string           `json:"status"`
	StartedAt  time.Time        `json:"started_at"`
	FinishedAt *time.Time       `json:"finished_at,omitempty"`
	Totals     []EvalTotals     `json:"totals"`
	Cases      []EvalCaseResult `json:"cases"`
}

// Passed reports whether every case passed on every version.
func (r EvalRun) Passed() bool {
	for _, t := range r.Totals {
		if t.Passed != t.Cases {
			return false
		}
	}
	return len(r.Totals) > 0
}

// TotalsOf sums the cases of each version, in the order of versions.
func TotalsOf(versions []int, cases []EvalCaseResult) []EvalTotals {
	out := make([]EvalTotals, 0, len(versions))
	for _, v := range versions {
		t := EvalTotals{Version: v}
		var lat []int64
		for _, c := range cases {
			if c.Version != v {
				continue
			}
			t.Cases++
			if c.Passed {
				t.Passed++
			}
			t.Tokens += c.Tokens
			t.CostUSD += c.CostUSD
			lat = append(lat, c.LatencyMS)
			if c.Replay != nil {
				t.addReplay(*c.Replay)
			}
		}
		if r := t.Replay; r != nil {
			r.LatencyDeltaMS /= int64(r.Cases)
		}
		if len(lat) > 0 {
			slices.Sort(lat)
			t.LatencyP50MS, t.LatencyMaxMS = lat[(len(lat)-1)/2], lat[len(lat)-1]
		}
		out = append(out, t)
	}
	return out
}
