package llm_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
	"github.com/agentflow/agentflow/internal/scripted"
)

// strictTools are tools of every shape: strict as written, strict once
// rewritten (optional properties, an open object, a keyword strict mode
// does not take, no parameters), and one strict mode cannot describe (a
// free-form object).
var strictTools = []agent.Tool{
	{Name: "closed", Parameters: json.RawMessage(`{"type":"object","required":["session_id","steps"],"additionalProperties":false,
		"properties":{"session_id":{"type":"string"},"steps":{"type":"array","items":{"type":"object","properties":{"op":{"type":"string","enum":["sort","limit"]}},"required":["op"],"additionalProperties":false}}}}`)},
	{Name: "optional", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer","minimum":1,"maximum":9}},"required":["a"]}`)},
	{Name: "open", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`)},
	{Name: "refused_keyword", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","minLength":1}},"required":["a"],"additionalProperties":false}`)},
	{Name: "no_parameters"},
	{Name: "free_form", Parameters: json.RawMessage(`{"type":"object","properties":{"params":{"type":"object"}},"required":["params"]}`)},
}

const strictScript = `
rules:
  - when: {user: 'call optional'}
    reply: {tool_calls: [{name: optional, arguments: '{"a": "x"}'}]}
  - when: {}
    reply: {text: ok}
`

// TestToolsStrict: OpenAI's function tools go with strict: true and their
// schema rewritten into strict mode's subset (optional properties
// required and nullable, objects closed, keywords it does not take in
// the description), which the provider's check (the scripted server's)
// takes; a schema strict mode cannot describe goes as written, without
// strict. A strict tool's call comes as a strict model writes it, a null
// for the optional property left out, which strictschema.Restore takes
// back out for the tool. Streamed or not.
func TestToolsStrict(t *testing.T) {
	wantStrict := map[string]bool{"closed": true, "optional": true, "open": true, "refused_keyword": true, "no_parameters": true, "free_form": false}
	compiled := llm.CompileTools("openai:m", strictTools)
	for _, stream := range []bool{false, true} {
		script, err := scripted.Parse([]byte(strictScript))
		require.NoError(t, err)
		srv, err := scripted.Start("127.0.0.1:0", script, scripted.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = srv.Close() })
		r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL()})
		require.NoError(t, err)

		req := llm.Request{Model: "openai:m", Messages: user("call optional"), Tools: strictTools}
		if stream {
			req.OnText = func(context.Context, string) error { return nil }
		}
		resp, err := r.Generate(context.Background(), req)
		require.NoError(t, err)
		reqs := srv.Requests()
		require.Len(t, reqs, 1)
		require.ElementsMatch(t, []string{"closed", "optional", "open", "refused_keyword", "no_parameters"}, reqs[0].StrictTools)
		var sent []struct {
			Function struct {
				Name   string          `json:"name"`
				Strict *bool           `json:"strict"`
				Params json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		require.NoError(t, json.Unmarshal([]byte(reqs[0].ToolsJSON), &sent), reqs[0].ToolsJSON)
		require.Len(t, sent, len(strictTools))
		for i, s := range sent {
			strict := s.Function.Strict != nil && *s.Function.Strict
			require.Equal(t, wantStrict[s.Function.Name], strict, "tool %s, streamed %v: %s", s.Function.Name, stream, reqs[0].ToolsJSON)
			require.JSONEq(t, string(compiled[i].Parameters), string(s.Function.Params), "what is sent is what CompileTools makes")
		}
		require.JSONEq(t, `{"type":"object","additionalProperties":false,"required":["a","b"],
			"properties":{"a":{"type":"string"},"b":{"type":["integer","null"],"minimum":1,"maximum":9}}}`, string(sent[1].Function.Params))
		require.JSONEq(t, string(strictTools[5].Parameters), string(sent[5].Function.Params), "a schema that cannot be strict goes as written")
		require.Contains(t, compiled[5].NotStrict, "at /properties/params: an object without declared properties")

		require.Len(t, resp.Message.ToolCalls, 1)
		args := resp.Message.ToolCalls[0].Arguments
		require.JSONEq(t, `{"a":"x","b":null}`, args, "a strict model writes every property")
		require.JSONEq(t, `{"a":"x"}`, string(strictschema.Restore(strictTools[1].Parameters, json.RawMessage(args))))
	}
}

// TestToolsStrictAnthropic: Claude models that take strict tools get them
// in Anthropic's dialect (objects closed, optional properties left
// optional, numeric bounds in the description), which the provider's
// check takes; older models get none.
func TestToolsStrictAnthropic(t *testing.T) {
	script, err := scripted.Parse([]byte(strictScript))
	require.NoError(t, err)
	srv, err := scripted.Start("127.0.0.1:0", script, scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	r, err := llm.New(llm.Config{AnthropicAPIKey: "sk-ant-test", AnthropicBaseURL: srv.RootURL()})
	require.NoError(t, err)

	for _, model := range []string{"anthropic:claude-sonnet-4-5", "anthropic:claude-3-5-haiku-latest"} {
		_, err := r.Generate(context.Background(), llm.Request{Model: model, Messages: user("hello"), Tools: strictTools, MaxTokens: 100})
		require.NoError(t, err, model)
	}
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	require.ElementsMatch(t, []string{"closed", "optional", "open", "refused_keyword", "no_parameters"}, reqs[0].StrictTools)
	require.Empty(t, reqs[1].StrictTools, "claude 3.5 takes no strict tools")
	var sent []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	require.NoError(t, json.Unmarshal([]byte(reqs[0].ToolsJSON), &sent))
	require.JSONEq(t, `{"type":"object","additionalProperties":false,"required":["a"],
		"properties":{"a":{"type":"string"},"b":{"type":"integer","description":"maximum: 9, minimum: 1"}}}`, string(sent[1].InputSchema))
}

// TestSpecsSentAsCompiled: tools compiled beforehand (an agent's
// artefact) are sent as they are.
func TestSpecsSentAsCompiled(t *testing.T) {
	srv, r := start(t)
	specs := []agent.CompiledTool{{Name: "pinned", Description: "as compiled",
		Parameters: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}},"required":["x"],"additionalProperties":false}`), Strict: true}}
	_, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("hello"), Tools: strictTools, Specs: specs})
	require.NoError(t, err)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	require.Equal(t, []string{"pinned"}, reqs[0].Tools)
	require.Equal(t, []string{"pinned"}, reqs[0].StrictTools)
}

// TestStrictDialect: which models take strict tools, in which dialect.
func TestStrictDialect(t *testing.T) {
	for model, want := range map[string]string{
		"openai:gpt-4o-mini":                  "openai",
		"ollama:llama3.2":                     "openai",
		"anthropic:claude-sonnet-4-5":         "anthropic",
		"anthropic:claude-sonnet-4-5-2025092": "anthropic",
		"anthropic:claude-haiku-4-5-20251001": "anthropic",
		"anthropic:claude-opus-4-1-20250805":  "anthropic",
		"anthropic:claude-opus-4-6":           "anthropic",
		"anthropic:claude-sonnet-5":           "anthropic",
		"anthropic:claude-sonnet-4-20250514":  "",
		"anthropic:claude-sonnet-4-0":         "",
		"anthropic:claude-3-5-haiku-latest":   "",
		"anthropic:claude-test":               "",
		"gpt-4o":                              "",
	} {
		require.Equal(t, want, llm.StrictDialect(model), model)
	}
}

// TestCompile: an agent's compiled version holds what its model receives,
// each tool with the definition it was made from.
func TestCompile(t *testing.T) {
	temp := 0.0
	ag := agent.Agent{TenantID: "acme", ID: "a", Version: 3, Model: "openai:m", SystemPrompt: "be brief", Temperature: &temp,
		Tools: []agent.Tool{{Name: "optional", Kind: "k", Parameters: strictTools[1].Parameters, Version: 2, SpecHash: "abc"}}}
	c := llm.Compile(ag, ag.Tools)
	require.Equal(t, agent.CompiledFormat, c.Format)
	require.Equal(t, "openai", c.Dialect)
	require.Equal(t, "be brief", c.SystemPrompt)
	require.Len(t, c.Tools, 1)
	require.True(t, c.Tools[0].Strict)
	require.Equal(t, agent.ToolVersion{Version: 2, SpecHash: "abc"}, c.Tools[0].ToolVersion)
	again := llm.Compile(ag, ag.Tools)
	_, h1, err := agent.Canonical(c)
	require.NoError(t, err)
	_, h2, err := agent.Canonical(again)
	require.NoError(t, err)
	require.Equal(t, h1, h2, "a compile is a function of the version")
}
