package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/pipelinetool"
)

func testKinds(t *testing.T) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(tools.Deps{}, tools.Builtin()...)
	require.NoError(t, err)
	return r
}

// problems parses src as "t.yaml" and returns the problems as strings.
func problems(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse(testKinds(t), "t.yaml", []byte(src))
	if err == nil {
		return nil
	}
	var verr *ValidationError
	require.True(t, errors.As(err, &verr), "error %v is not a *ValidationError", err)
	require.Equal(t, len(verr.Problems), strings.Count(err.Error(), "\n")+1, "one problem per line")
	out := make([]string, len(verr.Problems))
	for i, p := range verr.Problems {
		out[i] = p.String()
	}
	return out
}

const validAgent = `
agents:
  - id: a
    model: openai:gpt-4o-mini
`

func TestParseProblems(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // each a whole problem line
	}{
		{
			name: "a tool timeout too long",
			src:  "tenant: demo\ntools:\n  - {name: c, kind: calculator, timeout_sec: 7200}\n",
			want: []string{`t.yaml:3: tools[0].timeout_sec: 7200: want 1 to 3600 (seconds)`},
		},
		{
			name: "unknown top-level field",
			src:  "tenant: demo\nagnets: []\n",
			want: []string{`t.yaml:2: agnets: unknown field; known fields: tenant, default_agent, egress, promote_after, tools, toolkits, agents, rules, processes, prices, budgets, retention, pii, model_limits`},
		},
		{
			name: "unknown tool field",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    descripton: x\n",
			want: []string{`t.yaml:5: tools[0].descripton: unknown field; known fields: name, kind, description, parameters, approval, config, execution, delivery, reconcile, rate_limit, timeout_sec`},
		},
		{
			name: "unknown delivery",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    delivery: exactly_once\n",
			want: []string{`t.yaml:5: tools[0].delivery: "exactly_once": want idempotent (the far side deduplicates: a retry sends again), reconciled (a write whose outcome is unknown is answered from a read: reconcile) or at_most_once (the default: a write an earlier attempt may have sent is not sent again)`},
		},
		{
			name: "reconciled without reconcile",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    delivery: reconciled\n",
			want: []string{`t.yaml:5: tools[0].delivery: delivery reconciled needs reconcile: {arguments: <jq over {args, key}: the read's arguments>, found: <jq over {args, key, answer}: true when the write took effect>}`},
		},
		{
			name: "reconcile without reconciled",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    reconcile: {arguments: '.', found: 'true'}\n",
			want: []string{`t.yaml:3: tools[0].name: reconcile is read only with delivery: reconciled`},
		},
		{
			name: "reconcile programs that are not jq, and a read that is no tool",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    delivery: reconciled\n    reconcile: {tool: look, arguments: '{', found: ''}\n",
			want: []string{
				`t.yaml:6: tools[0].reconcile.arguments: not a jq program: unexpected EOF`,
				`t.yaml:6: tools[0].reconcile.found: is required`,
			},
		},
		{
			name: "a reconcile read that is no tool",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    delivery: reconciled\n    reconcile: {tool: look, arguments: '.', found: 'true'}\n",
			want: []string{`t.yaml:6: tools[0].reconcile.tool: tool "look" is not defined for tenant "demo"; defined: calc`},
		},
		{
			name: "unknown agent field",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    prompt: hi\n",
			want: []string{`t.yaml:5: agents[0].prompt: unknown field; known fields: id, description, model, fallback_models, fallback_on, models_allowed, system_prompt, examples, tools, temperature, output_schema, input_schema, limits, thinking, memory, context, on_busy, guardrails, expose, model_execution, deliver, empty_answer, prepare, code_mode`},
		},
		{
			name: "unknown limit",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    limits: {max_iters: 3}\n",
			want: []string{`t.yaml:5: agents[0].limits.max_iters: unknown field; known fields: max_iterations, turn_timeout_sec, token_budget, approval_timeout_sec, max_output_tokens, turns_per_minute, model_priority, history_events, model_timeout_sec`},
		},
		{
			name: "repeated key",
			src:  "tenant: demo\ntenant: other\n",
			want: []string{`t.yaml:2: tenant: is repeated (first at line 1)`},
		},
		{
			name: "missing tenant",
			src:  "default_agent: a" + validAgent,
			want: []string{`t.yaml:1: tenant: is required`},
		},
		{
			name: "invalid tenant",
			src:  "tenant: de mo\n",
			want: []string{`t.yaml:1: tenant: ` + agent.ValidateID("tenant", "de mo").Error()},
		},
		{
			name: "tenant not a string",
			src:  "tenant: [demo]\n",
			want: []string{`t.yaml:1: tenant: want a string, not a list`},
		},
		{
			name: "missing agent id",
			src:  "tenant: demo\nagents:\n  - model: openai:x\n",
			want: []string{`t.yaml:3: agents[0].id: is required`},
		},
		{
			name: "invalid agent id",
			src:  "tenant: demo\nagents:\n  - id: a/b\n    model: openai:x\n",
			want: []string{`t.yaml:3: agents[0].id: ` + agent.ValidateID("id", "a/b").Error()},
		},
		{
			name: "duplicate agent id",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n  - id: a\n    model: openai:y\n",
			want: []string{`t.yaml:5: agents[1].id: agent "a" is already defined at t.yaml:3`},
		},
		{
			name: "duplicate tool name",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n  - name: calc\n    kind: calculator\n",
			want: []string{`t.yaml:5: tools[1].name: tool "calc" is already defined at t.yaml:3`},
		},
		{
			name: "invalid tool name",
			src:  "tenant: demo\ntools:\n  - name: my calc\n    kind: calculator\n",
			want: []string{`t.yaml:3: tools[0].name: "my calc" must match ^[a-zA-Z0-9_-]{1,64}$ (what model providers accept)`},
		},
		{
			name: "missing tool name and kind",
			src:  "tenant: demo\ntools:\n  - description: x\n",
			want: []string{`t.yaml:3: tools[0].name: is required`, `t.yaml:3: tools[0].kind: is required`},
		},
		{
			name: "unknown tool kind",
			src:  "tenant: demo\ntools:\n  - name: refund\n    kind: http\n",
			want: []string{`t.yaml:4: tools[0].kind: unknown tool kind "http"`},
		},
		{
			name: "config rejected by the kind",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    config:\n      digits: 0\n",
			want: []string{`t.yaml:6: tools[0].config: calculator config: digits is 0; want 1 to 100`},
		},
		{
			name: "parameters not a mapping",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    parameters: [1]\n",
			want: []string{`t.yaml:5: tools[0].parameters: want a JSON Schema object (type: object), not a list`},
		},
		{
			name: "parameters of another type",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    parameters:\n      type: string\n",
			want: []string{`t.yaml:6: tools[0].parameters.type: want "object" (tool parameters are a JSON object), not "string"`},
		},
		{
			name: "parameters without type",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    parameters:\n      properties: {}\n",
			want: []string{`t.yaml:6: tools[0].parameters.type: want "object" (tool parameters are a JSON object), not missing`},
		},
		{
			name: "parameters with bad properties",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    parameters: {type: object, properties: [a]}\n",
			want: []string{`t.yaml:5: tools[0].parameters.properties: want a mapping of argument names to schemas, not a list`},
		},
		{
			name: "unknown model provider",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: acme:large\n",
			want: []string{`t.yaml:4: agents[0].model: unknown provider "acme" (known: anthropic, ollama, openai)`},
		},
		{
			name: "rule naming an unknown agent",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:m\nrules:\n  - name: r\n    when: 'true'\n    agent: nobody\n",
			want: []string{`t.yaml:8: rules[0].agent: agent "nobody" is not defined for tenant "demo"; defined: a`},
		},
		{
			name: "rule with bad CEL",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:m\nrules:\n  - name: r\n    when: 'page == 1'\n    agent: a\n",
			want: []string{`t.yaml:7: rules[0].when: condition "page == 1": ERROR: <input>:1:1: undeclared reference to 'page' | page == 1 | ^`},
		},
		{
			name: "duplicate rule and missing condition",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:m\nrules:\n  - name: r\n    when: 'true'\n    agent: a\n  - name: r\n    agent: a\n",
			want: []string{`t.yaml:9: rules[1].name: rule "r" is already defined at t.yaml:6`, `t.yaml:9: rules[1].when: is required: a CEL condition such as ui_page == "billing"`},
		},
		{
			name: "blank rule condition",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:m\nrules:\n  - name: r\n    when: ' '\n    agent: a\n",
			want: []string{`t.yaml:7: rules[0].when: is required: a CEL condition such as ui_page == "billing"`},
		},
		{
			name: "approval that is not CEL",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    approval: 'args.amount >'\n",
			want: []string{`t.yaml:5: tools[0].approval: approval policy "args.amount >": ERROR: <input>:1:14: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}  | args.amount >  | .............^`},
		},
		{
			name: "approval that is not a bool",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    approval: 'args.amount'\n",
			want: []string{`t.yaml:5: tools[0].approval: approval policy "args.amount": evaluates to dyn, want bool`},
		},
		{
			name: "empty approval",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    approval: \"\"\n",
			want: []string{`t.yaml:5: tools[0].approval: is empty: want never, always or a CEL expression`},
		},
		{
			name: "unknown execution",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    execution: remote\n",
			want: []string{`t.yaml:5: tools[0].execution: "remote": want local or activity`},
		},
		{
			name: "boolean approval",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n    approval: true\n",
			want: []string{`t.yaml:5: tools[0].approval: true is not a policy: want never, always or a CEL expression`},
		},
		{
			name: "agent names an unknown tool",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\nagents:\n  - id: a\n    model: openai:x\n    tools: [calc, search]\n",
			want: []string{`t.yaml:8: agents[0].tools[1]: tool or toolkit "search" is not defined for tenant "demo"; defined: calc`},
		},
		{
			name: "agent lists a tool twice",
			src:  "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\nagents:\n  - id: a\n    model: openai:x\n    tools:\n      - calc\n      - calc\n",
			want: []string{`t.yaml:10: agents[0].tools[1]: tool "calc" is listed twice`},
		},
		{
			name: "default agent not defined",
			src:  "tenant: demo\ndefault_agent: helper" + validAgent,
			want: []string{`t.yaml:2: default_agent: agent "helper" is not defined for tenant "demo"; defined: a`},
		},
		{
			name: "bad model",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: gpt4\n",
			want: []string{`t.yaml:4: agents[0].model: "gpt4" is not "provider:model", e.g. "openai:gpt-4o-mini"`},
		},
		{
			name: "missing model",
			src:  "tenant: demo\nagents:\n  - id: a\n",
			want: []string{`t.yaml:3: agents[0].model: is required, as "provider:model", e.g. "openai:gpt-4o-mini"`},
		},
		{
			name: "negative limits",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    limits:\n      max_iterations: -1\n      token_budget: -5\n",
			want: []string{
				`t.yaml:6: agents[0].limits.max_iterations: -1 is negative: want 0 (the default) or more`,
				`t.yaml:7: agents[0].limits.token_budget: -5 is negative: want 0 (the default) or more`,
			},
		},
		{
			name: "context policy out of range",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    context: {max_tokens: 500, compaction: summarize}\n",
			want: []string{
				`t.yaml:5: agents[0].context.max_tokens: 500 is too small: a request may hold at least 2000 tokens`,
				`t.yaml:5: agents[0].context.compaction: "summarize": want digest (the default) or none`,
			},
		},
		{
			name: "history too short to continue as new",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    limits: {history_events: 99}\n",
			want: []string{`t.yaml:5: agents[0].limits.history_events: 99 is too few: a run holds at least 100 events, or 0 for the default, 5000`},
		},
		{
			name: "model priority out of range",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    limits: {model_priority: 6}\n",
			want: []string{`t.yaml:5: agents[0].limits.model_priority: 6 is out of range: want 1 (first) to 5 (last), or 0 for the default, 3`},
		},
		{
			name: "fractional limit",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    limits: {turn_timeout_sec: 6.5}\n",
			want: []string{`t.yaml:5: agents[0].limits.turn_timeout_sec: want a whole number, not 6.5`},
		},
		{
			name: "temperature out of range",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    temperature: 2.5\n",
			want: []string{`t.yaml:5: agents[0].temperature: 2.5 is out of range: want a number from 0 to 2`},
		},
		{
			name: "negative temperature",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    temperature: -0.1\n",
			want: []string{`t.yaml:5: agents[0].temperature: -0.1 is out of range: want a number from 0 to 2`},
		},
		{
			name: "temperature not a number",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:x\n    temperature: .nan\n",
			want: []string{`t.yaml:5: agents[0].temperature: .nan is out of range: want a number from 0 to 2`},
		},
		{
			name: "tools not a list",
			src:  "tenant: demo\ntools:\n  name: calc\n",
			want: []string{`t.yaml:3: tools: want a list, not a mapping`},
		},
		{
			name: "document not a mapping",
			src:  "- tenant: demo\n",
			want: []string{`t.yaml:1: want a mapping with tenant, default_agent, egress, promote_after, tools, toolkits, agents, rules, processes, prices, budgets, retention, pii, model_limits, not a list`},
		},
		{
			name: "empty file",
			src:  "# nothing here\n",
			want: []string{`t.yaml: holds no catalog document`},
		},
		{
			name: "syntax error",
			src:  "tenant: demo\nagents:\n  - id: a\n   model: x\n",
			want: []string{`t.yaml:2: did not find expected '-' indicator`},
		},
		{
			name: "pii with a regex that does not compile",
			src:  "tenant: demo\npii:\n  mode: placeholder\n  custom: [{name: order, regex: '('}]\n",
			want: []string{"t.yaml:3: pii: custom[0].regex: error parsing regexp: missing closing ): `(`"},
		},
		{
			name: "pii with an unknown setting",
			src:  "tenant: demo\npii: {mode: mask, kinds: [email], detect: all}\n",
			want: []string{`t.yaml:2: pii: json: unknown field "detect" (the settings are kinds, custom, mode and reveal)`},
		},
		{
			name: "on_busy",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    on_busy: later\n",
			want: []string{`t.yaml:5: agents[0].on_busy: on_busy "later": want "enqueue", "reject", "interrupt", "rollback" or "steer"`},
		},
		{
			name: "model_execution",
			src:  "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    model_execution: inline\n",
			want: []string{`t.yaml:5: agents[0].model_execution: "inline": want local or activity`},
		},
		{
			name: "every problem at once, in line order",
			src: "tenant: demo\ndefault_agent: nobody\ntools:\n  - name: calc\n    kind: abacus\nagents:\n" +
				"  - id: a\n    model: gpt4\n    tools: [calc, nope]\n    temperature: 3\n",
			want: []string{
				`t.yaml:2: default_agent: agent "nobody" is not defined for tenant "demo"; defined: a`,
				`t.yaml:5: tools[0].kind: unknown tool kind "abacus"`,
				`t.yaml:8: agents[0].model: "gpt4" is not "provider:model", e.g. "openai:gpt-4o-mini"`,
				`t.yaml:9: agents[0].tools[1]: tool or toolkit "nope" is not defined for tenant "demo"; defined: calc`,
				`t.yaml:10: agents[0].temperature: 3 is out of range: want a number from 0 to 2`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, problems(t, tt.src))
		})
	}
}

func TestParseResolvesSpecs(t *testing.T) {
	src := `
tenant: acme
default_agent: support
tools:
  - name: calculator
    kind: calculator
  - name: precise_calc
    kind: calculator
    description: Calculator with 40 digits.
    parameters:
      type: object
      properties:
        expression: {type: string}
      required: [expression]
    approval: args.expression.size() > 100
    config: {digits: 40}
agents:
  - id: support
    description: Support agent.
    model: anthropic:claude-sonnet-4
    system_prompt: |
      Be kind.
    tools: [precise_calc, calculator]
    temperature: 0.5
    limits: {max_iterations: 4, turn_timeout_sec: 60, token_budget: 1000, approval_timeout_sec: 30, max_output_tokens: 256}
  - id: "42"
    model: openai:gpt-4o-mini
`
	cat, err := Parse(testKinds(t), "acme.yaml", []byte(src))
	require.NoError(t, err)
	calc := tools.Calculator()
	calculator := agent.Tool{Name: "calculator", Kind: "calculator", Description: calc.Description, Parameters: calc.Parameters,
		Approval: agent.ApprovalNever, Execution: agent.ToolLocal}
	precise := agent.Tool{
		Name: "precise_calc", Kind: "calculator", Description: "Calculator with 40 digits.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"]}`),
		Approval:   "args.expression.size() > 100",
		Config:     json.RawMessage(`{"digits":40}`),
		Execution:  agent.ToolLocal,
	}
	temp := 0.5
	require.Equal(t, agent.Catalog{Tenants: []agent.TenantCatalog{{
		TenantID:     "acme",
		DefaultAgent: "support",
		Tools:        []agent.Tool{calculator, precise},
		Agents: []agent.Agent{
			{
				TenantID: "acme", ID: "support", Description: "Support agent.", Model: "anthropic:claude-sonnet-4",
				SystemPrompt: "Be kind.\n", Tools: []agent.Tool{precise, calculator}, Temperature: &temp,
				Limits:         agent.Limits{MaxIterations: 4, TurnTimeoutSec: 60, TokenBudget: 1000, ApprovalTimeoutSec: 30, MaxOutputTokens: 256},
				ModelExecution: agent.ModelLocal,
			},
			{TenantID: "acme", ID: "42", Model: "openai:gpt-4o-mini", ModelExecution: agent.ModelLocal},
		},
	}}}, cat)
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	return dir
}

func TestLoadFilesMergesTenants(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a-tools.yaml": "tenant: demo\ntools:\n  - name: calculator\n    kind: calculator\n",
		"b-agents.yml": "tenant: demo\ndefault_agent: assistant\nagents:\n  - id: assistant\n    model: openai:gpt-4o-mini\n    tools: [calculator]\n" +
			"---\ntenant: other\nagents:\n  - id: bot\n    model: ollama:llama3\n---\n",
		"c-more.yaml": "tenant: demo\ndefault_agent: assistant\nagents:\n  - id: second\n    model: openai:gpt-4o\n",
		"README.md":   "not a catalog",
		"notes.txt":   "tenant: ignored",
	})
	cat, err := LoadFiles(testKinds(t), dir)
	require.NoError(t, err)
	require.Len(t, cat.Tenants, 2)

	demo, other := cat.Tenants[0], cat.Tenants[1]
	require.Equal(t, "demo", demo.TenantID)
	require.Equal(t, "assistant", demo.DefaultAgent)
	require.Len(t, demo.Tools, 1)
	require.Len(t, demo.Agents, 2)
	require.Equal(t, "assistant", demo.Agents[0].ID)
	require.Equal(t, demo.Tools, demo.Agents[0].Tools, "a tool from one file serves an agent from another")
	require.Equal(t, "second", demo.Agents[1].ID)
	require.Empty(t, demo.Agents[1].Tools)

	require.Equal(t, "other", other.TenantID)
	require.Equal(t, []agent.Agent{{TenantID: "other", ID: "bot", Model: "ollama:llama3", ModelExecution: agent.ModelLocal}}, other.Agents)

	// Files and directories mix; a file is read whatever its extension.
	cat2, err := LoadFiles(testKinds(t), filepath.Join(dir, "a-tools.yaml"), filepath.Join(dir, "notes.txt"))
	require.NoError(t, err)
	require.Equal(t, []string{"demo", "ignored"}, []string{cat2.Tenants[0].TenantID, cat2.Tenants[1].TenantID})
}

func TestLoadFilesProblemsAcrossFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a.yaml": "tenant: demo\ndefault_agent: a\ntools:\n  - name: calc\n    kind: calculator\n" + validAgent,
		"b.yaml": "tenant: demo\ndefault_agent: b\ntools:\n  - name: calc\n    kind: calculator\nagents:\n  - id: a\n    model: openai:x\n    tools: [calc]\n",
	})
	_, err := LoadFiles(testKinds(t), dir)
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	require.EqualError(t, err, strings.Join([]string{
		b + `:2: default_agent: "b" conflicts with default_agent "a" set at ` + a + `:2`,
		b + `:4: tools[0].name: tool "calc" is already defined at ` + a + `:4`,
		b + `:7: agents[0].id: agent "a" is already defined at ` + a + `:8`,
	}, "\n"))
}

func TestLoadFilesErrors(t *testing.T) {
	_, err := LoadFiles(testKinds(t), filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist)

	empty := writeFiles(t, map[string]string{"README.md": "# nothing"})
	_, err = LoadFiles(testKinds(t), empty)
	require.EqualError(t, err, "load catalog: "+empty+": no *.yaml or *.yml files")

	_, err = LoadFiles(testKinds(t))
	require.EqualError(t, err, "load catalog: no files given")
}

func TestLoadFilesWithoutKinds(t *testing.T) {
	_, err := Parse(nil, "t.yaml", []byte("tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n"))
	require.EqualError(t, err, `t.yaml:4: tools[0].kind: unknown tool kind "calculator"`)
}

func TestSampleCatalog(t *testing.T) {
	// The sample API on loopback needs the operator to open it, as the
	// local stack does.
	_, err := LoadFiles(testKinds(t), filepath.Join("..", "..", "catalog"))
	require.ErrorContains(t, err, `demo.yaml:`)
	require.ErrorContains(t, err, `: egress[0]: egress entry "127.0.0.1:8089": 127.0.0.1 is a loopback address; the operator has not opened it (AGENTFLOW_EGRESS_ALLOW)`)
	cat, err := LoadFiles(kindsUnder(t, opening(t, "127.0.0.1:8089")), filepath.Join("..", "..", "catalog"))
	require.NoError(t, err)
	require.Len(t, cat.Tenants, 1)
	demo := cat.Tenants[0]
	require.Equal(t, "demo", demo.TenantID)
	require.Equal(t, "assistant", demo.DefaultAgent)

	var assistant agent.Agent
	for _, a := range demo.Agents {
		if a.ID == "assistant" {
			assistant = a
		}
	}
	require.Equal(t, "openai:gpt-4o-mini", assistant.Model)
	require.Contains(t, assistant.SystemPrompt, "calculator")
	calc, ok := assistant.Tool("calculator")
	require.True(t, ok)
	require.Equal(t, "calculator", calc.Kind)
	require.Equal(t, agent.ApprovalNever, calc.Approval)
	require.JSONEq(t, string(tools.Calculator().Parameters), string(calc.Parameters))
	require.Positive(t, assistant.Limits.MaxIterations)
	require.Positive(t, assistant.Limits.TurnTimeoutSec)
}

func TestParseToolExecution(t *testing.T) {
	tests := []struct {
		name, line string
		local      bool
	}{
		{"the kind's default", "", true},
		{"activity", "    execution: activity\n", false},
		{"local", "    execution: local\n", true},
		{"null", "    execution: null\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "tenant: demo\ntools:\n  - name: calc\n    kind: calculator\n" + tt.line
			cat, err := Parse(testKinds(t), "t.yaml", []byte(src))
			require.NoError(t, err)
			require.Len(t, cat.Tenants, 1)
			require.Len(t, cat.Tenants[0].Tools, 1)
			require.Equal(t, tt.local, cat.Tenants[0].Tools[0].IsLocal())
		})
	}
}

func TestParseModelExecution(t *testing.T) {
	tests := []struct {
		name, line string
		local      bool
	}{
		{"the default", "", true},
		{"activity", "    model_execution: activity\n", false},
		{"local", "    model_execution: local\n", true},
		{"null", "    model_execution: null\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n" + tt.line
			cat, err := Parse(testKinds(t), "t.yaml", []byte(src))
			require.NoError(t, err)
			require.Len(t, cat.Tenants, 1)
			require.Len(t, cat.Tenants[0].Agents, 1)
			ag := cat.Tenants[0].Agents[0]
			require.Equal(t, tt.local, ag.LocalModelCalls())
			require.Equal(t, tt.local, ag.ForTurn().LocalModelCalls(), "the turn's history keeps it")
		})
	}
}

func TestLimits(t *testing.T) {
	many := func(n int, item func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(item(i))
		}
		return b.String()
	}
	tests := []struct {
		name, src, want string
	}{
		{
			name: "too many agents",
			src:  "tenant: demo\nagents:\n" + many(MaxAgents+1, func(i int) string { return fmt.Sprintf("  - {id: a%d, model: 'openai:m'}\n", i) }),
			want: fmt.Sprintf(`t.yaml:%d: agents[%d].id: tenant "demo" has %d agents; the limit is %d`, MaxAgents+3, MaxAgents, MaxAgents+1, MaxAgents),
		},
		{
			name: "too many tools",
			src:  "tenant: demo\ntools:\n" + many(MaxTools+1, func(i int) string { return fmt.Sprintf("  - {name: t%d, kind: calculator}\n", i) }),
			want: fmt.Sprintf(`t.yaml:%d: tools[%d].name: tenant "demo" has %d tools; the limit is %d`, MaxTools+3, MaxTools, MaxTools+1, MaxTools),
		},
		{
			name: "too many rules",
			src: "tenant: demo\ndefault_agent: a\nagents: [{id: a, model: 'openai:m'}]\nrules:\n" +
				many(MaxRules+1, func(i int) string { return fmt.Sprintf("  - {name: r%d, when: 'true', agent: a}\n", i) }),
			want: fmt.Sprintf(`t.yaml:%d: rules[%d].name: tenant "demo" has %d rules; the limit is %d`, MaxRules+5, MaxRules, MaxRules+1, MaxRules),
		},
		{
			name: "an agent with too many tools",
			src: "tenant: demo\ntools:\n" + many(MaxAgentTools+1, func(i int) string { return fmt.Sprintf("  - {name: t%d, kind: calculator}\n", i) }) +
				"agents:\n  - id: a\n    model: openai:m\n    tools: [" + many(MaxAgentTools+1, func(i int) string { return fmt.Sprintf("t%d, ", i) }) + "]\n",
			want: fmt.Sprintf(`agents[0].tools[%d]: agent "a" lists %d tools; the limit is %d`, MaxAgentTools, MaxAgentTools+1, MaxAgentTools),
		},
		{
			name: "a file too large",
			src:  "tenant: demo\n# " + strings.Repeat("x", MaxFileBytes) + "\n",
			want: fmt.Sprintf("t.yaml: is %d bytes; the limit is %d", MaxFileBytes+16, MaxFileBytes),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.src)
			require.Len(t, got, 1, "%v", got)
			require.Contains(t, got[0], tt.want)
		})
	}
}

func TestToolkitsAndEgress(t *testing.T) {
	cat, err := Parse(kindsUnder(t, opening(t, "10.1.0.0/16")), "t.yaml", []byte(`
tenant: demo
egress: [api.flights.example, "*.weather.example:8443", 10.1.2.0/24]
tools:
  - {name: calc, kind: calculator}
  - {name: precise, kind: calculator, config: {digits: 40}}
  - {name: rough, kind: calculator, config: {digits: 3}}
toolkits:
  - name: math
    description: every calculator
    tools: [precise, rough]
agents:
  - id: a
    model: openai:m
    tools: [calc, math, rough]
`))
	require.NoError(t, err)
	tc := cat.Tenants[0]
	require.True(t, tc.ReplaceEgress)
	require.Equal(t, []string{"api.flights.example", "*.weather.example:8443", "10.1.2.0/24"}, tc.Egress)
	var granted []string
	for _, tool := range tc.Agents[0].Tools {
		granted = append(granted, tool.Name+"/"+tool.FromToolkit)
	}
	require.Equal(t, []string{"calc/", "rough/", "precise/math"}, granted, "listed by name first; a toolkit adds the rest")

	noEgress, err := Parse(testKinds(t), "t.yaml", []byte("tenant: demo\n"))
	require.NoError(t, err)
	require.False(t, noEgress.Tenants[0].ReplaceEgress, "no egress key keeps the stored allowlist")

	tests := []struct{ name, src, want string }{
		{"bad egress entry", "tenant: demo\negress: [https://api.example.com/x]\n", `t.yaml:2: egress[0]: egress entry`},
		{"egress twice", "tenant: demo\negress: [a.example]\n---\ntenant: demo\negress: [b.example]\n", `t.yaml:5: egress[0]: egress is already set for tenant "demo"`},
		{"toolkit of unknown tools", "tenant: demo\ntoolkits:\n  - {name: k, tools: [nope]}\n", `t.yaml:3: toolkits[0].tools[0]: tool "nope" is not defined for tenant "demo"`},
		{"empty toolkit", "tenant: demo\ntoolkits:\n  - {name: k, tools: []}\n", `toolkit "k" grants no tools`},
		{"toolkit named like a tool", "tenant: demo\ntools:\n  - {name: k, kind: calculator}\ntoolkits:\n  - {name: k, tools: [k]}\n", `toolkit "k" has the name of the tool defined at t.yaml:3`},
		{"agent lists an unknown toolkit", "tenant: demo\nagents:\n  - {id: a, model: 'openai:m', tools: [kit]}\n", `tool or toolkit "kit" is not defined for tenant "demo" (it has none)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.src)
			require.NotEmpty(t, got)
			require.Contains(t, strings.Join(got, "\n"), tt.want)
		})
	}
}

// TestConfigSchema: a kind's config schema is checked even when the kind
// itself would take the config.
func TestConfigSchema(t *testing.T) {
	lenient := tools.Kind{Name: "lenient",
		Config: json.RawMessage(`{"type":"object","additionalProperties":false,"required":["url"],"properties":{"url":{"type":"string","minLength":1}}}`),
		Build:  func(agent.Tool, tools.Deps) (tools.Tool, error) { return nil, nil },
	}
	kinds, err := tools.NewRegistry(tools.Deps{}, lenient)
	require.NoError(t, err)
	_, err = Parse(kinds, "t.yaml", []byte("tenant: demo\ntools:\n  - {name: l, kind: lenient, config: {url: x}}\n"))
	require.NoError(t, err)
	_, err = Parse(kinds, "t.yaml", []byte("tenant: demo\ntools:\n  - name: l\n    kind: lenient\n    config: {uri: x}\n"))
	require.EqualError(t, err, `t.yaml:5: tools[0].config: config of kind lenient: /: missing property 'url'; /: additional properties 'uri' not allowed`)
}

func TestParseToolApprovalDefault(t *testing.T) {
	tests := []struct {
		name, kind, line, want string
	}{
		{"a kind without a policy", "calculator", "", agent.ApprovalNever},
		{"the kind's policy", "execute_pipeline", "", pipelinetool.ExecutePipeline().Approval},
		{"the catalog's word wins", "execute_pipeline", "    approval: never\n", agent.ApprovalNever},
		{"the catalog's expression", "execute_pipeline", "    approval: client.user_role != \"admin\"\n", `client.user_role != "admin"`},
		{"an MCP server's tools ask", "mcp", "    config: {url: \"https://mcp.example.com/mcp\"}\n", agent.ApprovalAlways},
		{"unless the catalog says never", "mcp", "    approval: never\n    config: {url: \"https://mcp.example.com/mcp\"}\n", agent.ApprovalNever},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "tenant: demo\ntools:\n  - name: t\n    kind: " + tt.kind + "\n" + tt.line
			cat, err := Parse(testKinds(t), "t.yaml", []byte(src))
			require.NoError(t, err)
			require.Equal(t, tt.want, cat.Tenants[0].Tools[0].Approval)
		})
	}
}

func TestComposites(t *testing.T) {
	cat, err := Parse(testKinds(t), "t.yaml", []byte(`
tenant: demo
promote_after: 3
tools:
  - {name: pipe, kind: execute_pipeline}
agents:
  - {id: a, model: 'openai:m', tools: [pipe, composites]}
  - {id: b, model: 'openai:m', tools: [pipe]}
`))
	require.NoError(t, err)
	tc := cat.Tenants[0]
	require.Equal(t, 3, *tc.PromoteAfter)
	require.True(t, tc.Agents[0].Composites)
	require.Len(t, tc.Agents[0].Tools, 1, "composites is not a tool")
	require.False(t, tc.Agents[1].Composites)

	none, err := Parse(testKinds(t), "t.yaml", []byte("tenant: demo\n"))
	require.NoError(t, err)
	require.Nil(t, none.Tenants[0].PromoteAfter, "no key keeps the stored setting")

	for _, tt := range []struct{ name, src, want string }{
		{"negative", "tenant: demo\npromote_after: -1\n", "t.yaml:2: promote_after: -1: want 0 (never promote) to 1000 runs"},
		{"two values", "tenant: demo\npromote_after: 2\n---\ntenant: demo\npromote_after: 4\n", "t.yaml:5: promote_after: 4 conflicts with promote_after 2 set at t.yaml:2"},
		{"a tool named composites", "tenant: demo\ntools:\n  - {name: composites, kind: calculator}\n", `"composites" is the name agents list for their tenant's composite tools`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Contains(t, strings.Join(problems(t, tt.src), "\n"), tt.want)
		})
	}
}

// TestReadmeLongTurnCatalog: the catalog of the "Long turns" section of
// docs/reference/catalog.md loads, with its limits and context policy.
func TestReadmeLongTurnCatalog(t *testing.T) {
	block := docYAML(t, "reference/catalog.md", "Long turns")
	kinds, err := tools.NewRegistry(tools.Deps{}, tools.Builtin()...)
	require.NoError(t, err)
	c, err := Parse(kinds, "catalog.md", []byte(block))
	require.NoError(t, err, block)
	require.Len(t, c.Tenants, 1)
	require.Len(t, c.Tenants[0].Agents, 1)
	ag := c.Tenants[0].Agents[0]
	require.Equal(t, 5000, ag.Limits.HistoryEvents)
	require.Equal(t, agent.ContextPolicy{MaxTokens: 64000, KeepRecentSteps: 8}, ag.Context)
}

// TestOwnModelProviders: an agent may name a provider the worker adds
// (tools.Deps.ModelProviders), and the error lists it among the known.
func TestOwnModelProviders(t *testing.T) {
	kinds, err := tools.NewRegistry(tools.Deps{ModelProviders: []string{"faq"}}, tools.Builtin()...)
	require.NoError(t, err)
	_, err = Parse(kinds, "t.yaml", []byte("tenant: demo\nagents:\n  - id: a\n    model: faq:v1\n"))
	require.NoError(t, err)
	_, err = Parse(kinds, "t.yaml", []byte("tenant: demo\nagents:\n  - id: a\n    model: acme:v1\n"))
	require.ErrorContains(t, err, `unknown provider "acme" (known: anthropic, ollama, openai, faq)`)
}
