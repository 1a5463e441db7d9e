package llm

import (
	"encoding/json"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// StrictDialect is the strict mode of a model's provider
// (strictschema.For); "" for a model that takes no strict tools.
func StrictDialect(model string) string { return string(strictschema.For(model)) }

// CompileTools is tools as a model of model's provider is sent them: each
// schema made strict where the provider takes strict tools and the schema
// can be (strictschema.Make), within what one request's strict tools may
// hold together (strictschema.Budget); else as the tool's spec has it,
// with the reason (CompiledTool.NotStrict). A tool without parameters
// takes none.
func CompileTools(model string, tools []agent.Tool) []agent.CompiledTool {
	schemas := make([]json.RawMessage, len(tools))
	for i, t := range tools {
		schemas[i] = t.Parameters
	}
	made := strictschema.Schemas(model, schemas)
	out := make([]agent.CompiledTool, len(tools))
	for i, t := range tools {
		out[i] = agent.CompiledTool{Name: t.Name, Description: t.Description, Parameters: made[i].Schema,
			Strict: made[i].Strict, NotStrict: made[i].Reason, ToolVersion: t.VersionOf()}
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
