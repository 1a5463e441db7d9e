package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Texts hands f every text of the request that a person or a client
// wrote and that the turn keeps, shows or sends its model — the prompt,
// its text parts, and the context's user_role, ui_page, metadata values
// and the strings of its workflow_state — to rewrite in place, all in one
// call (the gateway's PII redaction), and keeps what f wrote. Identifiers
// (job_id, session_id, user_id, metadata keys, …) are not among them: they
// name things. The request's parts and metadata are copied before they
// are written, so that a caller's slice or map is never changed.
func (r *TurnRequest) Texts(f func(texts ...*string) error) error {
	texts := []*string{&r.Prompt}
	r.Parts = slices.Clone(r.Parts)
	for i := range r.Parts {
		if r.Parts[i].Type == PartText {
			texts = append(texts, &r.Parts[i].Text)
		}
	}
	return r.Context.texts(texts, f)
}

// Texts is TurnRequest.Texts for a message to a conversation: its prompt
// and its context's texts.
func (m *SendMessage) Texts(f func(texts ...*string) error) error {
	return m.Context.texts([]*string{&m.Prompt}, f)
}

// texts adds the context's texts to texts, hands them all to f, and keeps
// what f wrote.
func (c *TurnContext) texts(texts []*string, f func(texts ...*string) error) error {
	texts = append(texts, &c.UserRole, &c.UIPage)
	keys := slices.Sorted(maps.Keys(c.Metadata))
	values := make([]string, len(keys))
	for i, k := range keys {
		values[i] = c.Metadata[k]
		texts = append(texts, &values[i])
	}
	state, strs := jsonStrings(c.WorkflowState)
	before := make([]string, len(strs))
	for i, s := range strs {
		before[i] = *s
	}
	if err := f(append(texts, strs...)...); err != nil {
		return err
	}
	if len(keys) > 0 {
		c.Metadata = make(map[string]string, len(keys))
		for i, k := range keys {
			c.Metadata[k] = values[i]
		}
	}
	for i, s := range strs {
		if *s == before[i] {
			continue
		}
		raw, err := json.Marshal(state)
		if err != nil {
			return fmt.Errorf("encode context.workflow_state: %w", err)
		}
		c.WorkflowState = raw
		break
	}
	return nil
}

// jsonStrings decodes a JSON document with each of its strings (not its
// object keys) as a *string, and returns it and the strings in document
// order; a document that does not decode has none.
func jsonStrings(raw json.RawMessage) (any, []*string) {
	if len(raw) == 0 {
		return nil, nil
	}
	doc, err := UnmarshalNumbers(raw)
	if err != nil {
		return nil, nil
	}
	var strs []*string
	var walk func(v any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case string:
			s := &t
			strs = append(strs, s)
			return s
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				t[k] = walk(t[k])
			}
		}
		return v
	}
	return walk(doc), strs
}
