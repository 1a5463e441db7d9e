package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// member is a member of an object, kept as JSON.
type member struct {
	key string
	raw json.RawMessage
}

// docError is the error of a document that is not JSON or not an object.
func docError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return agent.Errorf(agent.CodeInvalid, "the document is not valid JSON: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		return agent.Errorf(agent.CodeInvalid, "the document is not valid JSON: %v (at byte %d)", te, te.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return agent.Errorf(agent.CodeInvalid, "the document is not valid JSON: it ends early")
	case agent.ErrorCode(err) != agent.CodeInternal:
		return err
	}
	return agent.Errorf(agent.CodeInvalid, "the document cannot be read: %v", err)
}

// objectMembers calls f for each member of the object that starts at the
// decoder's position, f reading (or skipping) its value. Another value
// is read through and is errNotObject.
func objectMembers(dec *json.Decoder, f func(key string) error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		if t == json.Delim('[') {
			for dec.More() {
				if err := skip(dec, 1); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		return errNotObject
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		if err := f(key); err != nil {
			return err
		}
	}
	_, err = dec.Token() // }
	return err
}

var errNotObject = agent.Errorf(agent.CodeInvalid, "not an OpenAPI document: want a JSON object")

// skip skips the value at the decoder's position without holding it:
// members of an object or array one at a time.
func skip(dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return agent.Errorf(agent.CodeInvalid, "the document nests deeper than %d levels", maxDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return err
	}
	d, ok := t.(json.Delim)
	if !ok {
		return nil
	}
	for dec.More() {
		if d == '{' {
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		if err := skip(dec, depth+1); err != nil {
			return err
		}
	}
	_, err = dec.Token()
	return err
}

// rawMembers reads an object's members, each value whole.
func rawMembers(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	var out []member
	err := objectMembers(dec, func(key string) error {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		out = append(out, member{key, v})
		return nil
	})
	return out, err
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

func writeObject(b *bytes.Buffer, members []member) {
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.raw)
	}
	b.WriteByte('}')
}

// scanRefs calls ref with every reference in raw, a JSON value: the value
// of each "$ref" member, and each value of a discriminator's mapping (a
// bare schema name there stands for #/components/schemas/name). It reads
// the bytes once and allocates only for what it finds.
func scanRefs(raw []byte, ref func(string)) {
	type frame struct {
		object bool
		key    string // the key this container is the value of
	}
	var stack []frame
	key := "" // the last key read in the current object
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; c {
		case '"':
			start := i
			i++
			for i < len(raw) && raw[i] != '"' {
				if raw[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(raw) {
				return
			}
			tok := raw[start : i+1]
			j := i + 1
			for j < len(raw) && (raw[j] == ' ' || raw[j] == '\t' || raw[j] == '\r' || raw[j] == '\n') {
				j++
			}
			var s string
			if bytes.IndexByte(tok, '\\') < 0 {
				s = string(tok[1 : len(tok)-1])
			} else if json.Unmarshal(tok, &s) != nil {
				continue
			}
			if j < len(raw) && raw[j] == ':' {
				key = s
				continue
			}
			if len(stack) == 0 || !stack[len(stack)-1].object {
				continue
			}
			top := stack[len(stack)-1]
			switch {
			case key == "$ref":
				ref(s)
			case top.key == "mapping" && len(stack) >= 2 && stack[len(stack)-2].key == "discriminator":
				if !strings.HasPrefix(s, "#") && !strings.Contains(s, "/") {
					s = "#/components/schemas/" + s
				}
				ref(s)
			}
		case '{', '[':
			k := ""
			if len(stack) > 0 && stack[len(stack)-1].object {
				k = key
			}
			stack = append(stack, frame{object: c == '{', key: k})
			key = ""
		case '}', ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			key = ""
		}
	}
}
