package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
)

// An agent's arguments. An agent whose catalog entry has an input schema
// (agent.Agent.InputSchema) is a tool that takes those arguments, as its
// tools/list entry says, in place of {"prompt": "…"}: a call's arguments
// are checked against the schema (none at all are {}), and the turn's
// prompt is them, as compact JSON, for the agent's system prompt to say
// what to do with. The check is made once, before any handler — a call
// in a session, a stateless call, a call answered with a task —, which
// then reads the call as {"prompt": <the arguments>}.

// withArguments checks the arguments of a tools/call of an agent that has
// an input schema, and hands the call on as {"prompt": <the arguments>}.
// Arguments that do not match are -32602 (invalid params) with what is
// wrong, as a call without {"prompt"} is; nothing starts.
func withArguments(agents map[string]agent.Agent) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			call, ok := req.(*mcp.CallToolRequest)
			if !ok || call.Params == nil {
				return next(ctx, method, req)
			}
			a, ok := agents[call.Params.Name]
			if !ok || !agent.HasOutputSchema(a.InputSchema) {
				return next(ctx, method, req)
			}
			prompt, err := agentArguments(a, call.Params.Arguments)
			if err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
			call.Params.Arguments, _ = json.Marshal(mcpInput{Prompt: prompt})
			return next(ctx, method, req)
		}
	}
}

// agentArguments checks a call's arguments against the input schema of
// agent a, and returns the turn's prompt: the arguments, compact.
func agentArguments(a agent.Agent, raw json.RawMessage) (string, error) {
	schema, err := structured.CompileInput(a.InputSchema)
	if err != nil {
		// The catalog compiled it when it was applied.
		return "", fmt.Errorf("the input schema of %s does not compile: %w", a.ID, err)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		raw = json.RawMessage(`{}`)
	}
	args, problems := schema.CheckArguments(raw)
	if len(problems) > 0 {
		return "", fmt.Errorf("arguments do not match the input schema of %s: %s", a.ID, problems)
	}
	if len(args) > agent.MaxPromptBytes {
		return "", fmt.Errorf("arguments are %d bytes; the limit is %d", len(args), agent.MaxPromptBytes)
	}
	return string(args), nil
}
