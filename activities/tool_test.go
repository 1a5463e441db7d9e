package activities

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/effects"
)

func TestExecuteToolRunsToolOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	call := agent.ToolCall{ID: "call-1", Name: "tally", Arguments: `{}`}
	tests := []struct {
		name     string
		stored   *agent.Message // step 2 before the first ExecuteTool; nil: none
		want     contract.ExecuteToolResult
		wantRuns int32
	}{
		{
			name:     "result of the first run",
			want:     contract.ExecuteToolResult{CallID: "call-1", Status: agent.ToolOK, Preview: "run 1"},
			wantRuns: 1,
		},
		{
			name:   "result stored by an attempt that did not report",
			stored: &agent.Message{Role: agent.RoleTool, ToolCallID: "call-1", Name: "tally", Content: "run 41"},
			want:   contract.ExecuteToolResult{CallID: "call-1", Status: agent.ToolOK, Preview: "run 41"},
		},
		{
			name:   "error result stored",
			stored: &agent.Message{Role: agent.RoleTool, ToolCallID: "call-1", Name: "tally", Content: errorPrefix + "no such thing"},
			want:   contract.ExecuteToolResult{CallID: "call-1", Status: agent.ToolError, Preview: errorPrefix + "no such thing"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "count")
			require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1,
				agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			if tt.stored != nil {
				require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 2, *tt.stored))
			}
			in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
			h.toolRuns.Store(0)

			// The second call is a retry of an attempt whose completion was
			// lost: it must not run the tool again.
			for range 2 {
				var res contract.ExecuteToolResult
				h.execute(t, contract.ExecuteTool, in, &res)
				require.Equal(t, tt.want, res)
			}
			require.Equal(t, tt.wantRuns, h.toolRuns.Load())
		})
	}
}

// TestExecutePipelineFetchesOnce: a retried tool activity whose work
// finished returns the stored result and does not call the API again,
// with the pipeline cache off: results are keyed by job and step.
func TestExecutePipelineFetchesOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	call := agent.ToolCall{ID: "call-1", Name: "execute_pipeline",
		Arguments: `{"session_id":"s","pipeline":[{"step":"http_request","url":"` + h.api.URL + `/rows"},{"step":"table_sort","field":"price"}]}`}
	run := func(job string) contract.ExecuteToolResult {
		ag := h.loadAgent(t, job, "rows")
		require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
		in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
		var first, again contract.ExecuteToolResult
		h.execute(t, contract.ExecuteTool, in, &first)
		h.execute(t, contract.ExecuteTool, in, &again)
		require.Equal(t, first, again)
		return first
	}

	res := run(randomJob())
	require.EqualValues(t, 1, h.apiHits.Load())
	require.Equal(t, agent.ToolOK, res.Status)
	require.False(t, res.CacheHit)
	require.NotNil(t, res.Data)
	require.Equal(t, agent.DataDataset, res.Data.Type)
	require.Equal(t, 3, res.Data.RowCount)
	data, err := h.store.Data(ctx, "demo", res.Data.Ref)
	require.NoError(t, err)
	require.JSONEq(t, `[{"id":2,"price":100},{"id":3,"price":200},{"id":1,"price":300}]`, string(data))

	// Another job is another call: with the cache off it fetches.
	run(randomJob())
	require.EqualValues(t, 2, h.apiHits.Load())
}

// TestToolData: what the model reads of a tool's output and data, and
// what is kept by ref (the harness shows data up to 512 bytes).
func TestToolData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	big := `{"s":"` + strings.Repeat("x", 600) + `"}`
	bigRows := `[` + strings.Repeat(`{"s":"`+strings.Repeat("y", 100)+`"},`, 9) + `{"s":"z"}]`
	tests := []struct {
		name, args  string
		wantPreview []string // in order; the first is the start
		notPreview  string
		wantData    *agent.DataPreview // without Ref and Sample; nil: nothing kept
	}{
		{name: "text only", args: `{"text":"done"}`, wantPreview: []string{"done"}},
		{name: "data the text says all of", args: `{"text":"42","data":{"result":"42"}}`, wantPreview: []string{"42"}, notPreview: "result"},
		{name: "data shown", args: `{"text":"the sum","data":{"a":1},"show":true}`, wantPreview: []string{"the sum\n\n{\"a\":1}"}},
		{name: "data without text", args: `{"data":{"a":1}}`, wantPreview: []string{`{"a":1}`}},
		{name: "a dataset is kept", args: `{"text":"2 rows","data":[{"a":1},{"a":2}],"show":true}`,
			wantPreview: []string{"2 rows\n\ndata: cas://sha256:", " (dataset, 2 rows; fields: a number). Pass the ref as input_ref", `[{"a":1},{"a":2}]`},
			wantData:    &agent.DataPreview{Type: agent.DataDataset, RowCount: 2, Fields: []agent.Field{{Name: "a", Type: "number"}}, Bytes: 17}},
		{name: "a large document", args: `{"text":"big","data":` + big + `,"show":true}`,
			wantPreview: []string{"big\n\ndata: cas://sha256:", "(document). Pass the ref", "It is 608 bytes."}, notPreview: "xxx",
			wantData: &agent.DataPreview{Type: agent.DataDocument, Bytes: 608}},
		{name: "a large dataset", args: `{"text":"rows","data":` + bigRows + `,"show":true}`,
			wantPreview: []string{"rows\n\ndata: cas://sha256:", "(dataset, 10 rows; fields: s string)", "It is 992 bytes; the first 3 rows: [{"}, notPreview: `"z"`,
			wantData: &agent.DataPreview{Type: agent.DataDataset, RowCount: 10, Fields: []agent.Field{{Name: "s", Type: "string"}}, Bytes: 992}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "data")
			call := agent.ToolCall{ID: "call-1", Name: "echo_data", Arguments: tt.args}
			require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			var res contract.ExecuteToolResult
			h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}, &res)
			require.Equal(t, agent.ToolOK, res.Status, res.Preview)

			require.True(t, strings.HasPrefix(res.Preview, tt.wantPreview[0]), res.Preview)
			rest := res.Preview
			for _, part := range tt.wantPreview {
				i := strings.Index(rest, part)
				require.GreaterOrEqual(t, i, 0, "%q in order in %q", part, res.Preview)
				rest = rest[i+len(part):]
			}
			if tt.notPreview != "" {
				require.NotContains(t, res.Preview, tt.notPreview)
			}
			if tt.wantData == nil {
				require.Nil(t, res.Data)
				return
			}
			require.NotNil(t, res.Data)
			got := *res.Data
			require.True(t, strings.HasPrefix(got.Ref, agent.CASRefPrefix), got.Ref)
			require.Contains(t, res.Preview, got.Ref)
			stored, err := h.store.Data(ctx, "demo", got.Ref)
			require.NoError(t, err)
			require.JSONEq(t, tt.args[strings.Index(tt.args, `"data":`)+7:strings.LastIndex(tt.args, `,"show"`)], string(stored))
			_, err = h.store.Data(ctx, "acme", got.Ref)
			require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
			got.Ref, got.Sample = "", nil
			require.Equal(t, *tt.wantData, got)
		})
	}
}

// TestReplayCallNeverRunsLive: a call of a turn whose workflow runs it as
// a replay (and so asked no one to approve it) is answered from the
// recording; when none is found it diverges, and the tool does not run.
func TestReplayCallNeverRunsLive(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	job := randomJob()
	ag := h.loadAgent(t, job, "data")
	call := agent.ToolCall{ID: "call-1", Name: "echo_data", Arguments: `{"text":"ran live"}`}
	require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
	var res contract.ExecuteToolResult
	h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version,
		Seq: 2, Call: call, Replay: true}, &res)
	require.Equal(t, agent.ToolError, res.Status)
	require.Contains(t, res.Preview, agent.NoRecordedResult)
	require.NotContains(t, res.Preview, "ran live")
}

// TestResendAfterUnknown: a call whose first delivery's outcome is
// unknown (an earlier attempt's intent stands), and that a person then
// decided on sending again: approved, it is sent once more, as a delivery
// of its own in the ledger under the decision's approval id, and its
// result replaces the unknown one; rejected, nothing is sent and the
// model reads the unknown outcome with the decision. A retried attempt
// returns what the first stored, and sends nothing.
func TestResendAfterUnknown(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	call := agent.ToolCall{ID: "call-1", Name: "execute_pipeline",
		Arguments: `{"session_id":"s","pipeline":[{"step":"http_request","method":"POST","url":"` + h.api.URL + `/rows"}]}`}
	tests := []struct {
		name   string
		resend contract.Resend
		status string
		sent   int32
		stored string // what the model reads, in part
	}{
		{
			name:   "approved: sent once more",
			resend: contract.Resend{ApprovalID: "apr_approved", Approved: true, Message: "ana approved sending it again"},
			status: agent.ToolOK, sent: 1, stored: `"price":300`,
		},
		{
			name:   "rejected: not sent",
			resend: contract.Resend{ApprovalID: "apr_rejected", Message: "bob was asked whether to send it again and decided not to: it went through"},
			status: agent.ToolUnknown,
			stored: `"decision":"bob was asked whether to send it again and decided not to: it went through"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "rows")
			require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			// The call's first attempt was lost in flight: its intent stands.
			first := effects.Key{TenantID: "demo", JobID: job, Seq: 2}
			_, ok, err := h.store.Intend(ctx, first, "lost-attempt", "POST "+h.api.URL+"/rows")
			require.NoError(t, err)
			require.True(t, ok)
			in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
			var unknown contract.ExecuteToolResult
			h.execute(t, contract.ExecuteTool, in, &unknown)
			require.Equal(t, agent.ToolUnknown, unknown.Status)
			require.Contains(t, unknown.Unknown, "was sending POST "+h.api.URL+"/rows")

			hits := h.apiHits.Load()
			resend := tt.resend
			in.Resend = &resend
			var res, again contract.ExecuteToolResult
			h.execute(t, contract.ExecuteTool, in, &res)
			h.execute(t, contract.ExecuteTool, in, &again)
			require.Equal(t, res, again)
			require.Equal(t, tt.status, res.Status)
			require.Equal(t, hits+tt.sent, h.apiHits.Load())
			step, err := h.store.Step(ctx, "demo", job, 2)
			require.NoError(t, err)
			require.Contains(t, step.Content, tt.stored)

			// The second delivery's intent is its own, under the decision.
			prior, ok, err := h.store.Intend(ctx, effects.Key{TenantID: "demo", JobID: job, Seq: 2, Resend: tt.resend.ApprovalID}, "probe", "POST x")
			require.NoError(t, err)
			require.Equal(t, !tt.resend.Approved, ok, "an intent is recorded for the re-send only when it is approved")
			if tt.resend.Approved {
				require.True(t, prior.Delivered)
			}
		})
	}
}
