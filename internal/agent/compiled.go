package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// ToolVersion names the definition of a tool that ran: its version in
// the tenant's catalog (tool_versions; 0 for a tool defined inside its
// agent, or stored before tools carried versions) and the SHA-256 of its
// canonical spec (Tool.ContentHash), the spec_hash tool_versions keeps.
// A tool's result step keeps it (Message.ToolVersion), so that an audit
// or a replay knows which definition a call ran, whatever the catalog
// holds now.
type ToolVersion struct {
	Version  int    `json:"version,omitempty"`
	SpecHash string `json:"spec_hash"`
}

// VersionOf is the definition t is: its catalog version and content
// hash, the hash computed when the spec does not carry it.
func (t Tool) VersionOf() ToolVersion {
	hash := t.SpecHash
	if hash == "" {
		hash = t.ContentHash()
	}
	return ToolVersion{Version: t.Version, SpecHash: hash}
}

// ContentHash is the hex SHA-256 of t's canonical spec (Canonical)
// without its version and how it was granted (FromToolkit): equal
// definitions have equal hashes, the one tool_versions.spec_hash holds
// for the spec. "" only for a spec that cannot be encoded.
func (t Tool) ContentHash() string {
	t.Version, t.SpecHash, t.FromToolkit = 0, "", ""
	_, hash, err := Canonical(t)
	if err != nil {
		return ""
	}
	return hash
}

// Canonical encodes v so that equal values give equal bytes: embedded
// raw JSON (tool parameters, configs) is re-encoded with sorted keys and
// without insignificant whitespace, and numbers keep their literal form.
// It returns the bytes and their SHA-256 in hex: the catalog's versions
// (tool_versions, agent_versions) and compiled agents are named by it.
func Canonical(v any) ([]byte, string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("encode: %w", err)
	}
	generic, err := UnmarshalNumbers(raw)
	if err != nil {
		return nil, "", fmt.Errorf("decode: %w", err)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		return nil, "", fmt.Errorf("encode: %w", err)
	}
	sum := sha256.Sum256(out)
	return out, hex.EncodeToString(sum[:]), nil
}

// CompiledFormat names what a compile makes of an agent version (the
// model call's compiler, internal/llm.Compile). A release that changes
// what it makes names a new format, and an artefact of another format is
// compiled again; until then a stored artefact is what its agent's model
// calls send.
const CompiledFormat = "agentflow.compiled/1"

// Compiled is an agent version as its model receives it: the model, the
// system prompt and examples, each tool as the provider is sent it (its
// schema made strict where the provider takes strict tools: Strict, else
// why not: NotStrict), and the structured-output schema. It is kept as
// an artefact named by its content hash (CompiledRef), written once per
// agent version and read by each turn, and compiled again from the
// version when it is missing.
type Compiled struct {
	Format       string `json:"format"`
	TenantID     string `json:"tenant_id"`
	AgentID      string `json:"agent_id"`
	AgentVersion int    `json:"agent_version"`
	Model        string `json:"model"`
	// Dialect is the strict mode the tools were made for (the
	// provider's, internal/llm/strictschema); "" when the model's
	// provider takes no strict tools.
	Dialect         string          `json:"dialect,omitempty"`
	SystemPrompt    string          `json:"system_prompt,omitempty"`
	Examples        []Example       `json:"examples,omitempty"`
	Tools           []CompiledTool  `json:"tools,omitempty"`
	OutputSchema    json.RawMessage `json:"output_schema,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	MaxOutputTokens int             `json:"max_output_tokens,omitempty"`
	Thinking        *Thinking       `json:"thinking,omitempty"`
}

// CompiledTool is a tool as its agent's model is sent it, with the
// definition it was made from (ToolVersion).
type CompiledTool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Parameters is the JSON Schema sent: rewritten for strict mode when
	// Strict, else as the tool's spec has it.
	Parameters json.RawMessage `json:"parameters"`
	Strict     bool            `json:"strict"`
	// NotStrict says why a tool goes without strict; "" when it is.
	NotStrict string `json:"not_strict,omitempty"`
	ToolVersion
}

// Tool is the compiled tool named name.
func (c *Compiled) Tool(name string) (CompiledTool, bool) {
	for _, t := range c.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return CompiledTool{}, false
}

// CompiledRef names a compiled agent's bytes by their SHA-256 (hex):
// cas://sha256:<hex>, the ref every content-addressed thing has here.
func CompiledRef(sum string) string { return CASRefPrefix + sum }
