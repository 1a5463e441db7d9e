package agent_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestMatchCalls: a replayed call matches a recorded call of the same
// tool with equal JSON arguments (key order, spacing and number spelling
// aside); repeated identical calls match in order, one more than the
// recording has matching none.
func TestMatchCalls(t *testing.T) {
	call := func(name, args string) agent.ToolCall { return agent.ToolCall{Name: name, Arguments: args} }
	recorded := []agent.ToolCall{
		call("calc", `{"expression": "6*7", "precision": 2}`),
		call("calc", `{"expression":"1+1"}`),
		call("calc", `{"expression":"1+1"}`),
		call("search", `{"q":"x"}`),
	}
	tests := []struct {
		name     string
		replayed []agent.ToolCall
		want     []int
	}{
		{"same calls", recorded, []int{0, 1, 2, 3}},
		{"key order, spaces, numbers", []agent.ToolCall{call("calc", `{ "precision":2.0,"expression":"6*7"}`)}, []int{0}},
		{"repeated in order, one too many", []agent.ToolCall{call("calc", `{"expression":"1+1"}`), call("calc", `{"expression":"1+1"}`),
			call("calc", `{"expression":"1+1"}`)}, []int{1, 2, -1}},
		{"other arguments", []agent.ToolCall{call("calc", `{"expression":"6*7"}`)}, []int{-1}},
		{"other tool", []agent.ToolCall{call("calc2", `{"q":"x"}`)}, []int{-1}},
		{"large integers stay exact", []agent.ToolCall{call("search", `{"q":"x","id":9007199254740993}`)}, []int{-1}},
		{"not JSON matches itself only", []agent.ToolCall{call("search", `{"q":`)}, []int{-1}},
		{"empty is an empty object", []agent.ToolCall{call("none", "")}, []int{-1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, agent.MatchCalls(recorded, tt.replayed))
		})
	}
	require.Equal(t, []int{0}, agent.MatchCalls([]agent.ToolCall{call("t", "")}, []agent.ToolCall{call("t", " {} ")}))
	require.Equal(t, []int{-1}, agent.MatchCalls([]agent.ToolCall{call("t", `{"id":9007199254740993}`)}, []agent.ToolCall{call("t", `{"id":9007199254740992}`)}))
	require.Equal(t, []int{0}, agent.MatchCalls([]agent.ToolCall{call("t", `{"n":1.50,"m":2e0}`)}, []agent.ToolCall{call("t", `{"m":2,"n":1.5}`)}))
}

// TestRecordedCalls pairs each asked call with its stored result, in the
// order the model asked, and leaves out a call without one.
func TestRecordedCalls(t *testing.T) {
	steps := []agent.Message{
		{Role: agent.RoleUser, Content: "q"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "a", Name: "t"}, {ID: "b", Name: "u"}, {ID: "c", Name: "v"}}},
		{Role: agent.RoleTool, ToolCallID: "b", Content: "B"},
		{Role: agent.RoleTool, ToolCallID: "a", Content: "A"},
		{Role: agent.RoleAssistant, Content: "done"},
	}
	got := agent.RecordedCalls(steps)
	require.Len(t, got, 2)
	require.Equal(t, "a", got[0].Call.ID)
	require.Equal(t, "A", got[0].Result.Content)
	require.Equal(t, "B", got[1].Result.Content)
	require.Len(t, agent.AskedCalls(steps), 3)

	// A program's calls are stored as tool messages that carry them.
	steps = append(steps, agent.Message{Role: agent.RoleTool, ToolCallID: "p1", Name: "t", Program: "run", Content: "P",
		ToolCalls: []agent.ToolCall{{ID: "p1", Name: "t", Arguments: `{"n":1}`}}})
	got = agent.RecordedCalls(steps)
	require.Len(t, got, 3)
	require.Equal(t, "p1", got[2].Call.ID)
	require.Equal(t, "P", got[2].Result.Content)
	require.Equal(t, "p1", agent.AskedCalls(steps)[3].ID)
}

// TestSampledIn: the sample is decided by the job id alone, the same on
// every call, near the rate, and nested (a lower rate takes a subset).
func TestSampledIn(t *testing.T) {
	low, high := 0, 0
	for i := range 10000 {
		id := fmt.Sprintf("job-%d", i)
		l, h := agent.SampledIn(id, 0.1), agent.SampledIn(id, 0.5)
		require.Equal(t, l, agent.SampledIn(id, 0.1))
		if l {
			low++
			require.True(t, h, "%s: in at 0.1, out at 0.5", id)
		}
		if h {
			high++
		}
	}
	require.InDelta(t, 1000, low, 150)
	require.InDelta(t, 5000, high, 300)
	require.True(t, agent.SampledIn("x", 0))
	require.True(t, agent.SampledIn("x", 1))
}

func TestRecordSelectionValidate(t *testing.T) {
	now := time.Now()
	ok := agent.RecordSelection{From: now.Add(-time.Hour), To: now, AgentID: "calc"}
	require.NoError(t, ok.Validate())
	for _, tt := range []struct {
		name string
		edit func(*agent.RecordSelection)
		want string
	}{
		{"no range", func(s *agent.RecordSelection) { s.From = time.Time{} }, "from and to are required"},
		{"backwards", func(s *agent.RecordSelection) { s.From, s.To = s.To, s.From }, "from must be before to"},
		{"no agent", func(s *agent.RecordSelection) { s.AgentID = "" }, "agent_id is required"},
		{"rate", func(s *agent.RecordSelection) { s.SampleRate = 1.5 }, "sample_rate"},
		{"limit", func(s *agent.RecordSelection) { s.Limit = agent.MaxRecordCases + 1 }, "limit"},
		{"channel", func(s *agent.RecordSelection) { s.Channel = "fax" }, "fax"},
		{"outcome", func(s *agent.RecordSelection) { s.Outcome = "canceled" }, "outcome"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.edit(&s)
			require.ErrorContains(t, s.Validate(), tt.want)
			require.True(t, agent.IsCode(s.Validate(), agent.CodeInvalid))
		})
	}
}

// TestReplayOnlyInEvaluations: a request that names a recording is
// refused unless an evaluation made it; a recorded case takes no prompt.
func TestReplayOnlyInEvaluations(t *testing.T) {
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "j", Prompt: "p", Replay: &agent.Replay{JobID: "r"}}
	for _, ch := range []string{"", agent.ChannelGRPC, agent.ChannelHTTP, agent.ChannelTemporal} {
		req.Channel = ch
		require.ErrorContains(t, req.Validate(), "only an evaluation replays", ch)
	}
	req.Channel = agent.ChannelEval
	require.NoError(t, req.Validate())

	d := agent.EvalDataset{Name: "rec", Cases: []agent.EvalCase{{ID: "a", Recording: &agent.Recording{JobID: "j", ToStep: 3}}}}
	require.NoError(t, d.Validate())
	d.Cases[0].Prompt = "copied"
	require.ErrorContains(t, d.Validate(), "takes its prompt and history from the recording")
	d.Cases[0].Prompt, d.Cases[0].Recording.FromStep = "", 4
	require.ErrorContains(t, d.Validate(), "from_step <= to_step")
}

// FuzzMatchCalls: arguments as a model writes them (any bytes) never
// panic; a call always matches itself, whatever its spelling, and
// canonical arguments are their own canonical form.
func FuzzMatchCalls(f *testing.F) {
	for _, s := range []string{`{"a": 1}`, `{"b":[1,2,{"c":null}],"a":"x"}`, "", "{", `"s"`, `1e400`, `{"a":1,"a":2}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, args string) {
		c := agent.ToolCall{Name: "t", Arguments: args}
		require.Equal(t, []int{0, -1}, agent.MatchCalls([]agent.ToolCall{c}, []agent.ToolCall{c, c}))
		canon := agent.CanonicalArgs(args)
		if !strings.HasPrefix(canon, "raw:") {
			require.Equal(t, canon, agent.CanonicalArgs(canon))
		}
	})
}

// TestReplayTotals: a version's replays sum to answers that agree, the
// mean tool-call agreement, divergences, the summed cost delta and the
// mean latency delta; a version without replays has none.
func TestReplayTotals(t *testing.T) {
	call := agent.ToolCall{Name: "t"}
	cases := []agent.EvalCaseResult{
		{Version: 1, Replay: &agent.ReplayScore{AnswerAgrees: true, RecordedCalls: []agent.ToolCall{call}, ReplayedCalls: []agent.ToolCall{call},
			Matched: 1, CostDeltaUSD: 0.5, LatencyDeltaMS: 100}},
		{Version: 1, Replay: &agent.ReplayScore{RecordedCalls: []agent.ToolCall{call}, ReplayedCalls: []agent.ToolCall{call, call},
			Matched: 1, Divergences: 1, CostDeltaUSD: 0.25, LatencyDeltaMS: 300}},
		{Version: 2},
	}
	totals := agent.TotalsOf([]int{1, 2}, cases)
	require.Equal(t, &agent.ReplayTotals{Cases: 2, AnswersAgree: 1, ToolAgreement: 0.75, Divergences: 1, CostDeltaUSD: 0.75, LatencyDeltaMS: 200},
		totals[0].Replay)
	require.Nil(t, totals[1].Replay)
}
