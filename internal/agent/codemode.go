package agent

import (
	"bytes"
	"encoding/json"
	"slices"
)

// RunProgramTool is the tool an agent in code mode offers its model
// instead of the tools its programs call: {"program": "<JavaScript>"}.
// The turn runs the program (internal/program) and makes each of its tool
// calls as a call of the agent's tool, with its approval, egress, secrets,
// limits and events.
const RunProgramTool = "run_program"

// CodeMode is an agent's code mode (Agent.CodeMode): its model writes one
// program that calls Tools, instead of one model round trip a call.
// Zero limits take internal/program's defaults; the catalog refuses one
// over its maximum.
type CodeMode struct {
	// Tools are the agent's tools a program may call, each by its name
	// (a JavaScript identifier). The model is not offered them directly.
	Tools []string `json:"tools"`
	// TimeSec bounds each run of the program's interpreter, in seconds.
	TimeSec int `json:"time_sec,omitempty"`
	// MaxCalls bounds the tool calls of one program.
	MaxCalls int `json:"max_calls,omitempty"`
	// MaxOutputBytes bounds the program's console output and return value
	// together.
	MaxOutputBytes int `json:"max_output_bytes,omitempty"`
	// All is set by ParseCodeMode for `code_mode: true`: every tool the
	// agent is granted, which the catalog resolves into Tools.
	All bool `json:"-"`
}

// ParseCodeMode decodes an agent's code_mode: true (every tool), false
// (none: nil) or {tools, time_sec, max_calls, max_output_bytes}. It checks
// the shape; the catalog checks the names against the agent's tools and
// the limits against the runner's maxima.
func ParseCodeMode(raw json.RawMessage) (*CodeMode, error) {
	raw = bytes.TrimSpace(raw)
	switch string(raw) {
	case "", "null", "false":
		return nil, nil
	case "true":
		return &CodeMode{All: true}, nil
	}
	var c CodeMode
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, Errorf(CodeInvalid, "code_mode: %v (want true, or {tools, time_sec, max_calls, max_output_bytes})", err)
	}
	if dec.More() {
		return nil, Errorf(CodeInvalid, "code_mode: one value, please")
	}
	if len(c.Tools) == 0 {
		return nil, Errorf(CodeInvalid, "code_mode: tools is empty: name the tools a program may call, or write code_mode: true for all")
	}
	for i, name := range c.Tools {
		if !jsIdentifier(name) {
			return nil, Errorf(CodeInvalid, "code_mode: tools[%d] %q is not a JavaScript identifier: a program calls it as tools.<name>", i, name)
		}
		if slices.Contains(c.Tools[:i], name) {
			return nil, Errorf(CodeInvalid, "code_mode: tools[%d] %q is listed twice", i, name)
		}
	}
	if c.TimeSec < 0 || c.MaxCalls < 0 || c.MaxOutputBytes < 0 {
		return nil, Errorf(CodeInvalid, "code_mode: time_sec, max_calls and max_output_bytes must not be negative")
	}
	return &c, nil
}

// CodeModeTool reports whether a program of the agent may call the tool
// named: then its model is not offered it.
func (a Agent) CodeModeTool(name string) bool {
	return a.CodeMode != nil && slices.Contains(a.CodeMode.Tools, name)
}

// ProgramCallable reports whether a program can call the tool: its name
// is a JavaScript identifier, and it runs as a tool (delegation and
// questions to a person stay the model's own calls).
func ProgramCallable(t Tool) bool {
	return jsIdentifier(t.Name) && t.Name != RunProgramTool && t.Kind != KindDelegate && t.Kind != KindAskUser
}

// RunsPrograms reports whether call c is the agent's run_program: the
// turn runs it as a program, not as a tool.
func (a Agent) RunsPrograms(c ToolCall) bool {
	return a.CodeMode != nil && c.Name == RunProgramTool
}

// ProgramSource is the program of a run_program call's arguments.
func ProgramSource(arguments string) (string, error) {
	var args struct {
		Program *string `json:"program"`
	}
	if err := json.Unmarshal([]byte(arguments), &args); err != nil || args.Program == nil {
		return "", Errorf(CodeInvalid, `%s takes {"program": "<JavaScript>"}`, RunProgramTool)
	}
	return *args.Program, nil
}

// jsIdentifier reports whether s is an ASCII JavaScript identifier.
func jsIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || r == '$' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z':
		case i > 0 && '0' <= r && r <= '9':
		default:
			return false
		}
	}
	return true
}
