package kind

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
)

// DecodeArgs decodes a call's arguments strictly into v; want shows
// their shape in the error.
func DecodeArgs(args json.RawMessage, v any, want string) error {
	if err := DecodeStrict(args, v); err != nil {
		return agent.Errorf(agent.CodeInvalid, "arguments: %v; want %s", err, want)
	}
	return nil
}

// DecodeConfig decodes a tool spec's config strictly into v; kind names
// the tool kind in the error.
func DecodeConfig(raw json.RawMessage, v any, kind string) error {
	if err := DecodeStrict(raw, v); err != nil {
		return agent.Errorf(agent.CodeInvalid, "%s config: %v", kind, err)
	}
	return nil
}

// DecodeStrict decodes one JSON value into v, refusing fields v does not
// have and anything after the value.
func DecodeStrict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("one JSON object expected, and more follows it")
	}
	return nil
}

// CleanJSON is data with every secret red knows replaced (the rule
// Registry.Execute applies to every call's output, and the mcp kind to a
// server's listing): a value found outside a JSON string, where it cannot
// be replaced without breaking the JSON, is an error rather than kept.
func CleanJSON(red *egress.Redactor, data json.RawMessage) (json.RawMessage, error) {
	if len(data) == 0 {
		return data, nil
	}
	clean := red.Bytes(data)
	if !bytes.Equal(clean, data) && json.Valid(data) && !json.Valid(clean) {
		return nil, agent.Errorf(agent.CodeInvalid, "the tool's data holds a secret's value outside a JSON string, where it cannot be replaced: the data is not passed on")
	}
	return clean, nil
}

// IsJSONObject reports whether raw is one valid JSON object.
func IsJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

// CallKey is a call's idempotency key: the same on every attempt of the
// call, and another for every other call. An OpenAPI write sends it as
// its Idempotency-Key; a reconciled tool's read is given it ($key)
// (tools.CallKey: the delivery rule, in package tools' delivery.go).
func CallKey(tenantID, jobID, callID string) string {
	sum := sha256.Sum256([]byte(tenantID + "\x00" + jobID + "\x00" + callID))
	return hex.EncodeToString(sum[:16])
}
