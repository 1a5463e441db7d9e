package gateway

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	"github.com/agentflow/agentflow/internal/words"
)

// Strict reading of JSON bodies, for the doors whose protocols define
// their bodies in JSON: a value's kind, an object whose members are all
// known, and members read strictly, each error naming what is wrong.

// JSONKind is the first byte of a JSON value, with every number's as
// '0': '{', '[', '"', 't', 'f', 'n' or '0'; 0 for none.
func JSONKind(raw []byte) byte { return intake.JSONKind(raw) }

// JSONObject reads data as one JSON object whose members are all in known.
func JSONObject(what string, data []byte, known []string) (map[string]json.RawMessage, error) {
	fields, err := BodyObject(data, what+" is empty: want a JSON object", what+" is not a JSON object")
	if err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(fields))
	for _, n := range names {
		if !slices.Contains(known, n) {
			return nil, agent.Errorf(agent.CodeInvalid, "%s: unknown member %q (known: %s)", what, words.Clip(n, MaxQuoted), strings.Join(known, ", "))
		}
	}
	return fields, nil
}

// BodyObject reads data as one JSON object, its members unread; one that
// is empty, or another value, is refused with the door's words for it.
func BodyObject(data []byte, empty, notObject string) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "%s", empty)
	}
	if err := OneJSONValue(data); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s", err)
	}
	var fields map[string]json.RawMessage
	if JSONKind(data) != '{' || json.Unmarshal(data, &fields) != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s", notObject)
	}
	return fields, nil
}

// JSONString reads fields[name] into v when it is given and not null.
func JSONString(fields map[string]json.RawMessage, name, at string, v *string) error {
	return JSONMember(fields, name, at, "a string", v)
}

// JSONMember reads fields[name] into v when it is given and not null,
// strictly: want says what it should be.
func JSONMember(fields map[string]json.RawMessage, name, at, want string, v any) error {
	raw, ok := fields[name]
	if !ok || JSONKind(raw) == 'n' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return agent.Errorf(agent.CodeInvalid, "%s.%s: want %s", at, name, want)
	}
	return nil
}
