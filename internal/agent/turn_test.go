package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTurnRequestValidate(t *testing.T) {
	valid := func() TurnRequest { return TurnRequest{TenantID: "demo", Prompt: "hi", JobID: "job-1"} }
	tests := []struct {
		name    string
		mutate  func(*TurnRequest)
		wantErr string
	}{
		{"valid", func(*TurnRequest) {}, ""},
		{"minor version", func(r *TurnRequest) { r.Version = "1.7" }, ""},
		{"job id with slashes", func(r *TurnRequest) { r.JobID = "turn/demo/x" }, ""},
		{"unknown major", func(r *TurnRequest) { r.Version = "2.0" }, `version "2.0" is not supported`},
		{"missing tenant", func(r *TurnRequest) { r.TenantID = "" }, "tenant_id is required"},
		{"blank prompt", func(r *TurnRequest) { r.Prompt = " \n" }, "prompt is required"},
		{"huge prompt", func(r *TurnRequest) { r.Prompt = strings.Repeat("x", MaxPromptBytes+1) }, "the limit is"},
		{"bad utf8", func(r *TurnRequest) { r.Prompt = "\xff" }, "not valid UTF-8"},
		{"tenant with slash", func(r *TurnRequest) { r.TenantID = "a/b" }, `tenant_id "a/b" may not contain '/'`},
		{"agent with space", func(r *TurnRequest) { r.AgentID = "my agent" }, "agent_id"},
		{"long session", func(r *TurnRequest) { r.SessionID = strings.Repeat("s", MaxKeyLength+1) }, "session_id is"},
		{"history", func(r *TurnRequest) { r.History = "everything" }, `history "everything"`},
		{"negative timeout", func(r *TurnRequest) { r.TimeoutSec = -1 }, "timeout_sec"},
		{"previous result without ref", func(r *TurnRequest) {
			r.Context.PreviousResults = []PreviousResult{{NodeID: "n"}}
		}, "context.previous_results[0].result_ref"},
		{"job envelope", func(r *TurnRequest) {
			r.WorkflowOwner, r.UserID, r.RetryCount, r.CreatedAt = "sdutt", "sdutt@example.com", 2, "2024-10-12T10:30:00+02:00"
			r.Model = "anthropic:claude-3-5-haiku-latest"
			r.Context.WorkflowState = json.RawMessage(` {"current_step": 5, "total_steps": 10}`)
		}, ""},
		{"model not provider:model", func(r *TurnRequest) { r.Model = "gpt-4o" }, `model "gpt-4o": want "provider:model"`},
		{"model of an unknown provider", func(r *TurnRequest) { r.Model = "acme:big" }, `model "acme:big": unknown provider "acme" (known: anthropic, ollama, openai)`},
		{"model with a space", func(r *TurnRequest) { r.Model = "openai:gpt 4o" }, `model "openai:gpt 4o" may not contain spaces`},
		{"owner with a space", func(r *TurnRequest) { r.WorkflowOwner = "s dutt" }, `workflow_owner "s dutt" may not contain spaces`},
		{"long user id", func(r *TurnRequest) { r.UserID = strings.Repeat("u", MaxKeyLength+1) }, "user_id is 201 bytes; the limit is 200"},
		{"negative retry count", func(r *TurnRequest) { r.RetryCount = -1 }, "retry_count -1: want 0 (the first attempt) to 10000"},
		{"huge retry count", func(r *TurnRequest) { r.RetryCount = MaxRetryCount + 1 }, "retry_count 10001"},
		{"created_at not a time", func(r *TurnRequest) { r.CreatedAt = "yesterday" }, `created_at "yesterday": want an RFC 3339 time such as 2024-10-12T10:30:00Z`},
		{"created_at without a zone", func(r *TurnRequest) { r.CreatedAt = "2024-10-12T10:30:00" }, `created_at "2024-10-12T10:30:00"`},
		{"workflow state not an object", func(r *TurnRequest) { r.Context.WorkflowState = json.RawMessage(`[5, 10]`) }, "context.workflow_state must be a JSON object"},
		{"workflow state not JSON", func(r *TurnRequest) { r.Context.WorkflowState = json.RawMessage(`{"a":`) }, "context.workflow_state must be a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.mutate(&r)
			err := r.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, CodeInvalid, ErrorCode(err))
		})
	}
}

func TestNormalize(t *testing.T) {
	r := TurnRequest{SessionID: "s"}
	r.Normalize()
	require.Equal(t, ProtocolVersion, r.Version)
	require.Equal(t, HistoryLoad, r.History)
	r = TurnRequest{}
	r.Normalize()
	require.Equal(t, HistoryFresh, r.History)
}

func TestParseModel(t *testing.T) {
	p, m, err := ParseModel("openai:gpt-4o-mini")
	require.NoError(t, err)
	require.Equal(t, "openai", p)
	require.Equal(t, "gpt-4o-mini", m)
	for _, bad := range []string{"gpt-4o", ":x", "openai:", ""} {
		_, _, err := ParseModel(bad)
		require.Error(t, err, bad)
		require.Equal(t, CodeInvalid, ErrorCode(err))
	}
}

func TestTurnRequestMalformedJSON(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{`{"tenant_id": 5, "prompt": "x"}`, "malformed request: field tenant_id must be a string, not a number"},
		{`"just a string"`, "malformed request: the request must be a JSON object, not a string"},
		{`[1,2]`, "the request must be a JSON object, not an array"},
		{`{"context": {"metadata": {"a": 1}}, "tenant_id": "t", "prompt": "x"}`, "field context.metadata must be a string, not a number"},
		{`{"timeout_sec": "soon", "tenant_id": "t", "prompt": "x"}`, "field timeout_sec must be a number, not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var r TurnRequest
			require.NoError(t, json.Unmarshal([]byte(tt.in), &r))
			err := r.Validate()
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, CodeInvalid, ErrorCode(err))
		})
	}
	var r TurnRequest
	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id":"t","prompt":"p","future_field":1}`), &r))
	require.ErrorContains(t, r.Validate(), `unknown field "future_field"`, "a field this version does not have is a mistake")
	require.NoError(t, json.Unmarshal([]byte(`{"version":"1.1","tenant_id":"t","prompt":"p","future_field":1}`), &r))
	require.NoError(t, r.Validate(), "a later 1.x version's optional fields are ignored")
	require.Equal(t, "p", r.Prompt)
}

// TestSendMessageValidate: a Conversation's send_message update refuses
// what the message's turn would refuse, instead of accepting a message
// whose turn is then rejected.
func TestSendMessageValidate(t *testing.T) {
	tests := []struct {
		name    string
		msg     SendMessage
		wantErr string
	}{
		{"plain", SendMessage{Prompt: "hi"}, ""},
		{"job id", SendMessage{Prompt: "hi", JobID: "order-42"}, ""},
		{"blank prompt", SendMessage{Prompt: " "}, "prompt is required"},
		{"prompt not UTF-8", SendMessage{Prompt: "a\xffb"}, "prompt is not valid UTF-8"},
		{"job id with a space", SendMessage{Prompt: "hi", JobID: "a b"}, `job_id "a b" may not contain spaces`},
		{"job id with a control character", SendMessage{Prompt: "hi", JobID: "a\x00b"}, "may not contain spaces or control characters"},
		{"job id too long", SendMessage{Prompt: "hi", JobID: strings.Repeat("j", MaxKeyLength+1)}, "job_id is 201 bytes; the limit is 200"},
		{"previous result without ref", SendMessage{Prompt: "hi", Context: TurnContext{PreviousResults: []PreviousResult{{NodeID: "n"}}}},
			"context.previous_results[0].result_ref is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.msg.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, CodeInvalid, ErrorCode(err))
			require.ErrorContains(t, err, tt.wantErr)
		})
	}
}

// TestJobEnvelopeJSON: the v1 job protocol's envelope fields decode from
// the seed's example, and a retry of a job (another retry_count and
// created_at) is the same request; another owner or model is not.
func TestJobEnvelopeJSON(t *testing.T) {
	var r TurnRequest
	require.NoError(t, json.Unmarshal([]byte(`{"version": "1.0", "job_id": "550e8400", "tenant_id": "demo", "run_id": "run-2024-001",
		"node_id": "agent_analyze_data", "workflow_tag": "main", "workflow_owner": "sdutt", "user_id": "sdutt", "prompt": "fetch flight prices",
		"context": {"workflow_state": {"current_step": 5, "total_steps": 10}, "session_id": "sess-xyz789"},
		"timeout_sec": 300, "retry_count": 0, "created_at": "2024-10-12T10:30:00Z", "model": "openai:gpt-4o"}`), &r))
	require.NoError(t, r.Validate())
	require.Equal(t, []any{"sdutt", "sdutt", 0, "2024-10-12T10:30:00Z", "openai:gpt-4o"}, []any{r.WorkflowOwner, r.UserID, r.RetryCount, r.CreatedAt, r.Model})
	require.JSONEq(t, `{"current_step": 5, "total_steps": 10}`, string(r.Context.WorkflowState))
	require.NoError(t, r.Context.Bounded())

	retry := r
	retry.RetryCount, retry.CreatedAt = 1, "2024-10-12T10:31:00Z"
	require.Equal(t, r.Hash(), retry.Hash(), "a retry is the same request")
	for name, mutate := range map[string]func(*TurnRequest){
		"owner": func(x *TurnRequest) { x.WorkflowOwner = "other" },
		"user":  func(x *TurnRequest) { x.UserID = "other" },
		"model": func(x *TurnRequest) { x.Model = "openai:gpt-4o-mini" },
		"state": func(x *TurnRequest) { x.Context.WorkflowState = json.RawMessage(`{"current_step": 6}`) },
	} {
		other := r
		mutate(&other)
		require.NotEqual(t, r.Hash(), other.Hash(), name)
	}
	// The state counts against the context's bound.
	big := r
	big.Context.WorkflowState = json.RawMessage(`{"s": "` + strings.Repeat("x", MaxContextBytes) + `"}`)
	require.ErrorContains(t, big.Context.Bounded(), "context is")
	// A state that is not an object is not accepted silently.
	var bad TurnRequest
	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id": "demo", "prompt": "x", "context": {"workflow_state": "step 5"}}`), &bad))
	require.ErrorContains(t, bad.Validate(), "context.workflow_state must be a JSON object")
}

// TestPromptCacheKey: one key per agent version, the same every time,
// another for another version, agent or tenant; opaque and short enough
// for OpenAI's prompt_cache_key.
func TestPromptCacheKey(t *testing.T) {
	k := PromptCacheKey("demo", "assistant", 3)
	require.Equal(t, k, PromptCacheKey("demo", "assistant", 3))
	require.Regexp(t, `^agentflow-[0-9a-f]{32}$`, k)
	require.NotContains(t, k, "demo")
	for _, other := range []string{PromptCacheKey("demo", "assistant", 4), PromptCacheKey("demo", "other", 3),
		PromptCacheKey("acme", "assistant", 3), PromptCacheKey("demo\x00assistant", "", 3)} {
		require.NotEqual(t, k, other)
	}
}

func TestValidRole(t *testing.T) {
	for r, want := range map[string]bool{
		"user": true, "approver": true, "b": true, "release-managers": true, "on_call2": true, "a" + strings.Repeat("x", 63): true,
		"": false, "Admin": false, "2fa": false, "-x": false, "domain admins": false, "/staff": false, "a" + strings.Repeat("x", 64): false, "rôle": false,
	} {
		require.Equal(t, want, ValidRole(r), "%q", r)
	}
}

// TestStreamWindow: stream_window_sec is 0 to MaxStreamWindowSec, read
// from the v1 JSON; one out of its bounds is refused and opens no window;
// it is how the answer is delivered, so it is not part of the request's
// hash.
func TestStreamWindow(t *testing.T) {
	var r TurnRequest
	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id":"demo","prompt":"p","stream_window_sec":5}`), &r))
	require.NoError(t, r.ValidateBase())
	require.Equal(t, 5*time.Second, r.StreamWindow())
	plain := TurnRequest{TenantID: "demo", Prompt: "p"}
	require.Equal(t, plain.Hash(), r.Hash())
	require.Zero(t, plain.StreamWindow())
	for _, sec := range []int{-1, MaxStreamWindowSec + 1} {
		r.StreamWindowSec = sec
		err := r.ValidateBase()
		require.ErrorContains(t, err, "stream_window_sec")
		require.Equal(t, CodeInvalid, ErrorCode(err))
		require.Zero(t, r.StreamWindow())
	}
}
