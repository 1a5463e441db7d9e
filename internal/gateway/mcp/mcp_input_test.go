package mcp

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestAgentArguments: a call of an agent with an input schema is checked
// against it and handed on as {"prompt": <the arguments, compact>}; a call
// that does not match is invalid params, and reaches no handler; a call of
// an agent without one is handed on as it came.
func TestAgentArguments(t *testing.T) {
	agents := map[string]agent.Agent{
		"greet": {ID: "greet", InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`)},
		"plain": {ID: "plain"},
	}
	for _, tc := range []struct {
		name, tool, args string
		want             string // the arguments the handler gets
		err              string
	}{
		{name: "valid", tool: "greet", args: ` {"name": "Ada"} `, want: `{"prompt":"{\"name\":\"Ada\"}"}`},
		{name: "none", tool: "greet", args: ``, err: "arguments do not match the input schema of greet: missing property 'name'"},
		{name: "wrong type", tool: "greet", args: `{"name": 3}`, err: "/name: got number, want string"},
		{name: "unknown field", tool: "greet", args: `{"name": "Ada", "age": 3}`, err: "additional properties 'age' not allowed"},
		{name: "not JSON", tool: "greet", args: `{"name": `, err: "the arguments are not JSON"},
		{name: "an agent without one", tool: "plain", args: `{"prompt": "hi"}`, want: `{"prompt": "hi"}`},
		{name: "an unknown tool", tool: "nope", args: `{"x": 1}`, want: `{"x": 1}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got json.RawMessage
			h := withArguments(agents)(func(_ context.Context, _ string, req mcp.Request) (mcp.Result, error) {
				got = req.(*mcp.CallToolRequest).Params.Arguments
				return &mcp.CallToolResult{}, nil
			})
			_, err := h(context.Background(), "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tc.tool, Arguments: json.RawMessage(tc.args)}})
			if tc.err != "" {
				var jerr *jsonrpc.Error
				require.ErrorAs(t, err, &jerr)
				require.EqualValues(t, jsonrpc.CodeInvalidParams, jerr.Code)
				require.Contains(t, jerr.Message, tc.err)
				require.Nil(t, got, "no handler ran")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, string(got))
		})
	}
}

// TestAgentTool: an agent's tool takes its input schema, as written, when
// it has one, else a prompt.
func TestAgentTool(t *testing.T) {
	schema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"r":{"type":"string","x-mcp-header":"Region"}}}`
	require.JSONEq(t, schema, string(mcpTool(agent.Agent{ID: "a", InputSchema: json.RawMessage(schema)}).InputSchema.(json.RawMessage)))
	require.JSONEq(t, string(mcpInputSchema), string(mcpTool(agent.Agent{ID: "a"}).InputSchema.(json.RawMessage)))
}
