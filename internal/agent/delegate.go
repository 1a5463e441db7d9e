package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/words"
)

// KindDelegate is the tool kind whose calls hand a sub-task to another
// agent of the tenant: the turn runs each call as a child AgentTurn, not
// as a tool call (seed 004 §5.5).
const KindDelegate = "delegate_to_agent"

// Delegation bounds.
const (
	// DefaultDelegateDepth is a delegate_to_agent tool's max_depth when
	// its config gives none: a top-level turn may delegate, and its child
	// may delegate once more.
	DefaultDelegateDepth = 2
	// MaxDelegateDepth bounds every chain of delegations, whatever the
	// tools' config says: a request deeper than this is refused.
	MaxDelegateDepth = 5
	// MaxDelegateOutputBytes bounds what the delegating model reads of
	// the child's answer; the rest is read by result_ref.
	MaxDelegateOutputBytes = 8 << 10
	// maxDelegateRefs bounds the refs a call hands to the child.
	maxDelegateRefs = 20
)

// ParentRef names the turn that delegated a turn: set on a child
// AgentTurn's request by the parent turn, never by clients.
type ParentRef struct {
	// WorkflowID is the parent turn's workflow id (its stream id).
	WorkflowID string `json:"workflow_id"`
	// CallID is the parent's delegate_to_agent call the child answers.
	CallID string `json:"call_id"`
	// Depth is how many delegations lead to this turn: 1 for a child of a
	// top-level turn.
	Depth int `json:"depth"`
}

func (p *ParentRef) validate() error {
	if p == nil {
		return nil
	}
	if strings.TrimSpace(p.WorkflowID) == "" {
		return Errorf(CodeInvalid, "parent.workflow_id is required")
	}
	if err := validateKey("parent.workflow_id", p.WorkflowID); err != nil {
		return err
	}
	if err := validateKey("parent.call_id", p.CallID); err != nil {
		return err
	}
	if p.Depth < 1 || p.Depth > MaxDelegateDepth {
		return Errorf(CodeInvalid, "parent.depth is %d; want 1 to %d", p.Depth, MaxDelegateDepth)
	}
	return nil
}

// DelegateConfig is a delegate_to_agent tool's catalog config.
type DelegateConfig struct {
	// Agents are the agents the tool may delegate to; empty: any agent of
	// the tenant but the one calling.
	Agents []string `json:"agents,omitempty"`
	// MaxDepth is how deep a chain of delegations through this tool may
	// go: a call whose child would be deeper is refused. Default
	// DefaultDelegateDepth, at most MaxDelegateDepth.
	MaxDepth int `json:"max_depth,omitempty"`
}

// DelegateConfigSchema is the JSON Schema of DelegateConfig, as the
// catalog publishes it.
const DelegateConfigSchema = `{"type":"object","additionalProperties":false,"properties":{` +
	`"agents":{"type":"array","uniqueItems":true,"items":{"type":"string","minLength":1,"maxLength":200,"pattern":"^[^/\\s]+$"},` +
	`"description":"agents of the tenant the tool may delegate to (default: any agent but the caller)"},` +
	`"max_depth":{"type":"integer","minimum":1,"maximum":5,"description":"how many delegations deep a chain through this tool may go (default 2)"}}}`

// ParseDelegateConfig reads and checks a delegate_to_agent config, with
// the defaults filled in. Errors are CodeInvalid and name the field.
func ParseDelegateConfig(raw json.RawMessage) (DelegateConfig, error) {
	var cfg DelegateConfig
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if err := decodeStrict(raw, &cfg); err != nil {
			return DelegateConfig{}, Errorf(CodeInvalid, "%s config: %v (the settings are \"agents\" and \"max_depth\")", KindDelegate, err)
		}
	}
	for i, id := range cfg.Agents {
		if id == "" {
			return DelegateConfig{}, Errorf(CodeInvalid, "%s config: agents[%d] is empty", KindDelegate, i)
		}
		if err := ValidateID(fmt.Sprintf("%s config: agents[%d]", KindDelegate, i), id); err != nil {
			return DelegateConfig{}, err
		}
		if slices.Contains(cfg.Agents[:i], id) {
			return DelegateConfig{}, Errorf(CodeInvalid, "%s config: agent %q is listed twice", KindDelegate, id)
		}
	}
	switch {
	case cfg.MaxDepth == 0:
		cfg.MaxDepth = DefaultDelegateDepth
	case cfg.MaxDepth < 1 || cfg.MaxDepth > MaxDelegateDepth:
		return DelegateConfig{}, Errorf(CodeInvalid, "%s config: max_depth is %d; want 1 to %d", KindDelegate, cfg.MaxDepth, MaxDelegateDepth)
	}
	return cfg, nil
}

// Allows reports whether a tool of this config, called by agent caller,
// may delegate to agent target, and if not why, for the model.
func (c DelegateConfig) Allows(caller, target string) error {
	if len(c.Agents) > 0 {
		if !slices.Contains(c.Agents, target) {
			return Errorf(CodeInvalid, "agent %q is not one this tool may delegate to; it may delegate to %s", target, strings.Join(c.Agents, ", "))
		}
		return nil
	}
	if target == caller {
		return Errorf(CodeInvalid, "agent %q cannot delegate to itself; name another agent", caller)
	}
	return nil
}

// DelegateParameters is the JSON Schema of a delegate_to_agent call's
// arguments.
const DelegateParameters = `{"type":"object","additionalProperties":false,"required":["agent_id","prompt"],"properties":{` +
	`"agent_id":{"type":"string","description":"the agent to hand the task to"},` +
	`"prompt":{"type":"string","description":"the task, as a complete request: the agent sees nothing else of this conversation"},` +
	`"context":{"type":"string","description":"background the agent needs (facts, constraints, what to return), sent with the prompt"},` +
	`"refs":{"type":"array","items":{"type":"string"},"maxItems":20,` +
	`"description":"data refs (cas://…, artifact://…) the agent may read, e.g. a result to work on"}}}`

// DelegateArgs are a delegate_to_agent call's arguments.
type DelegateArgs struct {
	AgentID string   `json:"agent_id"`
	Prompt  string   `json:"prompt"`
	Context string   `json:"context,omitempty"`
	Refs    []string `json:"refs,omitempty"`
}

// ParseDelegateArgs reads a call's arguments; errors are CodeInvalid and
// written for the model.
func ParseDelegateArgs(raw string) (DelegateArgs, error) {
	const example = `{"agent_id": "researcher", "prompt": "Find …"}`
	var a DelegateArgs
	if err := decodeStrict([]byte(raw), &a); err != nil {
		return DelegateArgs{}, Errorf(CodeInvalid, "arguments must be a JSON object like %s (optional: context, refs): %v", example, err)
	}
	switch {
	case strings.TrimSpace(a.AgentID) == "":
		return DelegateArgs{}, Errorf(CodeInvalid, "argument \"agent_id\" is required, e.g. %s", example)
	case strings.TrimSpace(a.Prompt) == "":
		return DelegateArgs{}, Errorf(CodeInvalid, "argument \"prompt\" is required and must not be blank, e.g. %s", example)
	case len(a.Refs) > maxDelegateRefs:
		return DelegateArgs{}, Errorf(CodeInvalid, "argument \"refs\" has %d refs; the limit is %d", len(a.Refs), maxDelegateRefs)
	}
	if err := ValidateID("agent_id", a.AgentID); err != nil {
		return DelegateArgs{}, err
	}
	for i, ref := range a.Refs {
		if !IsRef(ref) {
			return DelegateArgs{}, Errorf(CodeInvalid, "refs[%d] %q is not a data ref: want %s… or %s…", i, words.Clip(ref, 80), CASRefPrefix, ArtifactRefPrefix)
		}
	}
	return a, nil
}

// ChildPrompt is the prompt the child turn gets: the task, then the
// background the caller gave.
func (a DelegateArgs) ChildPrompt() string {
	if strings.TrimSpace(a.Context) == "" {
		return a.Prompt
	}
	return a.Prompt + "\n\nContext:\n" + a.Context
}

// ChildJobID is the job id of the child turn that answers a parent job's
// delegate_to_agent call: "<parent job>-<call id>", the same on every
// replay and retry, so that they find the same child. Ids that would be
// too long or not a valid key are shortened with a hash of both.
func ChildJobID(parentJob, callID string) string {
	id := parentJob + "-" + callID
	if validateKey("job_id", id) == nil {
		return id
	}
	sum := sha256.Sum256([]byte(parentJob + "\x00" + callID))
	suffix := "-" + hex.EncodeToString(sum[:8])
	prefix := parentJob
	for len(prefix)+len(suffix) > MaxKeyLength {
		_, size := utf8.DecodeLastRuneInString(prefix) // at a rune boundary
		prefix = prefix[:len(prefix)-size]
	}
	return prefix + suffix
}

// ChildEvent marks an event of a delegated child turn that its parent's
// log carries: a client shows it as part of the delegation call, or skips
// it, and never takes it for the parent's own (a child's COMPLETED does
// not end the parent's stream; its tokens are not the parent's text).
type ChildEvent struct {
	// CallID is the parent's delegate_to_agent call.
	CallID string `json:"call_id"`
	// StreamID is the child turn's own stream (its workflow id): follow
	// it, or approve its tool calls there.
	StreamID string `json:"stream_id"`
	// Index is the event's index in the child's stream.
	Index int64 `json:"event_index"`
}
