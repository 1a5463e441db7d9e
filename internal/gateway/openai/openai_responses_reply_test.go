package openai

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// responseLog is a turn's log: a tool call, then an answer whose first
// attempt is cut and retried.
func responseLog() []agent.Event {
	usage := &agent.Usage{PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15}
	tool := &agent.ToolEvent{CallID: "c1", Name: "calculator", Args: json.RawMessage(`{"expression":"3+4"}`)}
	ended := *tool
	ended.Status, ended.Output = "ok", "7"
	evs := []agent.Event{
		{Kind: agent.EventStatus, Status: agent.StreamRunning},
		{Kind: agent.EventUsage, Usage: usage},
		{Kind: agent.EventStepFinish, FinishReason: agent.FinishToolCalls},
		{Kind: agent.EventToolStart, Tool: tool},
		{Kind: agent.EventToolEnd, Tool: &ended},
		{Kind: agent.EventToken, Text: "The resu"},
		{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 6, Attempt: 2},
		{Kind: agent.EventReasoning, Text: "Add them."},
		{Kind: agent.EventToken, Text: "The result "},
		{Kind: agent.EventToken, Text: "is 7."},
		{Kind: agent.EventUsage, Usage: usage},
		{Kind: agent.EventStepFinish, FinishReason: agent.FinishStop},
		{Kind: agent.EventToken, Text: "not this turn's", Child: &agent.ChildEvent{CallID: "c9"}},
		{Kind: agent.EventStatus, Status: agent.StreamCompleted},
	}
	for i := range evs {
		evs[i].Index = int64(i + 1)
	}
	return evs
}

// streamOf is the stream of the log read by one client: its events
// numbered after after.
func streamOf(log []agent.Event, after int64) (*responseFold, []responseEvent) {
	f := newResponseFold(newResponseObject("turn/demo/j", "assistant", 1))
	var out []responseEvent
	for _, ev := range append(f.start(), foldAll(f, log)...) {
		if ev.SequenceNumber > after {
			out = append(out, ev)
		}
	}
	return f, out
}

func foldAll(f *responseFold, log []agent.Event) []responseEvent {
	var out []responseEvent
	for _, e := range log {
		out = append(out, f.add(e)...)
	}
	return out
}

// TestResponseFold: a turn's log as a response: the tool call an
// mcp_call item, the retried answer once without the voided text, the
// reasoning its own item, the usage summed; sequence numbers rise from
// the log's indexes; and a stream resumed after any of them is exactly
// the rest.
func TestResponseFold(t *testing.T) {
	f, all := streamOf(responseLog(), -1)
	require.Equal(t, respCompleted, f.resp.Status)
	require.Len(t, f.resp.Output, 3)
	require.Equal(t, "mcp_call", f.resp.Output[0].Type)
	require.Equal(t, "7", *f.resp.Output[0].Output)
	require.Equal(t, respCompleted, f.resp.Output[0].Status)
	require.Equal(t, "reasoning", f.resp.Output[1].Type)
	require.Equal(t, "Add them.", f.resp.Output[1].Content[0].Text)
	require.Equal(t, "message", f.resp.Output[2].Type)
	require.Equal(t, "The result is 7.", f.resp.Output[2].Content[0].Text)
	require.Equal(t, 30, f.resp.Usage.TotalTokens)

	var types []string
	text := ""
	for i, ev := range all {
		types = append(types, ev.Type)
		if i > 0 {
			require.Greater(t, ev.SequenceNumber, all[i-1].SequenceNumber)
		}
		if ev.Type == "response.output_text.delta" {
			text += *ev.Delta
		}
	}
	require.Equal(t, "The result is 7.", text)
	require.Equal(t, []string{"response.created", "response.in_progress",
		"response.output_item.added", "response.mcp_call.in_progress", "response.mcp_call.completed", "response.output_item.done",
		"response.output_item.added", "response.reasoning_text.delta", "response.reasoning_text.done", "response.output_item.done",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}, types)
	require.Equal(t, int64(4*seqStride), all[2].SequenceNumber, "the tool_start at index 4 gives the events from 400")

	for i, ev := range all {
		_, rest := streamOf(responseLog(), ev.SequenceNumber)
		if i == len(all)-1 {
			require.Empty(t, rest, "nothing after the last")
			continue
		}
		require.Equal(t, all[i+1:], rest, "resumed after %d", ev.SequenceNumber)
	}
}

// TestResponseFoldEnds: a failed turn fails its response with the turn's
// error, a cancelled one is cancelled, and an answer cut by its length is
// incomplete.
func TestResponseFoldEnds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		last   []agent.Event
		status string
		typ    string
	}{
		{"failed", []agent.Event{{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: &agent.TurnError{Type: agent.ErrTypeMaxIterations, Message: "too many"}}},
			respFailed, "response.failed"},
		{"cancelled", []agent.Event{{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: &agent.TurnError{Type: agent.ErrTypeCanceled, Message: "cancelled"}}},
			respCancelled, "response.failed"},
		{"cut", []agent.Event{{Kind: agent.EventToken, Text: "abc"}, {Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 1}},
			{Kind: agent.EventStepFinish, FinishReason: agent.FinishLength}, {Kind: agent.EventStatus, Status: agent.StreamCompleted}},
			respIncomplete, "response.incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.last {
				tc.last[i].Index = int64(i + 1)
			}
			f, all := streamOf(tc.last, -1)
			require.Equal(t, tc.status, f.resp.Status)
			end := all[len(all)-1]
			require.Equal(t, tc.typ, end.Type)
			require.Equal(t, tc.status, end.Response.Status)
			if tc.status != respIncomplete {
				require.NotNil(t, f.resp.Error)
				require.NotEmpty(t, f.resp.Error.Message)
			}
		})
	}
}

// TestResponseFoldApproval: a call that waits for approval is an
// mcp_approval_request item whose id is bound to the call's approval;
// the fold knows it asked, that the turn waits (where a whole response
// pauses) unless the request being answered decided it, and once the log
// shows the decision, that it was decided; the approved call then runs
// as an mcp_call item.
func TestResponseFoldApproval(t *testing.T) {
	tool := &agent.ToolEvent{CallID: "c1", Name: "careful_calculator", Args: json.RawMessage(`{"expression":"2+2"}`)}
	asked := *tool
	asked.ApprovalID = "apr_0123456789abcdef01234567"
	ended := *tool
	ended.Status, ended.Output = "ok", "4"
	log := []agent.Event{
		{Kind: agent.EventStatus, Status: agent.StreamRunning},
		{Kind: agent.EventApprovalRequired, Tool: &asked},
		{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval},
	}
	decided := []agent.Event{
		{Kind: agent.EventApprovalDecided, Tool: tool, Approval: &agent.ApprovalEvent{Outcome: "approved", Approver: "uma", Via: "update"}},
		{Kind: agent.EventToolStart, Tool: tool},
		{Kind: agent.EventToolEnd, Tool: &ended},
		{Kind: agent.EventToken, Text: "The result is 4."},
		{Kind: agent.EventUsage, Usage: &agent.Usage{TotalTokens: 3}},
		{Kind: agent.EventStatus, Status: agent.StreamCompleted},
	}
	all := append(log, decided...)
	for i := range all {
		all[i].Index = int64(i + 1)
	}

	f, events := streamOf(all[:len(log)], -1)
	require.Equal(t, respInProgress, f.resp.Status)
	require.Len(t, f.resp.Output, 1)
	item := f.resp.Output[0]
	require.Equal(t, "mcp_approval_request", item.Type)
	require.Equal(t, "mcpr_0123456789abcdef01234567", item.ID)
	require.Equal(t, "careful_calculator", item.Name)
	require.JSONEq(t, `{"expression":"2+2"}`, *item.Arguments)
	require.Equal(t, "assistant", item.ServerLabel, "the agent serves its tools")
	require.Equal(t, &approvalAsked{callID: "c1", approvalID: asked.ApprovalID}, f.approvals[item.ID])
	require.Equal(t, []string{"response.created", "response.in_progress", "response.output_item.added", "response.output_item.done"}, eventTypes(events))
	require.True(t, f.waits(), "a whole response pauses here")

	// A fold of a request that decided the approval does not pause on it.
	settled := newResponseFold(newResponseObject("turn/demo/j", "assistant", 1))
	settled.settled[item.ID] = true
	foldAll(settled, all[:len(log)])
	require.False(t, settled.waits())

	f, _ = streamOf(all, -1)
	require.True(t, f.approvals[item.ID].decided)
	require.False(t, f.waits())
	require.Equal(t, respCompleted, f.resp.Status)
	require.Equal(t, []string{"mcp_approval_request", "mcp_call", "message"}, []string{f.resp.Output[0].Type, f.resp.Output[1].Type, f.resp.Output[2].Type})
	require.Equal(t, "4", *f.resp.Output[1].Output)

	// A call of a turn from before approvals were bound: its call id.
	require.Equal(t, "mcpr_c1", approvalItemID(tool))
}

func eventTypes(events []responseEvent) []string {
	out := make([]string, 0, len(events))
	for _, ev := range events {
		out = append(out, ev.Type)
	}
	return out
}
