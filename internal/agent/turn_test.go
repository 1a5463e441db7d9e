package agent

import (
	"encoding/json"
	"strings"
	"testing"

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
	require.NoError(t, r.Validate(), "unknown fields are ignored: later 1.x versions add optional fields")
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
