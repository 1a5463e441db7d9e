package activities

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// resultBytes is the size of an activity result as the worker sends it.
func resultBytes(t *testing.T, v any) int {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayloads(v)
	require.NoError(t, err)
	return proto.Size(p)
}

// TestLargeRowsArePreviewed: a tool whose data has one row of megabytes
// returns a result of a few kilobytes: the row is kept by ref and cut in
// the preview, whoever made the preview; the API is fetched once, also
// when the attempt is retried.
func TestLargeRowsArePreviewed(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	ctx := t.Context()
	tests := []struct {
		name, tool, args string
		rowBytes         int
		fetches          int32
	}{
		{name: "a 9 MiB row fetched by execute_pipeline", tool: "execute_pipeline", rowBytes: 9 << 20, fetches: 1,
			args: `{"session_id":"s","pipeline":[{"step":"http_request","url":"` + h.api.URL + `/big-row?bytes=9437184"}]}`},
		{name: "a 3 MiB row fetched by execute_pipeline", tool: "execute_pipeline", rowBytes: 3 << 20, fetches: 1,
			args: `{"session_id":"s","pipeline":[{"step":"http_request","url":"` + h.api.URL + `/big-row?bytes=3145728"}]}`},
		{name: "a 3 MiB row in a tool's own preview", tool: "own_preview", rowBytes: 3 << 20, args: `{"bytes":3145728}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "rows")
			call := agent.ToolCall{ID: "call-1", Name: tt.tool, Arguments: tt.args}
			require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
			in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
			before := h.apiHits.Load()
			var res, again contract.ExecuteToolResult
			h.execute(t, contract.ExecuteTool, in, &res)
			h.execute(t, contract.ExecuteTool, in, &again)
			// A retry returns the stored result (JSONB orders the sample's keys its way).
			first, err := json.Marshal(res)
			require.NoError(t, err)
			second, err := json.Marshal(again)
			require.NoError(t, err)
			require.JSONEq(t, string(first), string(second), "a retry returns the stored result")
			require.Equal(t, tt.fetches, h.apiHits.Load()-before)

			require.Equal(t, agent.ToolOK, res.Status, res.Preview)
			require.Less(t, resultBytes(t, res), 8<<10, "the result is kilobytes, not megabytes")
			require.NotNil(t, res.Data)
			require.Equal(t, 1, res.Data.RowCount)
			require.Len(t, res.Data.Sample, 1)
			var row map[string]any
			require.NoError(t, json.Unmarshal(res.Data.Sample[0], &row))
			require.Contains(t, row["_cut"], fmt.Sprintf("the row is %d.0 MiB; it was cut to fit the preview", tt.rowBytes>>20))
			require.EqualValues(t, 1, row["id"])

			// The data behind the ref is whole.
			data, err := h.store.Data(ctx, "demo", res.Data.Ref)
			require.NoError(t, err)
			require.InDelta(t, tt.rowBytes, len(data), 64)

			// What the model reads is as small.
			steps, err := h.store.Steps(ctx, "demo", job)
			require.NoError(t, err)
			require.Less(t, len(steps[2].Content), 8<<10)
			require.Contains(t, steps[2].Content, "it was cut to fit the preview")
		})
	}
}

// TestResultOverBudget: a result over the payload budget is never
// returned. A tool's becomes the tool's error, which the model reads; a
// model reply fails the call for good, saying what was too large; a
// result that cannot be made to fit fails for good.
func TestResultOverBudget(t *testing.T) {
	t.Parallel()
	h := newHarness(t, `
rules:
  - name: long
    when: {user: '^long'}
    reply: {text: '`+strings.Repeat("word ", 6000)+`end'}
  - reply: {text: 'short'}
`, func(d *Deps) { d.MaxResultBytes, d.PreviewBytes = 16<<10, 64<<10 })
	ctx := t.Context()

	t.Run("a tool's result is its error", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "text")
		call := agent.ToolCall{ID: "call-1", Name: "echo_data", Arguments: `{"text":"` + strings.Repeat("t", 20000) + `"}`}
		require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
		in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
		var res, again contract.ExecuteToolResult
		h.execute(t, contract.ExecuteTool, in, &res)
		h.execute(t, contract.ExecuteTool, in, &again)
		require.Equal(t, res, again)
		require.Equal(t, agent.ToolError, res.Status)
		require.Regexp(t, `^error: the tool's result is 19\.[0-9] KiB, 19\.[0-9] KiB of it in preview; the limit is 16 KiB$`, res.Preview)
		steps, err := h.store.Steps(ctx, "demo", job)
		require.NoError(t, err)
		require.Equal(t, res.Preview, steps[2].Content, "the model reads the same")
	})

	t.Run("a model reply fails the call for good", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "long answer please")
		_, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.True(t, app.NonRetryable())
		require.Equal(t, agent.ErrTypeModelRejected, app.Type())
		require.Regexp(t, `^the model's reply is 29\.[0-9] KiB, 29\.[0-9] KiB of it in content; the limit is 16 KiB$`, app.Message())
		require.Equal(t, 1, h.model.Served("long"), "the model was called once")
	})

	t.Run("a result that cannot fit fails for good", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "id")
		call := agent.ToolCall{ID: strings.Repeat("c", 20000), Name: "tally", Arguments: `{}`}
		require.NoError(t, h.store.PutStep(ctx, "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
		in := contract.ExecuteToolInput{TenantID: "demo", JobID: job, AgentID: ag.ID, AgentVersion: ag.Version, Seq: 2, Call: call}
		_, err := h.env.ExecuteActivity(contract.ExecuteTool, in)
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.True(t, app.NonRetryable())
		require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
		require.Regexp(t, `^the tool's result is 19\.[0-9] KiB, 19\.[0-9] KiB of it in call_id; the limit is 16 KiB$`, app.Message())
	})

	t.Run("small results pass", func(t *testing.T) {
		job := randomJob()
		ag := h.loadAgent(t, job, "hi")
		var res contract.CallModelResult
		h.execute(t, contract.CallModel, callModelInput(job, ag), &res)
		require.Equal(t, "short", res.Content)
	})
}

func TestLargestPart(t *testing.T) {
	big := strings.Repeat("x", 1000)
	for _, tt := range []struct {
		json, want string
	}{
		{`{"a":"` + big + `","b":1}`, "a"},
		{`{"data":{"ref":"r","sample":["` + big + `"]},"preview":"p"}`, "data.sample[0]"},
		{`{"tool_calls":[{"id":"1","arguments":"s"},{"id":"2","arguments":"` + big + `"}]}`, "tool_calls[1].arguments"},
		{`{"":{"` + big + `":1}}`, big},
		{`"` + big + `"`, ""},
		{`{}`, ""},
		{`{"a":`, ""},
	} {
		got, _ := largestPart([]byte(tt.json), 4)
		require.Equal(t, tt.want, got, tt.json)
	}
}
