package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// seedEnvelope is the v1 job protocol's example request (seed 004 §2.1),
// which names its session only in its context.
const seedEnvelope = `{
  "version": "1.0",
  "job_id": "550e8400-e29b-41d4-a716-446655440000",
  "run_id": "run-2024-001",
  "node_id": "agent_analyze_data",
  "workflow_tag": "main",
  "workflow_owner": "sdutt",
  "user_id": "sdutt",
  "tenant_id": "demo",
  "prompt": "fetch flight prices from NYC to LAX, sort by price, show cheapest 3",
  "context": {
    "previous_results": [
      {"node_id": "fetch_data", "result_ref": "cas://sha256:abc123", "preview": {"count": 150}}
    ],
    "workflow_state": {"current_step": 5, "total_steps": 10},
    "session_id": "sess-xyz789"
  },
  "timeout_sec": 300,
  "retry_count": 0,
  "created_at": "2024-10-12T10:30:00Z"
}`

// TestEnvelopeSessionID: the seed's envelope decodes whole, and its
// context.session_id is the request's session, with the history a
// session's request loads; naming it in either place is one request
// (one hash); naming two sessions is refused.
func TestEnvelopeSessionID(t *testing.T) {
	var r TurnRequest
	require.NoError(t, json.Unmarshal([]byte(seedEnvelope), &r))
	r.Normalize()
	require.NoError(t, r.Validate())
	require.Equal(t, "sess-xyz789", r.SessionID)
	require.Empty(t, r.Context.SessionID)
	require.Equal(t, HistoryLoad, r.History)
	require.JSONEq(t, `{"count":150}`, string(r.Context.PreviousResults[0].Preview))

	top := TurnRequest{TenantID: "demo", Prompt: "hi", SessionID: "s1"}
	inContext := TurnRequest{TenantID: "demo", Prompt: "hi", Context: TurnContext{SessionID: "s1"}}
	both := TurnRequest{TenantID: "demo", Prompt: "hi", SessionID: "s1", Context: TurnContext{SessionID: "s1"}}
	require.Equal(t, top.Hash(), inContext.Hash())
	require.Equal(t, top.Hash(), both.Hash())

	two := TurnRequest{TenantID: "demo", Prompt: "hi", SessionID: "s1", Context: TurnContext{SessionID: "s2"}}
	two.Normalize()
	err := two.Validate()
	require.True(t, IsCode(err, CodeInvalid), "%v", err)
	require.ErrorContains(t, err, `context.session_id "s2" and session_id "s1" name two sessions`)
}

// TestStrictDecoding: a field the protocol does not have, at the top or
// inside the context, makes the request invalid, naming the field,
// instead of vanishing.
func TestStrictDecoding(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{`{"tenant_id":"demo","promt":"hi"}`, `malformed request: unknown field "promt": the v1 job protocol has no such field (did you mean "prompt"?)`},
		{`{"tenant_id":"demo","prompt":"hi","sesion_id":"s1"}`, `unknown field "sesion_id": the v1 job protocol has no such field (did you mean "session_id"?)`},
		{`{"tenant_id":"demo","prompt":"hi","context":{"user_rol":"admin"}}`, `unknown field "user_rol": the v1 job protocol has no such field (did you mean "user_role"?)`},
		{`{"tenant_id":"demo","prompt":"hi","colour":"blue"}`, `unknown field "colour": the v1 job protocol has no such field (check its spelling)`},
	} {
		var r TurnRequest
		require.NoError(t, json.Unmarshal([]byte(tt.raw), &r), "decoding never fails: Validate reports")
		err := r.Validate()
		require.True(t, IsCode(err, CodeInvalid), "%s: %v", tt.raw, err)
		require.ErrorContains(t, err, tt.want)
	}
}
