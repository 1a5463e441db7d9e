package mcp

import (
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// taskLog numbers events as the turn turn/demo/j logs them.
func taskLog(events ...agent.Event) []agent.Event {
	for i := range events {
		events[i].Index, events[i].StreamID = int64(i+1), "turn/demo/j"
	}
	return events
}

// TestMCPTaskFold: a task's status, message, input requests and result,
// as its turn's projection makes them, for callers with other roles and
// clients that can be asked or not.
func TestMCPTaskFold(t *testing.T) {
	calc := &agent.ToolEvent{CallID: "c1", Name: "calc", ApprovalID: "a1", Args: []byte(`{"expression":"2+2"}`)}
	ask := &agent.ToolEvent{CallID: "q1", Name: "ask_user"}
	running := agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}
	approval := agent.Event{Kind: agent.EventApprovalRequired, Tool: calc}
	waiting := agent.Event{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval}
	question := agent.Event{Kind: agent.EventQuestion, Tool: ask, Question: &agent.QuestionEvent{Text: "Which?", Choices: []string{"a", "b"}, Role: "user"}}
	approver := gateway.Token{Tenant: "demo", Name: "ana", Roles: []gateway.Role{gateway.RoleUser, gateway.RoleApprover}}
	user := gateway.Token{Tenant: "demo", Name: "bo", Roles: []gateway.Role{gateway.RoleUser}}
	for _, tc := range []struct {
		name    string
		events  []agent.Event
		caller  gateway.Token
		elicits bool
		status  string
		message string
		inputs  []string
		text    string // the result's text, once completed
	}{
		{name: "an approval asked of an approver", events: taskLog(running, approval, waiting), caller: approver, elicits: true,
			status: mcpTaskInputRequired, message: "waiting for your input (1 request(s))", inputs: []string{"approval-2"}},
		{name: "an approval a client that cannot be asked waits for", events: taskLog(running, approval, waiting), caller: approver,
			status: mcpTaskWorking, message: "waiting for a person to approve the call c1 of calc (approve it over the approvals API: approval a1, stream turn/demo/j)"},
		{name: "an approval a user may not give", events: taskLog(running, approval, waiting), caller: user, elicits: true,
			status: mcpTaskWorking, message: "waiting for a person to approve the call c1 of calc (approve it over the approvals API: approval a1, stream turn/demo/j)"},
		{name: "an approval decided", caller: approver, elicits: true, status: mcpTaskWorking, message: "the call c1 of calc was approved",
			events: taskLog(running, approval, waiting, agent.Event{Kind: agent.EventApprovalDecided, Tool: calc, Approval: &agent.ApprovalEvent{Outcome: "approved"}})},
		{name: "a question of the caller's role", events: taskLog(running, question), caller: user, elicits: true,
			status: mcpTaskInputRequired, message: "waiting for your input (1 request(s))", inputs: []string{"question-2"}},
		{name: "a question answered", caller: user, elicits: true, status: mcpTaskWorking, message: "the question q1 was answered",
			events: taskLog(running, question, agent.Event{Kind: agent.EventQuestionAnswered, Tool: ask, Question: &agent.QuestionEvent{Outcome: "answered"}})},
		{name: "the answer to an approval does not settle a question of the same call", caller: user, elicits: true,
			status: mcpTaskInputRequired, message: "waiting for your input (1 request(s))", inputs: []string{"question-2"},
			events: taskLog(running, question, agent.Event{Kind: agent.EventApprovalDecided, Tool: ask, Approval: &agent.ApprovalEvent{Outcome: "approved"}})},
		{name: "a tool's progress", caller: user, status: mcpTaskWorking, message: "the tool gh: page 2 of 4",
			events: taskLog(running, agent.Event{Kind: agent.EventToolStart, Tool: &agent.ToolEvent{CallID: "g", Name: "gh"}},
				agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: "g", Name: "gh", Message: "page 2 of 4"}})},
		{name: "a retried model call", caller: user, status: mcpTaskWorking, message: "the model call is retried",
			events: taskLog(running, agent.Event{Kind: agent.EventToken, Text: "wrong"}, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2})},
		{name: "completed after a retry: only the retry's text", caller: user, status: mcpTaskCompleted, text: "4",
			events: taskLog(running, agent.Event{Kind: agent.EventToken, Text: "wrong"}, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 2},
				agent.Event{Kind: agent.EventToken, Text: "4"}, agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{}},
				agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})},
		{name: "cancelled, waiting no more", caller: approver, elicits: true, status: mcpTaskCancelled, message: "the turn was cancelled: stop",
			events: taskLog(running, approval, waiting, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: &agent.TurnError{Message: "stop"}})},
		{name: "failed", caller: user, status: mcpTaskCompleted, message: "the turn ended failed",
			events: taskLog(running, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: &agent.TurnError{Message: "the model failed"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
			s := newMCPTask("turn/demo/j", tc.events).state(tc.caller, mcpTaskTimes{CreatedAt: now, LastUpdatedAt: now}, "complete", tc.elicits)
			require.Equal(t, tc.status, s.Status)
			require.Equal(t, tc.message, s.StatusMessage)
			var keys []string
			for key := range s.InputRequests {
				keys = append(keys, key)
			}
			slices.Sort(keys)
			require.Equal(t, tc.inputs, keys)
			if tc.text != "" {
				require.False(t, s.Result.IsError)
				require.Equal(t, tc.text, s.Result.Content[0].(*mcp.TextContent).Text)
			}
		})
	}
}

// TestMCPProgress: a call's progress notifications, from its turn's Live
// projection: a preview of the text as it streams, at most every
// mcpPreviewEvery; a retried model call, after which the preview shows
// the retry's text only; a tool's progress; an approval asked of the
// client.
func TestMCPProgress(t *testing.T) {
	calc := &agent.ToolEvent{CallID: "c1", Name: "calc", ApprovalID: "a1"}
	p := newMCPProgress(nil, nil, mcpWording{elicits: true, caller: gateway.Token{Tenant: "demo", Roles: []gateway.Role{gateway.RoleApprover}}})
	events := taskLog(
		agent.Event{Kind: agent.EventToken, Text: "Hel"},
		agent.Event{Kind: agent.EventToken, Text: "lo"},
		agent.Event{Kind: agent.EventStatus, Status: agent.StreamRetrying, VoidFrom: 1},
		agent.Event{Kind: agent.EventToken, Text: "Hi"},
		agent.Event{Kind: agent.EventToolProgress, Tool: &agent.ToolEvent{CallID: "g", Name: "gh", Message: "page 2 of 4"}},
		agent.Event{Kind: agent.EventApprovalRequired, Tool: calc},
	)
	require.Equal(t, []string{"Hel"}, p.messages(events[0]))
	require.Empty(t, p.messages(events[1]), "within mcpPreviewEvery of the last preview")
	require.Equal(t, []string{"the model call is retried"}, p.messages(events[2]))
	p.preview = time.Time{}
	require.Equal(t, []string{"Hi"}, p.messages(events[3]), "the retry's text, not the void attempt's")
	require.Equal(t, []string{"the tool gh: page 2 of 4"}, p.messages(events[4]))
	require.Equal(t, []string{"asking you to approve the call c1 of calc"}, p.messages(events[5]))
}
