package agent

import (
	"bytes"
	"encoding/json"
)

// MaxOutputSchemaBytes bounds an output schema (Agent.OutputSchema,
// TurnRequest.OutputSchema): it travels with every model call of the turn.
const MaxOutputSchemaBytes = 64 << 10

// CheckOutputSchema checks what can be told of an output schema without
// compiling it (internal/structured compiles it): its size, that it is a
// JSON object, and that its root describes a JSON object, as providers'
// structured output requires. Empty is no schema, and valid.
func CheckOutputSchema(raw json.RawMessage) error {
	return checkSchema(raw, "output schema", "providers' structured output answers with one")
}

// CheckInputSchema checks an agent's input schema (Agent.InputSchema) as
// CheckOutputSchema checks an output schema: a tool's arguments are a JSON
// object too.
func CheckInputSchema(raw json.RawMessage) error {
	return checkSchema(raw, "input schema", "a tool's arguments are one")
}

// checkSchema checks a schema of a JSON object, named what in its errors.
func checkSchema(raw json.RawMessage, what, why string) error {
	if !HasOutputSchema(raw) {
		return nil
	}
	if len(raw) > MaxOutputSchemaBytes {
		return Errorf(CodeInvalid, "%s is %d bytes; the limit is %d", what, len(raw), MaxOutputSchemaBytes)
	}
	// Validate runs in workflow code too: decoding into a map of raw
	// messages and a string is deterministic, whatever workflowcheck
	// makes of encoding/json's reflection.
	var root map[string]json.RawMessage
	//workflowcheck:ignore
	err := json.Unmarshal(raw, &root)
	if err != nil {
		return Errorf(CodeInvalid, "%s must be a JSON Schema object: %v", what, err)
	}
	var typ string
	//workflowcheck:ignore
	err = json.Unmarshal(root["type"], &typ)
	if err != nil || typ != "object" {
		return Errorf(CodeInvalid, `%s must describe a JSON object ("type": "object" at its root): %s`, what, why)
	}
	return nil
}

// HasOutputSchema reports whether raw names a schema: it is neither
// empty nor JSON null.
func HasOutputSchema(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && !bytes.Equal(t, []byte("null"))
}

// OutputSchemaOf is the output schema a turn's answer must match: the
// request's, else its agent's; nil when neither names one.
func (r TurnRequest) OutputSchemaOf(a Agent) json.RawMessage {
	if HasOutputSchema(r.OutputSchema) {
		return r.OutputSchema
	}
	if HasOutputSchema(a.OutputSchema) {
		return a.OutputSchema
	}
	return nil
}
