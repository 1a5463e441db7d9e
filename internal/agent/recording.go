package agent

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/words"
)

// Recordings: every completed turn is kept in the store (its request,
// its steps with the tool calls and their results, its answer). A
// selection of them becomes an evaluation dataset by reference — each
// case names a recorded turn, never a copy of its text — and a case that
// names one is replayed: its turn takes the recorded prompt and history,
// runs on the candidate version, and has its tool calls answered from
// the recording (ReplayOf), never by a live tool.

// Recording bounds.
const (
	// MaxRecordCases bounds the cases a selection makes (MaxEvalCases).
	MaxRecordCases = MaxEvalCases
	// maxRecordWindow bounds a selection's time range.
	maxRecordWindow = 366 * 24 * time.Hour
)

// NoRecordedResult is what the model reads of a replayed call that
// matches no recorded call: a divergence.
const NoRecordedResult = "no recorded result for this call in the recording"

// RecordSelection chooses completed turns of one tenant (the caller's,
// from its credential) for a dataset.
type RecordSelection struct {
	// From and To bound the turns' completion times: From included, To
	// excluded. Required.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// AgentID is the agent whose turns to take. Required: a dataset is
	// for one agent.
	AgentID string `json:"agent_id"`
	// Channel, when set, takes only the turns that came through this door
	// (TurnRequest.Channel).
	Channel string `json:"channel,omitempty"`
	// Outcome, when set, takes only the turns with this result status
	// (completed, failed, rejected). Default: every status.
	Outcome string `json:"outcome,omitempty"`
	// SampleRate, in (0, 1], is the share of matching turns to take;
	// which ones is decided by a hash of each job id (SampledIn), so the
	// same selection always takes the same turns. 0 means 1.
	SampleRate float64 `json:"sample_rate,omitempty"`
	// Limit bounds the cases (oldest first); 0 means MaxRecordCases.
	Limit int `json:"limit,omitempty"`
	// Judge, when set, grades each case's answer by a rubric too
	// (EvalExpect.Answer.Judge), beside the exact agreement with the
	// recorded answer.
	Judge *JudgeExpect `json:"judge,omitempty"`
}

// Validate checks a selection and says which field is wrong.
func (s RecordSelection) Validate() error {
	switch {
	case s.From.IsZero() || s.To.IsZero():
		return Errorf(CodeInvalid, "from and to are required (RFC 3339 times)")
	case !s.From.Before(s.To):
		return Errorf(CodeInvalid, "from must be before to")
	case s.To.Sub(s.From) > maxRecordWindow:
		return Errorf(CodeInvalid, "from and to are more than 366 days apart")
	case strings.TrimSpace(s.AgentID) == "":
		return Errorf(CodeInvalid, "agent_id is required")
	case math.IsNaN(s.SampleRate) || s.SampleRate < 0 || s.SampleRate > 1:
		return Errorf(CodeInvalid, "sample_rate is %v; want a share in (0, 1]", s.SampleRate)
	case s.Limit < 0 || s.Limit > MaxRecordCases:
		return Errorf(CodeInvalid, "limit is %d; want 1 to %d", s.Limit, MaxRecordCases)
	}
	if err := ValidateID("agent_id", s.AgentID); err != nil {
		return err
	}
	if s.Channel != "" {
		if err := validateChannel(s.Channel); err != nil {
			return err
		}
	}
	switch s.Outcome {
	case "", StatusCompleted, StatusFailed, StatusRejected:
	default:
		return Errorf(CodeInvalid, "outcome %q: want completed, failed or rejected", s.Outcome)
	}
	return nil
}

// SampledIn reports whether a selection at rate takes the turn jobID:
// a hash of the job id, so that the choice is the same on every run and
// a lower rate takes a subset of what a higher one takes.
func SampledIn(jobID string, rate float64) bool {
	if rate == 0 || rate >= 1 {
		return true
	}
	sum := sha256.Sum256([]byte(jobID))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11)/float64(1<<53) < rate
}

// Recording names a recorded turn, by reference: its job and workflow
// ids and the steps of it a case replays.
type Recording struct {
	JobID      string `json:"job_id"`
	WorkflowID string `json:"workflow_id"`
	// FromStep and ToStep are the steps (turn_steps seq, both included):
	// step FromStep is the prompt.
	FromStep int `json:"from_step"`
	ToStep   int `json:"to_step"`
}

func (r Recording) validate() error {
	switch {
	case strings.TrimSpace(r.JobID) == "":
		return Errorf(CodeInvalid, "recording.job_id is required")
	case r.FromStep < 0 || r.ToStep < r.FromStep:
		return Errorf(CodeInvalid, "recording: steps %d to %d: want 0 <= from_step <= to_step", r.FromStep, r.ToStep)
	}
	return nil
}

// Replay, on a turn request, makes the turn a replay of the recorded turn
// JobID (of the request's own tenant): every tool call is answered from
// the recording and none runs. The Evaluation workflow sets it
// (ChannelEval), and so does a person's "try again from here"
// (ChannelRetry), who may edit what some recorded calls returned.
type Replay struct {
	JobID string `json:"job_id"`
	// Seq is the step of the recorded turn the person retried from, shown
	// on the turn page; the replay itself starts from the prompt.
	Seq int `json:"seq,omitempty"`
	// Results are results a person edited, by the recorded call's id:
	// each replaces what the recording holds for that call.
	Results []ReplayResult `json:"results,omitempty"`
}

// ReplayResult is the edited result of a recorded call.
type ReplayResult struct {
	CallID string `json:"call_id"`
	Result string `json:"result"`
}

// Bounds of a replay's edited results: a person edits a few, by hand.
const (
	MaxReplayResults     = 100
	MaxReplayResultBytes = 64 << 10
)

// Validate checks a replay: a recording named, a step that is no
// negative, and at most MaxReplayResults edited results, each for one
// call (ids unique) and at most MaxReplayResultBytes.
func (r Replay) Validate() error {
	switch {
	case r.JobID == "":
		return Errorf(CodeInvalid, "replay: job_id is required: the recorded turn to replay")
	case r.Seq < 0:
		return Errorf(CodeInvalid, "replay: seq is %d: want a step of the recorded turn (0 or more)", r.Seq)
	case len(r.Results) > MaxReplayResults:
		return Errorf(CodeInvalid, "replay: %d results: want at most %d", len(r.Results), MaxReplayResults)
	}
	seen := make(map[string]bool, len(r.Results))
	for i, res := range r.Results {
		switch {
		case strings.TrimSpace(res.CallID) == "":
			return Errorf(CodeInvalid, "replay: results[%d].call_id is required", i)
		case seen[res.CallID]:
			return Errorf(CodeInvalid, "replay: results[%d].call_id %q is given twice: give each call's result once", i, words.Clip(res.CallID, 100))
		case len(res.Result) > MaxReplayResultBytes:
			return Errorf(CodeInvalid, "replay: results[%d].result is %d bytes: want at most %d", i, len(res.Result), MaxReplayResultBytes)
		}
		seen[res.CallID] = true
	}
	return nil
}

// Edited is the result a person gave the recorded call callID, if any.
func (r Replay) Edited(callID string) (string, bool) {
	for _, res := range r.Results {
		if res.CallID == callID {
			return res.Result, true
		}
	}
	return "", false
}

// RecordedCall is a tool call of a recorded turn and the result stored
// for it.
type RecordedCall struct {
	Call   ToolCall `json:"call"`
	Result Message  `json:"result"`
}

// RecordedCalls pairs the tool calls of a turn's steps with their
// results, in the order they were made: the calls of each assistant
// message, and the calls a program made (run_program: a tool message
// that carries its own call, Message.Program). A call without a stored
// result is left out.
func RecordedCalls(steps []Message) []RecordedCall {
	results := map[string]Message{}
	for _, m := range steps {
		if m.Role == RoleTool && m.ToolCallID != "" {
			results[m.ToolCallID] = m
		}
	}
	var out []RecordedCall
	for _, m := range steps {
		if c, ok := programCall(m); ok {
			out = append(out, RecordedCall{Call: c, Result: m})
			continue
		}
		if m.Role != RoleAssistant {
			continue
		}
		for _, c := range m.ToolCalls {
			if r, ok := results[c.ID]; ok {
				out = append(out, RecordedCall{Call: c, Result: r})
			}
		}
	}
	return out
}

// AskedCalls are the tool calls of a turn's steps, in the order they
// were asked for: by the model (assistant messages) or by a program.
func AskedCalls(steps []Message) []ToolCall {
	var out []ToolCall
	for _, m := range steps {
		if c, ok := programCall(m); ok {
			out = append(out, c)
		} else if m.Role == RoleAssistant {
			out = append(out, m.ToolCalls...)
		}
	}
	return out
}

// programCall is the call a program made that a stored tool message
// answers.
func programCall(m Message) (ToolCall, bool) {
	if m.Role != RoleTool || m.Program == "" || len(m.ToolCalls) != 1 {
		return ToolCall{}, false
	}
	return m.ToolCalls[0], true
}

// MatchCalls matches a replay's calls to a recording's: a replayed call
// matches a recorded one of the same tool whose arguments are equal as
// JSON values (CanonicalArgs: key order, spacing and number spelling do
// not count). Repeated identical calls match in order: the k-th replayed
// call of a tool and arguments takes the k-th recorded one; one more than
// the recording has matches none. It returns, for each replayed call, the
// index of its recorded call, or -1: a divergence.
func MatchCalls(recorded []ToolCall, replayed []ToolCall) []int {
	keys := make([]string, len(recorded))
	for i, c := range recorded {
		keys[i] = callKey(c)
	}
	used := make([]bool, len(recorded))
	out := make([]int, len(replayed))
	for i, c := range replayed {
		out[i] = -1
		k := callKey(c)
		for j := range recorded {
			if !used[j] && keys[j] == k {
				used[j], out[i] = true, j
				break
			}
		}
	}
	return out
}

func callKey(c ToolCall) string {
	return c.Name + "\x00" + CanonicalArgs(c.Arguments)
}

// CanonicalArgs is a call's arguments as canonical JSON: object keys
// sorted, no spaces, an integer as written (so large ids stay exact),
// another number as its shortest float64 form (2.0 and 2 are one).
// Arguments that are not JSON are kept as they are (they match only
// themselves).
func CanonicalArgs(args string) string {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return "raw:" + args
	}
	b, err := json.Marshal(canonicalNumbers(v))
	if err != nil {
		return "raw:" + args
	}
	return string(b)
}

// canonicalNumbers rewrites v's numbers as CanonicalArgs says.
func canonicalNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = canonicalNumbers(e)
		}
	case []any:
		for i, e := range t {
			t[i] = canonicalNumbers(e)
		}
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			return t
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) {
			return t
		}
		if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return json.Number(strconv.FormatInt(int64(f), 10))
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64))
	}
	return v
}

// ReplayScore is how a replayed case compares with its recording.
type ReplayScore struct {
	// RecordedJobID is the recorded turn.
	RecordedJobID string `json:"recorded_job_id"`
	// AnswerAgrees: the replay's answer, trimmed, equals the recorded one.
	AnswerAgrees   bool   `json:"answer_agrees"`
	RecordedAnswer string `json:"recorded_answer,omitempty"`
	// RecordedCalls and ReplayedCalls are the two turns' tool calls
	// (tool and canonical arguments), for the report's diff.
	RecordedCalls []ToolCall `json:"recorded_calls,omitempty"`
	ReplayedCalls []ToolCall `json:"replayed_calls,omitempty"`
	// Matched is how many replayed calls matched a recorded one;
	// Divergences how many matched none.
	Matched     int `json:"matched"`
	Divergences int `json:"divergences"`
	// CostDeltaUSD and LatencyDeltaMS are the replay's less the
	// recording's.
	RecordedCostUSD   float64 `json:"recorded_cost_usd"`
	CostDeltaUSD      float64 `json:"cost_delta_usd"`
	RecordedLatencyMS int64   `json:"recorded_latency_ms"`
	LatencyDeltaMS    int64   `json:"latency_delta_ms"`
	// GuardTripped: a guardrail stopped the replay; RecordedGuardTripped:
	// one stopped the recorded turn.
	GuardTripped         bool `json:"guard_tripped,omitempty"`
	RecordedGuardTripped bool `json:"recorded_guard_tripped,omitempty"`
}

// ToolAgreement is the share of the two turns' calls that match: matched
// calls over the larger of the two counts; 1 when neither called a tool.
func (s ReplayScore) ToolAgreement() float64 {
	n := max(len(s.RecordedCalls), len(s.ReplayedCalls))
	if n == 0 {
		return 1
	}
	return float64(s.Matched) / float64(n)
}

// String is a one-line account for a check's detail.
func (s ReplayScore) String() string {
	return fmt.Sprintf("tool calls %d of %d agree, %d divergent", s.Matched, max(len(s.RecordedCalls), len(s.ReplayedCalls)), s.Divergences)
}
