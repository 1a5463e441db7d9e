package llm_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/llm"
)

// TestGenerateSendsResponseFormat: an output format reaches an
// OpenAI-compatible server as response_format json_schema with the whole
// schema (keywords langchaingo's own schema type would drop included),
// streamed or not; strict only when the schema meets strict mode's rules.
func TestGenerateSendsResponseFormat(t *testing.T) {
	open := `{"type":"object","properties":{"city":{"type":"string","pattern":"^[A-Z]"},"n":{"anyOf":[{"type":"integer","minimum":1},{"type":"null"}]}},"required":["city"]}`
	closed := `{"type":"object","properties":{"city":{"type":"string"},"tags":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}},"required":["k"],"additionalProperties":false}}},"required":["city","tags"],"additionalProperties":false}`
	cases := []struct {
		name, schema, wantName string
		stream, strict         bool
	}{
		{"open schema", open, "trip", false, false},
		{"closed schema, streamed", closed, "trip", true, true},
		{"a name providers refuse", closed, "output", false, true},
		{"a keyword strict mode does not take", strings.Replace(closed, `{"type":"string"}`, `{"type":"string","minLength":1}`, 1), "trip", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv, r := start(t)
			name := "trip"
			if c.wantName == "output" {
				name = "a name with spaces"
			}
			req := llm.Request{Model: "openai:m", Messages: user("hello"), Output: &llm.OutputFormat{Name: name, Schema: json.RawMessage(c.schema)}}
			if c.stream {
				req.OnText = func(context.Context, string) error { return nil }
			}
			_, err := r.Generate(context.Background(), req)
			require.NoError(t, err)
			reqs := srv.Requests()
			require.Len(t, reqs, 1)
			require.Equal(t, c.stream, reqs[0].Stream)
			require.Nil(t, reqs[0].Temperature, "the temperature is still left out")
			var got struct {
				Type       string `json:"type"`
				JSONSchema struct {
					Name   string          `json:"name"`
					Schema json.RawMessage `json:"schema"`
					Strict bool            `json:"strict"`
				} `json:"json_schema"`
			}
			require.NoError(t, json.Unmarshal(reqs[0].ResponseFormat, &got), "%s", reqs[0].ResponseFormat)
			require.Equal(t, "json_schema", got.Type)
			require.Equal(t, c.wantName, got.JSONSchema.Name)
			require.JSONEq(t, c.schema, string(got.JSONSchema.Schema))
			require.Equal(t, c.strict, got.JSONSchema.Strict)
		})
	}

	t.Run("none without an output format", func(t *testing.T) {
		srv, r := start(t)
		_, err := r.Generate(context.Background(), llm.Request{Model: "openai:m", Messages: user("hello")})
		require.NoError(t, err)
		require.Nil(t, srv.Requests()[0].ResponseFormat)
	})
}

// TestGenerateAnthropicOutputInstruction: the Anthropic client has no
// structured-output option; the schema is given in the system prompt,
// after the agent's own.
func TestGenerateAnthropicOutputInstruction(t *testing.T) {
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"{\"city\":\"Oslo\"}"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":5}}`))
	}))
	t.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{AnthropicAPIKey: "sk-ant-test", AnthropicBaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	schema := `{"type":"object","properties":{"city":{"type":"string"}}}`
	resp, err := r.Generate(context.Background(), llm.Request{Model: "anthropic:claude-test", Messages: user("where?"),
		Output: &llm.OutputFormat{Schema: json.RawMessage(schema)}})
	require.NoError(t, err)
	require.Equal(t, `{"city":"Oslo"}`, resp.Message.Content)
	var sent struct {
		System []struct {
			Text string `json:"text"`
		} `json:"system"`
		ResponseFormat json.RawMessage `json:"response_format"`
	}
	require.NoError(t, json.Unmarshal(body, &sent))
	require.Len(t, sent.System, 2, "the agent's system prompt, then the instruction: one block each")
	require.Equal(t, "be brief", sent.System[0].Text)
	require.Equal(t, "Answer with only a JSON object that matches this JSON Schema, without any other text or code fences:\n"+schema, sent.System[1].Text)
	require.Nil(t, sent.ResponseFormat)
}
