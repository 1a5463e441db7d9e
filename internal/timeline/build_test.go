package timeline_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/timeline"
)

// fakeStore is a turn in memory, read as the store reads it.
type fakeStore struct {
	turn      store.TimelineTurn
	steps     []store.DatedStep
	calls     []store.ModelCall
	approvals map[string]agent.ApprovalRecord
	effects   map[int]effects.Intent
	agent     agent.Agent
	// asked counts AssistantBefore's reads.
	asked int
}

func (f *fakeStore) own(tenant, job string) error {
	if tenant != f.turn.TenantID || job != f.turn.JobID {
		return agent.Errorf(agent.CodeNotFound, "turn %q not found", job)
	}
	return nil
}

func (f *fakeStore) TimelineTurn(_ context.Context, tenant, job string) (store.TimelineTurn, error) {
	return f.turn, f.own(tenant, job)
}

func (f *fakeStore) TurnTotals(context.Context, string, string) (store.TurnTotals, error) {
	t := store.TurnTotals{Steps: len(f.steps), MaxSeq: f.steps[len(f.steps)-1].Seq, Approvals: len(f.approvals)}
	for _, s := range f.steps {
		if s.Role == agent.RoleTool {
			t.ToolMessages++
		}
	}
	for _, c := range f.calls {
		t.ModelCalls++
		t.Retries += c.Attempt - 1
	}
	return t, nil
}

func (f *fakeStore) DatedSteps(_ context.Context, tenant, job string, from, to int) ([]store.DatedStep, error) {
	var out []store.DatedStep
	for _, s := range f.steps {
		if s.Seq >= from && s.Seq < to {
			out = append(out, s)
		}
	}
	return out, f.own(tenant, job)
}

func (f *fakeStore) AssistantBefore(_ context.Context, _, _ string, before, within int) (store.DatedStep, error) {
	f.asked++
	for i := len(f.steps) - 1; i >= 0; i-- {
		s := f.steps[i]
		if s.Seq < before && s.Seq >= before-within && s.Role == agent.RoleAssistant {
			return s, nil
		}
	}
	return store.DatedStep{}, agent.Errorf(agent.CodeNotFound, "none")
}

func (f *fakeStore) ChatCalls(_ context.Context, _, _ string, from, to int) ([]store.ModelCall, error) {
	var out []store.ModelCall
	for _, c := range f.calls {
		if c.Step >= from && c.Step < to {
			out = append(out, c)
		}
	}
	return out, nil
}

func (f *fakeStore) CallApprovals(_ context.Context, _, _ string, ids []string) (map[string]agent.ApprovalRecord, error) {
	out := map[string]agent.ApprovalRecord{}
	for _, id := range ids {
		if r, ok := f.approvals[id]; ok {
			out[id] = r
		}
	}
	return out, nil
}

func (f *fakeStore) StepEffects(_ context.Context, _, _ string, seqs []int) (map[int]effects.Intent, error) {
	out := map[int]effects.Intent{}
	for _, s := range seqs {
		if in, ok := f.effects[s]; ok {
			out[s] = in
		}
	}
	return out, nil
}

func (f *fakeStore) AgentVersion(_ context.Context, tenant, agentID string, version int) (agent.Agent, error) {
	if agentID != f.agent.ID || version != f.agent.Version {
		return agent.Agent{}, agent.Errorf(agent.CodeNotFound, "agent %q version %d not found", agentID, version)
	}
	return f.agent, nil
}

type fakeRuns struct {
	runs []timeline.Run
	err  error
}

func (r fakeRuns) Runs(context.Context, string) ([]timeline.Run, error) { return r.runs, r.err }

var t0 = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// demoTurn is a turn of a prompt, a reply (its second attempt) asking
// for two calls, their results, a steered message and the answer.
func demoTurn() *fakeStore {
	cost := 0.5
	step := func(seq, sec int, m agent.Message) store.DatedStep {
		return store.DatedStep{Step: store.Step{Seq: seq, Message: m}, CreatedAt: at(sec)}
	}
	return &fakeStore{
		turn: store.TimelineTurn{TenantID: "demo", JobID: "j1", WorkflowID: "turn/demo/j1", AgentID: "assistant", AgentVersion: 3,
			SessionID: "s 1", CreatedAt: at(0), Request: agent.TurnRequest{Prompt: "mail ana", Channel: agent.ChannelHTTP}},
		steps: []store.DatedStep{
			step(0, 1, agent.Message{Role: agent.RoleUser, Content: "mail ana"}),
			step(1, 3, agent.Message{Role: agent.RoleAssistant, Content: "On it.", Reasoning: []agent.Reasoning{{Text: "mail first"}, {Signature: "x"}},
				ToolCalls: []agent.ToolCall{{ID: "c1", Name: "send_mail", Arguments: `{"to":"ana"}`}, {ID: "c2", Name: "calc", Arguments: `not json`}}}),
			step(2, 9, agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Name: "send_mail", Content: "sent",
				Data: &agent.DataPreview{Type: "json", Ref: "cas://sha256:ab"}}),
			step(3, 4, agent.Message{Role: agent.RoleTool, ToolCallID: "c2", Name: "calc", Content: "error: " + strings.Repeat("é", timeline.MaxResultPreview)}),
			step(4, 10, agent.Message{Role: agent.RoleUser, Content: "and bob"}),
			step(5, 12, agent.Message{Role: agent.RoleAssistant, Content: "Done.", Model: "openai:m", Usage: &agent.Usage{PromptTokens: 9}}),
		},
		calls: []store.ModelCall{{Step: 1, Attempt: 2, Model: "openai:gpt", Usage: agent.Usage{PromptTokens: 100, CompletionTokens: 7, CachedTokens: 50},
			Cost: &cost, WholeFrom: 0, DigestFrom: 0}},
		approvals: map[string]agent.ApprovalRecord{"c1": {CallID: "c1", Outcome: agent.ApprovalApproved, Approver: "ana", Via: "signal",
			RequestedAt: at(4), DecidedAt: at(8)}},
		effects: map[int]effects.Intent{2: {Target: "POST https://mail", Delivered: true, Status: 202}},
		agent: agent.Agent{ID: "assistant", Version: 3, Model: "openai:gpt", SystemPrompt: "Be kind.",
			Tools: []agent.Tool{{Name: "send_mail", Description: "Sends mail."}, {Name: "calc"}}},
	}
}

func TestBuild(t *testing.T) {
	fs := demoTurn()
	runs := []timeline.Run{{RunID: "r1", Status: "ContinuedAsNew", StartedAt: at(0), WebUI: "http://ui/r1"},
		{RunID: "r2", Status: "Running", StartedAt: at(5), WebUI: "http://ui/r2"}}
	src := timeline.Source{Store: fs, Runs: fakeRuns{runs: runs}, TraceURL: "http://trace/?wf={workflow_id}&run={run_id}",
		Now: func() time.Time { return at(60) }}
	tl, err := timeline.Build(t.Context(), src, timeline.Query{TenantID: "demo", JobID: "j1", After: -1})
	require.NoError(t, err)

	require.Equal(t, "running", tl.Status)
	require.Nil(t, tl.EndedAt)
	require.Equal(t, int64(60000), tl.Totals.DurationMs)
	require.Equal(t, timeline.Totals{Steps: 6, ModelCalls: 1, ToolCalls: 2, Retries: 1, Approvals: 1, DurationMs: 60000}, tl.Totals)
	require.Equal(t, "mail ana", tl.Prompt)
	require.Equal(t, timeline.Links{WebUI: "http://ui/r2", Trace: "http://trace/?wf=turn%2Fdemo%2Fj1&run=r2", Conversation: "/conversations/s%201"}, tl.Links)
	require.Nil(t, tl.NextAfter)
	require.Len(t, tl.Items, 6)

	kinds := []string{}
	for _, it := range tl.Items {
		kinds = append(kinds, it.Kind)
	}
	require.Equal(t, []string{timeline.KindPrompt, timeline.KindModelCall, timeline.KindToolCall, timeline.KindToolCall, timeline.KindMessage, timeline.KindModelCall}, kinds)

	prompt := tl.Items[0]
	require.Equal(t, at(0), prompt.StartedAt)
	require.Equal(t, int64(1000), prompt.DurationMs)
	require.Equal(t, 0, prompt.Run)

	call := tl.Items[1]
	require.Equal(t, "On it.", call.Text)
	require.Equal(t, []string{"mail first"}, call.Reasoning)
	require.Equal(t, []timeline.CallRef{{CallID: "c1", Name: "send_mail"}, {CallID: "c2", Name: "calc"}}, call.Calls)
	require.Equal(t, "openai:gpt", call.Model)
	require.Equal(t, 2, call.Attempt)
	require.Equal(t, 1, call.Retries)
	require.Equal(t, int64(50), call.CachedTokens)
	require.InDelta(t, 0.5, *call.CostUSD, 1e-9)
	require.Equal(t, &timeline.RequestShape{}, call.Request)
	require.Equal(t, at(1), call.StartedAt)

	mail := tl.Items[2]
	require.Equal(t, at(3), mail.StartedAt, "a round's calls start with the reply that asked for them")
	require.Equal(t, int64(6000), mail.DurationMs)
	require.Equal(t, 1, mail.Run, "stored in the second run")
	require.Equal(t, `{"to":"ana"}`, string(mail.Tool.Args))
	require.Equal(t, "cas://sha256:ab", mail.Tool.ResultRef)
	require.Equal(t, &timeline.Delivery{State: "delivered", Status: 202, Target: "POST https://mail"}, mail.Tool.Delivery)
	require.Equal(t, &timeline.Approval{Outcome: "approved", Approver: "ana", Via: "signal", RequestedAt: at(4), DecidedAt: at(8)}, mail.Tool.Approval)
	require.False(t, mail.Tool.Error)

	calc := tl.Items[3]
	require.Equal(t, at(3), calc.StartedAt)
	require.True(t, calc.Tool.Error)
	require.True(t, calc.Tool.ResultClipped)
	require.LessOrEqual(t, len(calc.Tool.Result), timeline.MaxResultPreview)
	require.True(t, strings.HasPrefix(calc.Tool.Result, "error: é"))
	require.Equal(t, `"not json"`, string(calc.Tool.Args), "arguments that are not JSON are a JSON string")
	require.Nil(t, calc.Tool.Approval)

	require.Equal(t, "and bob", tl.Items[4].Text)
	answer := tl.Items[5]
	require.Equal(t, "openai:m", answer.Model, "without a ledger row, the message's own")
	require.Equal(t, int64(9), answer.InputTokens)
	require.Zero(t, answer.Attempt)
	require.Nil(t, answer.Request)
}

func TestBuildPages(t *testing.T) {
	for _, tc := range []struct {
		name         string
		after, limit int
		seqs         []int
		next         *int
		asked        int
		firstStarted time.Time
	}{
		{name: "first page", after: -1, limit: 2, seqs: []int{0, 1}, next: ptr(1), firstStarted: at(0)},
		{name: "from a reply", after: 1, limit: 2, seqs: []int{2, 3}, next: ptr(3), firstStarted: at(3)},
		{name: "mid round", after: 2, limit: 1, seqs: []int{3}, next: ptr(3), asked: 1, firstStarted: at(3)},
		{name: "last page", after: 3, limit: 5, seqs: []int{4, 5}, firstStarted: at(4)},
		{name: "past the end", after: 9, limit: 0, seqs: []int{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := demoTurn()
			tl, err := timeline.Build(t.Context(), timeline.Source{Store: fs}, timeline.Query{TenantID: "demo", JobID: "j1", After: tc.after, Limit: tc.limit})
			require.NoError(t, err)
			seqs := []int{}
			for _, it := range tl.Items {
				seqs = append(seqs, it.Seq)
				require.Equal(t, -1, it.Run, "no runs listed")
			}
			require.Equal(t, tc.seqs, seqs)
			require.Equal(t, tc.next, tl.NextAfter)
			require.Equal(t, tc.asked, fs.asked)
			require.Empty(t, tl.Runs)
			if len(tl.Items) > 0 {
				require.Equal(t, tc.firstStarted, tl.Items[0].StartedAt)
			}
			if slices.Contains(seqs, 3) {
				require.Equal(t, `"not json"`, string(tl.Items[slices.Index(seqs, 3)].Tool.Args), "the asking reply is found on an earlier page")
			}
		})
	}
}

func ptr(n int) *int { return &n }

func TestBuildRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    timeline.Query
		code agent.Code
	}{
		{"limit over the most", timeline.Query{TenantID: "demo", JobID: "j1", After: -1, Limit: timeline.MaxLimit + 1}, agent.CodeInvalid},
		{"negative limit", timeline.Query{TenantID: "demo", JobID: "j1", After: -1, Limit: -1}, agent.CodeInvalid},
		{"after before the start", timeline.Query{TenantID: "demo", JobID: "j1", After: -2}, agent.CodeInvalid},
		{"another tenant", timeline.Query{TenantID: "other", JobID: "j1", After: -1}, agent.CodeNotFound},
		{"another job", timeline.Query{TenantID: "demo", JobID: "j2", After: -1}, agent.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := timeline.Build(t.Context(), timeline.Source{Store: demoTurn()}, tc.q)
			require.Equal(t, tc.code, agent.ErrorCode(err), "%v", err)
		})
	}
}

func TestBuildOutcome(t *testing.T) {
	for _, tc := range []struct {
		name    string
		outcome *store.TurnOutcome
		req     agent.TurnRequest
		status  string
		err     *timeline.Error
		fork    *timeline.ForkOrigin
	}{
		{name: "completed", outcome: &store.TurnOutcome{Status: agent.StatusCompleted, EndedAt: at(20)}, status: "completed"},
		{name: "failed", outcome: &store.TurnOutcome{Status: agent.StatusFailed, EndedAt: at(20), Error: &agent.TurnError{Type: "ToolFailed", Message: "no"}},
			status: "failed", err: &timeline.Error{Code: "ToolFailed", Message: "no"}},
		{name: "canceled", outcome: &store.TurnOutcome{Status: agent.StatusCanceled, EndedAt: at(20)},
			status: "failed", err: &timeline.Error{Code: "canceled", Message: "the turn was canceled"}},
		{name: "retried", req: agent.TurnRequest{Channel: agent.ChannelRetry, Replay: &agent.Replay{JobID: "j0", Seq: 7}},
			status: "running", fork: &timeline.ForkOrigin{JobID: "j0", Seq: 7}},
		{name: "an eval's replay is no fork", req: agent.TurnRequest{Channel: agent.ChannelEval, Replay: &agent.Replay{JobID: "j0"}}, status: "running"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := demoTurn()
			fs.turn.Outcome, fs.turn.Request = tc.outcome, tc.req
			tl, err := timeline.Build(t.Context(), timeline.Source{Store: fs, Runs: fakeRuns{err: errors.New("visibility down")}},
				timeline.Query{TenantID: "demo", JobID: "j1", After: -1})
			require.NoError(t, err, "a visibility error leaves the runs out")
			require.Equal(t, tc.status, tl.Status)
			require.Equal(t, tc.err, tl.Error)
			require.Equal(t, tc.fork, tl.ForkedFrom)
			require.Empty(t, tl.Runs)
			if tc.outcome != nil {
				require.Equal(t, at(20), *tl.EndedAt)
				require.Equal(t, int64(20000), tl.Totals.DurationMs)
			}
		})
	}
}

func TestBuildRequest(t *testing.T) {
	fs := demoTurn()
	fs.calls = append(fs.calls, store.ModelCall{Step: 5, Attempt: 1, Model: "openai:gpt", WholeFrom: 4, DigestFrom: 2})
	for _, tc := range []struct {
		name   string
		q      timeline.RequestQuery
		code   agent.Code
		prompt string
		hidden bool
		seqs   []string
		digest string
	}{
		{name: "admin, every step whole", q: timeline.RequestQuery{Seq: 1, Admin: true}, prompt: "Be kind.", seqs: []string{"mail ana"}},
		{name: "user", q: timeline.RequestQuery{Seq: 1}, hidden: true, seqs: []string{"mail ana"}},
		{name: "a digest", q: timeline.RequestQuery{Seq: 5, Admin: true}, prompt: "Be kind.", seqs: []string{"mail ana", "and bob"},
			digest: "steps 2 to 3 described in a digest; step 1 left out"},
		{name: "a tool result", q: timeline.RequestQuery{Seq: 2}, code: agent.CodeNotFound},
		{name: "the prompt", q: timeline.RequestQuery{Seq: 0}, code: agent.CodeNotFound},
		{name: "no such step", q: timeline.RequestQuery{Seq: 99}, code: agent.CodeNotFound},
		{name: "another tenant", q: timeline.RequestQuery{TenantID: "other", Seq: 1}, code: agent.CodeNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			if q.TenantID == "" {
				q.TenantID = "demo"
			}
			q.JobID = "j1"
			req, err := timeline.BuildRequest(t.Context(), fs, q)
			if tc.code != "" {
				require.Equal(t, tc.code, agent.ErrorCode(err), "%v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.prompt, req.SystemPrompt)
			require.Equal(t, tc.hidden, req.SystemPromptHidden)
			require.Equal(t, "openai:gpt", req.Model)
			require.Equal(t, []timeline.ToolOffered{{Name: "send_mail", Description: "Sends mail."}, {Name: "calc"}}, req.Tools)
			texts := []string{}
			for _, m := range req.Messages {
				texts = append(texts, m.Content)
			}
			require.Equal(t, tc.seqs, texts)
			require.Equal(t, tc.digest, req.Digest)
		})
	}
}
