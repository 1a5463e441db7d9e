package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	openaidoor "github.com/agentflow/agentflow/internal/gateway/openai"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
)

// openAIError is the body of an error of the OpenAI-compatible endpoints.
type openAIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    string  `json:"code"`
	} `json:"error"`
}

// TestOpenAIRefusals: requests the OpenAI-compatible endpoints refuse
// before anything is called (the gateway has no backends), each answered
// with OpenAI's error object, its status, and whether to retry.
func TestOpenAIRefusals(t *testing.T) {
	srv := gatewaytest.StartHTTPAPI(t, []gateway.Door{openaidoor.New(nil)})
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, method, path, token, body string
		header                          map[string]string
		status                          int
		typ, code, param, msg           string
	}{
		{"no token", "GET", "/v1/models", "", "", nil, 401, "authentication_error", "invalid_api_key", "", "missing bearer token"},
		{"unknown token", "POST", "/v1/chat/completions", "nope", `{"model":"a",` + msgs + `}`, nil, 401, "authentication_error", "invalid_api_key", "", "unknown token"},
		{"malformed JSON", "POST", "/v1/chat/completions", "tok", `{"model":`, nil, 400, "invalid_request_error", "InvalidRequest", "", "request body is not JSON"},
		{"n=2", "POST", "/v1/chat/completions", "tok", `{"model":"a","n":2,` + msgs + `}`, nil, 400, "invalid_request_error", "unsupported_value", "n", "one answer"},
		{"client tools", "POST", "/v1/chat/completions", "tok", `{"model":"a","tools":[{"type":"function","function":{"name":"f"}}],` + msgs + `}`, nil,
			400, "invalid_request_error", "unsupported_parameter", "tools", "run on the server"},
		{"no user message", "POST", "/v1/chat/completions", "tok", `{"model":"a","messages":[{"role":"system","content":"x"}]}`, nil,
			400, "invalid_request_error", "InvalidRequest", "messages", "no user message"},
		{"a session id with a slash", "POST", "/v1/chat/completions", "tok", `{"model":"a",` + msgs + `}`, map[string]string{"X-Agentflow-Session": "a/b"},
			400, "invalid_request_error", "InvalidRequest", "", "X-Agentflow-Session \"a/b\" may not contain '/'"},
		{"an idempotency key with a space", "POST", "/v1/chat/completions", "tok", `{"model":"a",` + msgs + `}`, map[string]string{"Idempotency-Key": "a b"},
			400, "invalid_request_error", "InvalidRequest", "", "Idempotency-Key \"a b\" may not contain spaces"},
		{"too large", "POST", "/v1/chat/completions", "tok", `{"model":"a","messages":[{"role":"user","content":"` + strings.Repeat("x", gateway.MaxBodyBytes) + `"}]}`, nil,
			413, "invalid_request_error", "InvalidRequest", "", "larger than"},
		{"another method", "GET", "/v1/chat/completions", "tok", "", nil, 405, "invalid_request_error", "InvalidRequest", "", "does not take GET"},
		{"a malformed model id", "GET", "/v1/models/a%20b", "tok", "", nil, 400, "invalid_request_error", "InvalidRequest", "", "may not contain spaces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, srv.URL+tc.path, body)
			require.NoError(t, err)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "%s", data)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			require.Equal(t, "false", resp.Header.Get("X-Should-Retry"), "none of these succeeds later")
			var e openAIError
			require.NoError(t, json.Unmarshal(data, &e), "%s", data)
			require.Equal(t, tc.typ, e.Error.Type)
			require.Equal(t, tc.code, e.Error.Code)
			require.Contains(t, e.Error.Message, tc.msg)
			if tc.param == "" {
				require.Nil(t, e.Error.Param)
			} else {
				require.NotNil(t, e.Error.Param)
				require.Equal(t, tc.param, *e.Error.Param)
			}
			if tc.status == http.StatusUnauthorized {
				require.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
			}
		})
	}
}

// TestOpenAIClientReadsRefusals: OpenAI's Go client reads a refusal as
// an API error, with its status, code, parameter and message, and does
// not retry it.
func TestOpenAIClientReadsRefusals(t *testing.T) {
	srv := gatewaytest.StartHTTPAPI(t, []gateway.Door{openaidoor.New(nil)})
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("tok"))
	_, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: "assistant", N: openai.Int(2), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "unsupported_value", apiErr.Code)
	require.Equal(t, "n", apiErr.Param)
	require.Equal(t, "invalid_request_error", apiErr.Type)
	require.Contains(t, apiErr.Message, "n is 2")

	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "assistant", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithAPIKey("wrong"))
	require.False(t, stream.Next())
	require.True(t, errors.As(stream.Err(), &apiErr), "%v", stream.Err())
	require.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	require.Equal(t, "invalid_api_key", apiErr.Code)
}
