package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"
)

// approvalInput is an input of one mcp_approval_response item.
func approvalInput(requestID string, approve bool) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMcpApprovalResponse(requestID, approve),
	}}
}

// TestOpenAIResponsesApproval: a response whose tool call waits for
// approval shows it as an mcp_approval_request item (a whole response
// answers there, in progress); OpenAI's Go client
// approves it the OpenAI way (previous_response_id and an
// mcp_approval_response item), and the answer is the same response,
// completed, its output text the stored result. A token without the
// approver role, an approval request the response never asked, another
// tenant's response, a malformed item and an approval already decided
// are refused in OpenAI's error shape, and decide nothing. A rejection
// asked with stream: true streams the same response from its start.
func TestOpenAIResponsesApproval(t *testing.T) {
	e := newResponsesEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	user := openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.userTk), option.WithMaxRetries(0))

	// Whole, the response answers where its call waits.
	r, err := e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "careful", Input: textInput("Carefully, what is 2 + 2?")})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusInProgress, r.Status)
	require.Len(t, r.Output, 1)
	asked := r.Output[0].AsMcpApprovalRequest()
	require.Equal(t, "mcp_approval_request", r.Output[0].Type)
	require.True(t, strings.HasPrefix(asked.ID, "mcpr_"), asked.ID)
	require.Equal(t, "careful_calculator", asked.Name)
	require.JSONEq(t, `{"expression": "2 + 2"}`, asked.Arguments)
	require.Equal(t, "careful", asked.ServerLabel)

	decide := func(c openai.Client, prev string, input responses.ResponseNewParamsInputUnion) (*responses.Response, error) {
		return c.Responses.New(ctx, responses.ResponseNewParams{Model: "careful", PreviousResponseID: openai.String(prev), Input: input})
	}
	for _, tc := range []struct {
		name   string
		client openai.Client
		prev   string
		input  responses.ResponseNewParamsInputUnion
		status int
		code   string
		param  string
	}{
		{"no approver role", user, r.ID, approvalInput(asked.ID, true), http.StatusForbidden, "PermissionDenied", ""},
		{"an unknown approval request", e.demo, r.ID, approvalInput("mcpr_000000000000000000000000", true), http.StatusNotFound, "NotFound", "input[0].approval_request_id"},
		{"another tenant's response", e.rival, r.ID, approvalInput(asked.ID, true), http.StatusNotFound, "NotFound", "previous_response_id"},
		{"a malformed item", e.demo, r.ID, responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMcpApprovalResponse("", true)}}, http.StatusBadRequest, "InvalidRequest", "input[0].approval_request_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decide(tc.client, tc.prev, tc.input)
			apiErr := requireAPIError(t, err, tc.status, tc.code)
			require.Equal(t, tc.param, apiErr.Param)
		})
	}
	got, err := e.demo.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	require.Equal(t, responses.ResponseStatusInProgress, got.Status, "nothing was decided")

	done, err := decide(e.demo, r.ID, approvalInput(asked.ID, true))
	require.NoError(t, err)
	require.Equal(t, r.ID, done.ID, "the turn that goes on is the same response")
	require.Equal(t, responses.ResponseStatusCompleted, done.Status)
	require.Equal(t, []string{"mcp_approval_request", "mcp_call", "message"}, []string{done.Output[0].Type, done.Output[1].Type, done.Output[2].Type})
	stored, err := e.Store().Result(ctx, "demo", strings.TrimPrefix(r.ID, "turn/demo/"))
	require.NoError(t, err)
	require.Equal(t, "The result is 4.", stored.Output)
	require.Equal(t, stored.Output, done.OutputText())

	_, err = decide(e.demo, r.ID, approvalInput(asked.ID, false))
	apiErr := requireAPIError(t, err, http.StatusConflict, "Conflict")
	require.Contains(t, apiErr.Message, "already decided")

	// Rejected, streamed: the same response's stream from its start, to
	// the answer the model gives the rejection.
	r, err = e.demo.Responses.New(ctx, responses.ResponseNewParams{Model: "careful", Input: textInput("Carefully, what is 3 + 3?"), Background: openai.Bool(true)})
	require.NoError(t, err)
	asked = waitApprovalRequest(ctx, t, e, r.ID)
	events := readEvents(t, e.demo.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "careful", PreviousResponseID: openai.String(r.ID),
		Input: approvalInput(asked.ID, false)}), nil)
	requireWellNumbered(t, events)
	require.Equal(t, "response.created", events[0].Type)
	last := events[len(events)-1]
	require.Equal(t, "response.completed", last.Type)
	require.Equal(t, r.ID, last.Response.ID)
	stored, err = e.Store().Result(ctx, "demo", strings.TrimPrefix(r.ID, "turn/demo/"))
	require.NoError(t, err)
	require.NotEmpty(t, stored.Output)
	require.Equal(t, stored.Output, responseDeltas(events))
	require.Equal(t, stored.Output, last.Response.OutputText())
}

// waitApprovalRequest waits until the response id shows its call waiting
// for approval, and returns that item.
func waitApprovalRequest(ctx context.Context, t *testing.T, e *openAIEnv, id string) responses.ResponseOutputItemMcpApprovalRequest {
	t.Helper()
	var asked responses.ResponseOutputItemMcpApprovalRequest
	require.Eventually(t, func() bool {
		got, err := e.demo.Responses.Get(ctx, id, responses.ResponseGetParams{})
		if err != nil || len(got.Output) != 1 || got.Output[0].Type != "mcp_approval_request" {
			return false
		}
		asked = got.Output[0].AsMcpApprovalRequest()
		return true
	}, time.Minute, 50*time.Millisecond, "the call waits for approval")
	return asked
}
