package agent

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTexts: a request hands every text it carries to be rewritten at
// once — the prompt, its text parts, the context's user_role, ui_page,
// metadata values and workflow_state strings — and keeps what was
// written; identifiers, keys, other parts and the caller's map and slice
// are left as they were; a refusal changes nothing.
func TestTexts(t *testing.T) {
	upper := func(texts ...*string) error {
		for _, s := range texts {
			*s = strings.ToUpper(*s)
		}
		return nil
	}
	metadata := map[string]string{"b": "two", "a": "one"}
	parts := []Part{{Type: PartText, Text: "part"}, {Type: PartImage, URL: "https://example.com/a.png"}}
	req := TurnRequest{TenantID: "demo", JobID: "job", SessionID: "sess", UserID: "u@x", Prompt: "hi", Parts: parts,
		Context: TurnContext{UserRole: "role", UIPage: "page", Metadata: metadata,
			WorkflowState:   json.RawMessage(`{"step": 2, "notes": ["a", {"k": "v"}], "flag": true}`),
			PreviousResults: []PreviousResult{{NodeID: "n", ResultRef: "r"}}}}

	var seen []string
	require.NoError(t, req.Texts(func(texts ...*string) error {
		for _, s := range texts {
			seen = append(seen, *s)
		}
		return upper(texts...)
	}))
	require.Equal(t, []string{"hi", "part", "role", "page", "one", "two", "a", "v"}, seen, "every text, in one call, metadata by key")
	require.Equal(t, "HI", req.Prompt)
	require.Equal(t, []Part{{Type: PartText, Text: "PART"}, {Type: PartImage, URL: "https://example.com/a.png"}}, req.Parts)
	require.Equal(t, "ROLE", req.Context.UserRole)
	require.Equal(t, "PAGE", req.Context.UIPage)
	require.Equal(t, map[string]string{"a": "ONE", "b": "TWO"}, req.Context.Metadata)
	require.JSONEq(t, `{"step": 2, "notes": ["A", {"k": "V"}], "flag": true}`, string(req.Context.WorkflowState))
	require.Equal(t, []PreviousResult{{NodeID: "n", ResultRef: "r"}}, req.Context.PreviousResults)
	require.Equal(t, "u@x", req.UserID, "identifiers are not texts")
	require.Equal(t, "part", parts[0].Text, "the caller's parts are not written")
	require.Equal(t, map[string]string{"b": "two", "a": "one"}, metadata, "nor its metadata")

	state := json.RawMessage(`{"n":  1}`)
	msg := SendMessage{Prompt: "hello", Context: TurnContext{Metadata: map[string]string{"k": "v"}, WorkflowState: state}}
	require.NoError(t, msg.Texts(upper))
	require.Equal(t, "HELLO", msg.Prompt)
	require.Equal(t, map[string]string{"k": "V"}, msg.Context.Metadata)
	require.Equal(t, state, msg.Context.WorkflowState, "a state none of whose strings changed keeps its bytes")

	refused := TurnRequest{Prompt: "hi", Context: TurnContext{Metadata: map[string]string{"k": "v"}, WorkflowState: json.RawMessage(`{"s": "v"}`)}}
	err := refused.Texts(func(...*string) error { return errors.New("vault busy") })
	require.EqualError(t, err, "vault busy")
	require.Equal(t, map[string]string{"k": "v"}, refused.Context.Metadata)
	require.JSONEq(t, `{"s": "v"}`, string(refused.Context.WorkflowState))
}

// FuzzTexts: whatever a request's context holds, rewriting its texts
// keeps its shape — the same metadata keys, a workflow_state that is
// still a JSON object with the same keys — and leaving them as they are
// changes nothing.
func FuzzTexts(f *testing.F) {
	for _, s := range []string{
		`{"step": 2, "note": "x"}`, `{}`, `{"a": [1, "b", {"c": null}]}`, `{"a": "\u00e9\u2028<>&"}`, `not json`, ``,
	} {
		f.Add("prompt", "k", "v", s)
	}
	f.Fuzz(func(t *testing.T, prompt, key, value, state string) {
		req := TurnRequest{Prompt: prompt, Parts: []Part{{Type: PartText, Text: value}},
			Context: TurnContext{Metadata: map[string]string{key: value}, WorkflowState: json.RawMessage(state)}}
		same := req
		require.NoError(t, same.Texts(func(...*string) error { return nil }))
		require.Equal(t, req, same, "nothing written, nothing changed")

		require.NoError(t, req.Texts(func(texts ...*string) error {
			for _, s := range texts {
				*s = "[x]" + *s
			}
			return nil
		}))
		require.Equal(t, "[x]"+prompt, req.Prompt)
		require.Equal(t, map[string]string{key: "[x]" + value}, req.Context.Metadata)
		var before, after map[string]any
		if json.Unmarshal([]byte(state), &before) == nil {
			require.NoError(t, json.Unmarshal(req.Context.WorkflowState, &after), "%s", req.Context.WorkflowState)
			require.Len(t, after, len(before))
			for k := range before {
				require.Contains(t, after, k)
			}
		}
	})
}
