package llm

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// StrictDialect is the strict mode of a model's provider
// (strictschema.Dialect): OpenAI's for the OpenAI API and the servers
// that speak it, Anthropic's for the Claude models that take strict
// tools; "" for a model that takes none (older Claude models, a model
// name that is not "provider:model").
func StrictDialect(model string) string {
	provider, name, err := agent.ParseModel(model)
	if err != nil {
		return ""
	}
	switch provider {
	case agent.ProviderOpenAI, agent.ProviderOllama:
		return string(strictschema.OpenAI)
	case agent.ProviderAnthropic:
		if anthropicStrict(name) {
			return string(strictschema.Anthropic)
		}
	}
	return ""
}

// anthropicStrict reports whether a Claude model takes strict tools:
// Anthropic's structured outputs came with the 4.5 generation (and Opus
// 4.1), and a model before it refuses a strict tool. Names are
// claude-<family>-<major>[-<minor>][-<date>]; the older
// claude-<major>-<minor>-<family> naming is before it.
func anthropicStrict(name string) bool {
	parts := strings.Split(strings.TrimPrefix(name, "claude-"), "-")
	if len(parts) < 2 || parts[0] == "" || (parts[0][0] >= '0' && parts[0][0] <= '9') {
		return false
	}
	major, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 2 && len(parts[2]) <= 2 {
		minor, _ = strconv.Atoi(parts[2])
	}
	return major > 4 || major == 4 && (minor >= 5 || parts[0] == "opus" && minor == 1)
}

// CompileTools is tools as a model of model's provider is sent them: each
// schema made strict where the provider takes strict tools and the schema
// can be (strictschema.Make), within what one request's strict tools may
// hold together (strictschema.Budget); else as the tool's spec has it,
// with the reason (CompiledTool.NotStrict). A tool without parameters
// takes none.
func CompileTools(model string, tools []agent.Tool) []agent.CompiledTool {
	d := StrictDialect(model)
	budget := strictschema.NewBudget(strictschema.Dialect(d))
	out := make([]agent.CompiledTool, 0, len(tools))
	for _, t := range tools {
		c := agent.CompiledTool{Name: t.Name, Description: t.Description, Parameters: t.Parameters, ToolVersion: t.VersionOf()}
		if len(c.Parameters) == 0 {
			c.Parameters = emptySchema
		}
		if d == "" {
			c.NotStrict = "the model's provider takes no strict tools"
			out = append(out, c)
			continue
		}
		r := strictschema.Make(strictschema.Dialect(d), c.Parameters)
		if ok, why := budget.Take(r); ok {
			c.Parameters, c.Strict = r.Schema, true
		} else {
			c.NotStrict = why
		}
		out = append(out, c)
	}
	return out
}

// Compile is an agent version as its model receives it (agent.Compiled),
// offered the tools given (the agent's, as the model call offers them):
// what a turn's model calls send, kept as an artefact by its content
// hash.
func Compile(ag agent.Agent, tools []agent.Tool) agent.Compiled {
	c := agent.Compiled{
		Format:          agent.CompiledFormat,
		TenantID:        ag.TenantID,
		AgentID:         ag.ID,
		AgentVersion:    ag.Version,
		Model:           ag.Model,
		Dialect:         StrictDialect(ag.Model),
		SystemPrompt:    ag.SystemPrompt,
		Examples:        ag.Examples,
		Tools:           CompileTools(ag.Model, tools),
		OutputSchema:    ag.OutputSchema,
		Temperature:     ag.Temperature,
		MaxOutputTokens: ag.Limits.MaxOutputTokens,
		Thinking:        ag.Thinking,
	}
	return c
}

// specs are the request's tools as the call sends them: Specs as given,
// else Tools compiled for the call's model.
func (req Request) specs() []agent.CompiledTool {
	if req.Specs != nil {
		return req.Specs
	}
	return CompileTools(req.Model, req.Tools)
}

// parametersOf reads a compiled tool's schema for a provider's SDK.
func parametersOf(t agent.CompiledTool) (map[string]json.RawMessage, error) {
	schema := map[string]json.RawMessage{}
	if err := json.Unmarshal(t.Parameters, &schema); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "tool %q: parameters must be a JSON Schema object: %v", t.Name, err)
	}
	return schema, nil
}
