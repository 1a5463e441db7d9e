package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
	openaidoor "github.com/agentflow/agentflow/internal/gateway/openai"
)

// TestOpenAIResponsesRefusals: requests of the Responses API refused
// before anything is called (the gateway has no backends), each answered
// with OpenAI's error object naming the parameter at fault; another
// tenant's response, or what is no response id, is not found.
func TestOpenAIResponsesRefusals(t *testing.T) {
	srv := gatewaytest.StartHTTPAPI(t, []gateway.Door{openaidoor.New(nil)})
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		typ, code, param, msg           string
	}{
		{"no token", "POST", "/v1/responses", "", `{"model":"a","input":"hi"}`, 401, "authentication_error", "invalid_api_key", "", "missing bearer token"},
		{"malformed JSON", "POST", "/v1/responses", "tok", `{"model":`, 400, "invalid_request_error", "InvalidRequest", "", "request body is not JSON"},
		{"no input", "POST", "/v1/responses", "tok", `{"model":"a"}`, 400, "invalid_request_error", "InvalidRequest", "input", "input is required"},
		{"an unknown parameter", "POST", "/v1/responses", "tok", `{"model":"a","input":"hi","modalities":["audio"]}`, 400, "invalid_request_error", "unknown_parameter", "modalities", "unknown parameter"},
		{"store false", "POST", "/v1/responses", "tok", `{"model":"a","input":"hi","store":false}`, 400, "invalid_request_error", "unsupported_value", "store", "cannot be honoured"},
		{"an image", "POST", "/v1/responses", "tok", `{"model":"a","input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
			400, "invalid_request_error", "unsupported_value", "input[0].content[0].type", "text parts only"},
		{"a previous response and a session", "POST", "/v1/responses", "tok", `{"model":"a","input":"hi","previous_response_id":"turn/demo/j"}`,
			400, "invalid_request_error", "InvalidRequest", "previous_response_id", "give one"},
		{"another tenant's previous response", "POST", "/v1/responses", "tok", `{"model":"a","input":"hi","previous_response_id":"turn/rival/j"}`,
			404, "invalid_request_error", "NotFound", "previous_response_id", "not found"},
		{"another method", "PUT", "/v1/responses", "tok", "", 405, "invalid_request_error", "InvalidRequest", "", "does not take PUT"},
		{"delete", "DELETE", "/v1/responses/turn%2Fdemo%2Fj", "tok", "", 405, "invalid_request_error", "InvalidRequest", "", "does not take DELETE"},
		{"another tenant's response", "GET", "/v1/responses/turn%2Frival%2Fj", "tok", "", 404, "invalid_request_error", "NotFound", "", `response "turn/rival/j" not found`},
		{"no response id", "GET", "/v1/responses/resp_123", "tok", "", 404, "invalid_request_error", "NotFound", "", "not found"},
		{"cancel another tenant's", "POST", "/v1/responses/turn%2Frival%2Fj/cancel", "tok", "", 404, "invalid_request_error", "NotFound", "", "not found"},
		{"starting_after without stream", "GET", "/v1/responses/turn%2Fdemo%2Fj?starting_after=3", "tok", "", 400, "invalid_request_error", "InvalidRequest", "starting_after", "only taken with stream=true"},
		{"a negative starting_after", "GET", "/v1/responses/turn%2Fdemo%2Fj?stream=true&starting_after=-1", "tok", "", 400, "invalid_request_error", "InvalidRequest", "starting_after", "want the sequence number"},
		{"stream not a boolean", "GET", "/v1/responses/turn%2Fdemo%2Fj?stream=yes", "tok", "", 400, "invalid_request_error", "InvalidRequest", "stream", "want true or false"},
		{"an unknown query parameter", "GET", "/v1/responses/turn%2Fdemo%2Fj?after=3", "tok", "", 400, "invalid_request_error", "unknown_parameter", "after", "unknown query parameter"},
		{"a body with more than stream", "GET", "/v1/responses/turn%2Fdemo%2Fj", "tok", `{"stream":true,"x":1}`, 400, "invalid_request_error", "InvalidRequest", "stream", "want {\"stream\": true}"},
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
			if tc.name == "a previous response and a session" {
				req.Header.Set("X-Agentflow-Session", "s1")
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, "%s", data)
			require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			var e openAIError
			require.NoError(t, json.Unmarshal(data, &e), "%s", data)
			require.Equal(t, tc.typ, e.Error.Type)
			require.Equal(t, tc.code, e.Error.Code)
			require.Contains(t, e.Error.Message, tc.msg)
			if tc.param == "" {
				require.Nil(t, e.Error.Param)
			} else {
				require.NotNil(t, e.Error.Param, "%s", data)
				require.Equal(t, tc.param, *e.Error.Param)
			}
		})
	}
}

// TestOpenAIResponsesClientReadsRefusals: OpenAI's Go client reads a
// refusal of the Responses API as an API error, with its parameter.
func TestOpenAIResponsesClientReadsRefusals(t *testing.T) {
	srv := gatewaytest.StartHTTPAPI(t, []gateway.Door{openaidoor.New(nil)})
	client := openai.NewClient(option.WithBaseURL(srv.URL+"/v1"), option.WithAPIKey("tok"), option.WithMaxRetries(0))
	_, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "assistant", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, Store: openai.Bool(false),
	})
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
	require.Equal(t, "unsupported_value", apiErr.Code)
	require.Equal(t, "store", apiErr.Param)

	_, err = client.Responses.Get(context.Background(), "turn/rival/j", responses.ResponseGetParams{})
	require.True(t, errors.As(err, &apiErr), "%v", err)
	require.Equal(t, http.StatusNotFound, apiErr.StatusCode)
}
