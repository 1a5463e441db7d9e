package mcp

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
)

// TestMCPSessionTask: a task as a 2025-11-25 session reads it: the same
// fold as a 2026-07-28 task's, in that version's statuses — a turn that
// did not complete, and was not cancelled, failed, with why — with ttl
// null, and a poll interval until it ends.
func TestMCPSessionTask(t *testing.T) {
	calc := &agent.ToolEvent{CallID: "c1", Name: "calc", ApprovalID: "a1", Args: []byte(`{"expression":"2+2"}`)}
	running := agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning}
	approval := agent.Event{Kind: agent.EventApprovalRequired, Tool: calc}
	waiting := agent.Event{Kind: agent.EventStatus, Status: agent.StreamWaitingApproval}
	approver := gateway.Token{Tenant: "demo", Name: "ana", Roles: []gateway.Role{gateway.RoleUser, gateway.RoleApprover}}
	user := gateway.Token{Tenant: "demo", Name: "bo", Roles: []gateway.Role{gateway.RoleUser}}
	for _, tc := range []struct {
		name            string
		events          []agent.Event
		caller          gateway.Token
		elicits         bool
		status, message string
	}{
		{name: "started", events: taskLog(running), caller: user, status: mcpTaskWorking},
		{name: "an approval the caller may give", events: taskLog(running, approval, waiting), caller: approver, elicits: true,
			status: mcpTaskInputRequired, message: "waiting for your input (1 request(s))"},
		{name: "an approval the caller may not give", events: taskLog(running, approval, waiting), caller: user, elicits: true,
			status: mcpTaskWorking, message: "waiting for a person to approve the call c1 of calc (approve it over the approvals API: approval a1, stream turn/demo/j)"},
		{name: "an approval a client that cannot be asked waits for", events: taskLog(running, approval, waiting), caller: approver,
			status: mcpTaskWorking, message: "waiting for a person to approve the call c1 of calc (approve it over the approvals API: approval a1, stream turn/demo/j)"},
		{name: "completed", caller: user, status: mcpTaskCompleted,
			events: taskLog(running, agent.Event{Kind: agent.EventToken, Text: "4"}, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCompleted})},
		{name: "failed", caller: user, status: mcpTaskFailed, message: "the turn ended failed: the model failed",
			events: taskLog(running, agent.Event{Kind: agent.EventStatus, Status: agent.StreamFailed, Error: &agent.TurnError{Message: "the model failed"}})},
		{name: "cancelled, waiting no more", caller: approver, elicits: true, status: mcpTaskCancelled, message: "the turn was cancelled: stop",
			events: taskLog(running, approval, waiting, agent.Event{Kind: agent.EventStatus, Status: agent.StreamCanceled, Error: &agent.TurnError{Message: "stop"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2025, 11, 25, 10, 0, 0, 0, time.UTC)
			task := newMCPTask("turn/demo/j", tc.events)
			s := task.sessionTask(tc.caller, mcpTaskTimes{CreatedAt: now, LastUpdatedAt: now}, tc.elicits)
			require.Equal(t, tc.status, s.Status)
			require.Equal(t, tc.message, s.StatusMessage)
			data, err := json.Marshal(mcpTaskResult{mcpSessionTask: s})
			require.NoError(t, err)
			var wire map[string]any
			require.NoError(t, json.Unmarshal(data, &wire))
			require.Contains(t, wire, "ttl")
			require.Nil(t, wire["ttl"], "kept as long as its turn")
			require.Equal(t, "2025-11-25T10:00:00Z", wire["createdAt"])
			if task.end == nil {
				require.EqualValues(t, mcpTaskPollMs, wire["pollInterval"])
			} else {
				require.NotContains(t, wire, "pollInterval")
				// tasks/result's answer is the call's: an error unless it completed.
				require.Equal(t, tc.status != mcpTaskCompleted, task.result().IsError)
			}
		})
	}
}

// TestMCPTaskOwner: a task's job id is its creator's — a hash of the
// token's tenant, issuer and subject, then a random part — and no other
// caller's: not one of another tenant, nor one with another subject of the
// same name.
func TestMCPTaskOwner(t *testing.T) {
	ana := gateway.Token{Tenant: "demo", Name: "ana", Roles: []gateway.Role{gateway.RoleUser}}
	oidcAna := gateway.Token{Tenant: "demo", Name: "ana", Issuer: "https://id.example", Subject: "u-7", Roles: []gateway.Role{gateway.RoleUser}}
	otherTenant := gateway.Token{Tenant: "rival", Name: "ana", Roles: []gateway.Role{gateway.RoleUser}}
	job := mcpTaskJob(ana)
	require.NoError(t, (&agent.TurnRequest{Version: "1.0", JobID: job, TenantID: "demo", Prompt: "hi"}).Validate(), "a valid job id")
	require.NotEqual(t, job, mcpTaskJob(ana), "a random part")
	id := contract.TurnWorkflowID("demo", job)
	require.True(t, ownsTask(ana, id))
	require.False(t, ownsTask(oidcAna, id), "another identity of the same name")
	require.False(t, ownsTask(otherTenant, contract.TurnWorkflowID("rival", job)), "another tenant's caller, whatever the job id")
	require.False(t, ownsTask(ana, contract.TurnWorkflowID("demo", "20261126-101010-abcd")), "a turn no task started")
	require.False(t, ownsTask(ana, contract.TurnWorkflowID("demo", strings.TrimSuffix(mcpTaskJobPrefix(ana), "-"))))
	require.True(t, ownsTask(oidcAna, contract.TurnWorkflowID("demo", mcpTaskJob(oidcAna))))
}

// TestMCPStartedByMCP: a workflow is a task's turn only when the MCP door
// started it: its AgentflowChannel says so.
func TestMCPStartedByMCP(t *testing.T) {
	channel := func(v any) *workflowpb.WorkflowExecutionInfo {
		p, err := converter.GetDefaultDataConverter().ToPayload(v)
		require.NoError(t, err)
		return &workflowpb.WorkflowExecutionInfo{SearchAttributes: &commonpb.SearchAttributes{
			IndexedFields: map[string]*commonpb.Payload{contract.SearchChannel.GetName(): p}}}
	}
	require.True(t, startedByMCP(channel(agent.ChannelMCP)))
	require.False(t, startedByMCP(channel(agent.ChannelHTTP)))
	require.False(t, startedByMCP(channel(7)))
	require.False(t, startedByMCP(&workflowpb.WorkflowExecutionInfo{}))
	require.False(t, startedByMCP(nil))
}

// TestMCPSessionDeclares: a 2025-11-25 session's initialize result has
// the tasks capability beside the SDK's, and each tool of its tools/list
// result says a call may be a task, the rest of each left as it was.
func TestMCPSessionDeclares(t *testing.T) {
	init := &mcp.InitializeResult{ProtocolVersion: "2025-11-25", ServerInfo: &mcp.Implementation{Name: "agentflow", Version: "v1.2.3"},
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}}
	data, err := json.Marshal(&mcpInitializeResult{init})
	require.NoError(t, err)
	var got struct {
		ProtocolVersion string
		ServerInfo      struct{ Name, Version string }
		Capabilities    map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, "2025-11-25", got.ProtocolVersion)
	require.Equal(t, "v1.2.3", got.ServerInfo.Version)
	require.JSONEq(t, `{"listChanged":true}`, string(got.Capabilities["tools"]))
	require.JSONEq(t, `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`, string(got.Capabilities["tasks"]))

	tools := &mcp.ListToolsResult{Tools: []*mcp.Tool{
		{Name: "assistant", InputSchema: mcpInputSchema},
		{Name: "reporter", InputSchema: mcpInputSchema, OutputSchema: json.RawMessage(`{"type":"object"}`)},
	}, NextCursor: "next"}
	data, err = json.Marshal(&mcpToolsResult{tools})
	require.NoError(t, err)
	var list struct {
		NextCursor string
		Tools      []map[string]json.RawMessage
	}
	require.NoError(t, json.Unmarshal(data, &list))
	require.Equal(t, "next", list.NextCursor)
	require.Len(t, list.Tools, 2)
	for _, tool := range list.Tools {
		require.JSONEq(t, `{"taskSupport":"optional"}`, string(tool["execution"]))
		require.JSONEq(t, string(mcpInputSchema), string(tool["inputSchema"]))
	}
	require.JSONEq(t, `{"type":"object"}`, string(list.Tools[1]["outputSchema"]))
}

// TestMCPCursor: a tasks/list cursor gives back its page token to the
// listing it was made for, and nothing to another's, nor for a string
// that is not one.
func TestMCPCursor(t *testing.T) {
	ana, bo := mcpTaskJobPrefix(gateway.Token{Tenant: "demo", Name: "ana"}), mcpTaskJobPrefix(gateway.Token{Tenant: "demo", Name: "bo"})
	token := []byte(`{"CloseTime":"2026-11-27T10:00:00Z","RunID":"r"}`)
	cursor := mcpCursor(ana, token)
	got, ok := parseMCPCursor(ana, cursor)
	require.True(t, ok)
	require.Equal(t, token, got)
	for name, c := range map[string]string{"another caller's": cursor, "not base64": "%%%", "empty": "", "too short": "AAAA",
		"a token alone": base64.RawURLEncoding.EncodeToString(token)} {
		prefix := ana
		if name == "another caller's" {
			prefix = bo
		}
		_, ok := parseMCPCursor(prefix, c)
		require.False(t, ok, name)
	}
}

// FuzzMCPCursor: any cursor a client sends is a page token of the
// caller's listing, which makes that very cursor again, or refused; never
// a panic.
func FuzzMCPCursor(f *testing.F) {
	prefix := mcpTaskJobPrefix(gateway.Token{Tenant: "demo", Name: "ana"})
	for _, s := range []string{mcpCursor(prefix, []byte("t")), "", "%%%", "AAAAAAAAAAAA", "bm90IGEgdG9rZW4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cursor string) {
		token, ok := parseMCPCursor(prefix, cursor)
		if ok {
			require.NotEmpty(t, token)
			require.Equal(t, cursor, mcpCursor(prefix, token))
		}
	})
}

// FuzzMCPTaskRequest: any params.task of a tools/call is an object whose
// ttl, when given, is a number of milliseconds, 0 or more, or an error
// that says what is wrong; never a panic.
func FuzzMCPTaskRequest(f *testing.F) {
	for _, s := range []string{`{"ttl":60000}`, `{}`, ` {"ttl":0} `, `{"ttl":-1}`, `{"ttl":"60000"}`, `{"ttl":1e400}`,
		`{"ttl":null}`, `{"ttl":1,"x":{}}`, `[]`, `null`, `7`, ``, `{`, `{"ttl":1} {"ttl":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := decodeMCPTaskRequest(raw)
		if err != nil {
			require.True(t, strings.HasPrefix(err.Error(), "params.task"), err.Error())
			return
		}
		if r.TTL != nil {
			require.GreaterOrEqual(t, *r.TTL, 0.0)
			require.False(t, math.IsInf(*r.TTL, 0) || math.IsNaN(*r.TTL))
		}
	})
}
