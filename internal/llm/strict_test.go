package llm_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
)

// TestToolsStrictWhereTheSchemaQualifies: OpenAI's function tools go out
// with strict: true when their schema meets strict mode's rules (every
// property required, no others allowed, keywords strict mode takes), as
// the seed's execute_pipeline does, and without it otherwise — a strict
// request with such a schema would be refused —, streamed or not.
func TestToolsStrictWhereTheSchemaQualifies(t *testing.T) {
	tools := []agent.Tool{
		{Name: "closed", Parameters: json.RawMessage(`{"type":"object","required":["session_id","steps"],"additionalProperties":false,
			"properties":{"session_id":{"type":"string"},"steps":{"type":"array","items":{"type":"object","properties":{"op":{"type":"string","enum":["sort","limit"]}},"required":["op"],"additionalProperties":false}}}}`)},
		{Name: "optional", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false}`)},
		{Name: "open", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)},
		{Name: "refused_keyword", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`)},
		{Name: "no_parameters"},
	}
	want := map[string]bool{"closed": true, "optional": false, "open": false, "refused_keyword": false, "no_parameters": false}
	for _, stream := range []bool{false, true} {
		srv, r := start(t)
		req := llm.Request{Model: "openai:m", Messages: user("hello"), Tools: tools}
		if stream {
			req.OnText = func(context.Context, string) error { return nil }
		}
		_, err := r.Generate(context.Background(), req)
		require.NoError(t, err)
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		var sent []struct {
			Type     string `json:"type"`
			Function struct {
				Name   string          `json:"name"`
				Strict *bool           `json:"strict"`
				Params json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		require.NoError(t, json.Unmarshal([]byte(reqs[0].ToolsJSON), &sent), reqs[0].ToolsJSON)
		require.Len(t, sent, len(tools))
		for _, s := range sent {
			strict := s.Function.Strict != nil && *s.Function.Strict
			require.Equal(t, want[s.Function.Name], strict, "tool %s, streamed %v: %s", s.Function.Name, stream, reqs[0].ToolsJSON)
			require.NotEmpty(t, s.Function.Params, "the schema goes as it is")
		}
	}
}
