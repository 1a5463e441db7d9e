package openai

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzChatRequest: any body is a chat completion request whose last
// message is the user's with text, and whose prompt is a turn's, or a
// CodeInvalid error that says what is wrong; never a panic.
func FuzzChatRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"assistant","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"a","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"x"},{"role":"user","content":[{"type":"text","text":"y"}]}]}`,
		`{"model":"a","n":2,"tools":[{"type":"function"}],"messages":[{"role":"tool","content":"4"}]}`,
		`{"model":"a","temperature":0.5,"metadata":{"k":"v"},"messages":[{"role":"assistant","content":null,"tool_calls":[]},{"role":"user","content":"z","name":"n"}]}`,
		`{"model":1}`, `[]`, `null`, ``, `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
		`{"model":"a","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},"messages":[{"role":"user","content":"hi"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeChatRequest(body)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		require.NoError(t, agent.ValidateID("model", req.Model))
		require.NotEmpty(t, req.Model)
		require.Equal(t, roleUser, req.Messages[len(req.Messages)-1].Role)
		for _, session := range []bool{false, true} {
			prompt, err := chatPrompt(req.Messages, session)
			if err != nil {
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				continue
			}
			// What the turn will check of it, it passes.
			tr := agent.TurnRequest{TenantID: "demo", AgentID: req.Model, Prompt: prompt}
			require.NoError(t, tr.Validate())
		}
	})
}
