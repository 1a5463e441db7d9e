package openai

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzResponseRequest: any body is a create response request whose last
// message is the user's with text, and whose prompt is a turn's, or
// decisions on a response's approval requests (each once, and nothing
// else), or a CodeInvalid error that says what is wrong; never a panic.
func FuzzResponseRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"assistant","input":"hi"}`,
		`{"model":"a","stream":true,"background":true,"instructions":"Be brief.","input":[{"role":"system","content":"x"},{"type":"message","role":"user","content":[{"type":"input_text","text":"y"}]}]}`,
		`{"model":"a","tools":[{"type":"function"}],"input":[{"type":"function_call_output","output":"4"}]}`,
		`{"model":"a","temperature":0.5,"metadata":{"k":"v"},"input":[{"role":"assistant","content":[{"type":"output_text","text":"4","annotations":[]}]},{"role":"user","content":"z"}]}`,
		`{"model":"a","input":"hi","text":{"format":{"type":"json_schema","name":"x","schema":{"type":"object"}}}}`,
		`{"model":"a","input":"hi","previous_response_id":"turn/demo/j"}`,
		`{"model":1}`, `[]`, `null`, ``, `{"input":[{"role":"user","content":[{"type":"input_image"}]}]}`,
		`{"model":"a","previous_response_id":"turn/demo/j","input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true,"reason":"ok"}]}`,
		`{"model":"a","previous_response_id":"turn/demo/j","input":[{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":false},{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}]}`,
		`{"model":"a","input":[{"type":"mcp_approval_response","approval_request_id":"","approve":null}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeResponseRequest(body)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, agent.ValidateID("model", req.chat.Model))
		if len(req.Approvals) > 0 {
			// Decisions on a response's approval requests: nothing else.
			require.Empty(t, req.chat.Messages)
			require.NotEmpty(t, req.PreviousResponseID)
			seen := map[string]bool{}
			for _, a := range req.Approvals {
				require.NotEmpty(t, a.RequestID)
				require.LessOrEqual(t, len(a.RequestID), agent.MaxKeyLength)
				require.False(t, seen[a.RequestID], "decided once")
				seen[a.RequestID] = true
			}
			return
		}
		require.Equal(t, roleUser, req.chat.Messages[len(req.chat.Messages)-1].Role)
		for _, session := range []bool{false, true} {
			prompt, err := req.prompt(session)
			if err != nil {
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				continue
			}
			tr := agent.TurnRequest{TenantID: "demo", AgentID: req.chat.Model, Prompt: prompt}
			require.NoError(t, tr.Validate())
		}
	})
}
