package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// structuredScript answers trips as JSON: one that matches the planner's
// schema, one without a city (whose repair, told "missing property
// 'city'", adds it), and one of zero nights (whose repair, told what is
// wrong with /nights, is zero nights again). The weather is answered in
// a Markdown code fence, as models without a native option do.
const structuredScript = `
rules:
  - name: repaired
    when: {user: "output schema: missing property 'city'"}
    reply: {text: '{"city": "Oslo", "nights": 3}', usage: {prompt_tokens: 40, completion_tokens: 9}}
  - name: still-wrong
    when: {user: 'output schema: /nights'}
    reply: {text: '{"city": "Bergen", "nights": 0}'}
  - name: valid
    when: {user: 'trip to Oslo'}
    reply: {text: '{"city": "Oslo", "nights": 2}'}
  - name: no-city
    when: {user: 'somewhere for three nights'}
    reply: {text: '{"nights": 3}', usage: {prompt_tokens: 30, completion_tokens: 4}}
  - name: zero-nights
    when: {user: 'no nights in Bergen'}
    reply: {text: '{"city": "Bergen", "nights": 0}'}
  - name: forecast
    when: {user: 'forecast'}
    reply: {text: '{"temp_c": 18}'}
  - name: weather
    when: {user: 'weather'}
    reply: {text: "` + "```json\\n{\\\"temp_c\\\": 21}\\n```" + `"}
  - name: text
    reply: {text: 'Plain text.'}
`

// plannerSchema is the planner agent's output schema, as JSON.
const plannerSchema = `{"type":"object","properties":{"city":{"type":"string"},"nights":{"type":"integer","minimum":1}},"required":["city","nights"],"additionalProperties":false}`

const structuredCatalog = `
tenant: demo
agents:
  - id: planner
    model: openai:gpt-4o-mini
    output_schema:
      type: object
      properties:
        city: {type: string}
        nights: {type: integer, minimum: 1}
      required: [city, nights]
      additionalProperties: false
    limits: {max_iterations: 1, turn_timeout_sec: 60}
  - id: plain
    model: openai:gpt-4o-mini
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// weatherSchema is a turn's own output schema.
const weatherSchema = `{"type":"object","properties":{"temp_c":{"type":"number"}},"required":["temp_c"]}`

type structuredEnv struct {
	*env
	token string
	api   string
}

func newStructuredEnv(t *testing.T) *structuredEnv {
	t.Helper()
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: structuredScript, Catalogs: []string{structuredCatalog}, HTTPAPI: true,
		Tokens: map[string]string{token: "demo:user+admin:dev"}})
	return &structuredEnv{env: &env{Server: srv, t: t}, token: token, api: "http://" + srv.HTTPAPIAddr()}
}

// run runs a turn through Temporal and returns its workflow id, its
// result (a failed turn's from its failure) and its error.
func (e *structuredEnv) run(req agent.TurnRequest) (string, agent.TurnResult, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req.Version, req.TenantID, req.JobID = agent.ProtocolVersion, "demo", "job-"+testserver.RandomID()
	run, err := turnclient.Start(ctx, e.Client(), e.TaskQueue, req)
	require.NoError(e.t, err)
	var res agent.TurnResult
	err = run.Get(ctx, &res)
	if failed, ok := contract.FailedResult(err); ok {
		res = failed
	}
	return run.GetID(), res, err
}

// requestsOf are the model requests whose first user message is prompt,
// in the order they came.
func (e *structuredEnv) requestsOf(prompt string) []scripted.Request {
	var out []scripted.Request
	for _, r := range e.Model.Requests() {
		for _, m := range r.Messages {
			if m.Role == "user" {
				if m.Content == prompt {
					out = append(out, r)
				}
				break
			}
		}
	}
	return out
}

// requireSchemaSent asserts that a request carried schema as OpenAI's
// json_schema response format, under name.
func requireSchemaSent(t *testing.T, r scripted.Request, name, schema string, strict bool) {
	t.Helper()
	var f struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict bool            `json:"strict"`
		} `json:"json_schema"`
	}
	require.NoError(t, json.Unmarshal(r.ResponseFormat, &f), "response_format %s", r.ResponseFormat)
	require.Equal(t, "json_schema", f.Type)
	require.Equal(t, name, f.JSONSchema.Name)
	require.JSONEq(t, schema, string(f.JSONSchema.Schema))
	require.Equal(t, strict, f.JSONSchema.Strict)
}

// TestStructuredOutput: an agent's output schema is sent to the model as
// its native structured-output option; an answer that matches is the
// result's output_json; one that does not is repaired by one more model
// call that is told what is wrong, and the repaired answer is the
// result's; a repair that does not match either fails the turn
// InvalidOutput. The repair's history is recorded as turn_output_repair.
func TestStructuredOutput(t *testing.T) {
	e := newStructuredEnv(t)

	t.Run("a valid answer", func(t *testing.T) {
		prompt := "Plan a trip to Oslo."
		_, res, err := e.run(agent.TurnRequest{AgentID: "planner", Prompt: prompt})
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status)
		require.Equal(t, `{"city": "Oslo", "nights": 2}`, res.Output, "output keeps the text")
		require.Equal(t, `{"city":"Oslo","nights":2}`, string(res.OutputJSON))
		require.JSONEq(t, `{"type":"json","chars":26,"text":"{\"city\":\"Oslo\",\"nights\":2}"}`, string(res.ResultPreview))
		reqs := e.requestsOf(prompt)
		require.Len(t, reqs, 1)
		requireSchemaSent(t, reqs[0], "planner", plannerSchema, true)

		stored, err := e.Store().Result(context.Background(), "demo", res.JobID)
		require.NoError(t, err)
		require.Equal(t, `{"city":"Oslo","nights":2}`, string(stored.OutputJSON), "the stored result keeps the object")
	})

	t.Run("an invalid answer repaired once", func(t *testing.T) {
		prompt := "Plan somewhere for three nights."
		id, res, err := e.run(agent.TurnRequest{AgentID: "planner", Prompt: prompt})
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.Status)
		require.Equal(t, `{"city":"Oslo","nights":3}`, string(res.OutputJSON))
		require.Equal(t, 1, e.Model.Served("repaired"), "one repair call, beyond the agent's max_iterations of 1")
		reqs := e.requestsOf(prompt)
		require.Len(t, reqs, 2)
		for _, r := range reqs {
			requireSchemaSent(t, r, "planner", plannerSchema, true)
		}
		// The repair reads the answer it repairs, then what is wrong.
		msgs := reqs[1].Messages
		require.Equal(t, scripted.Message{Role: "assistant", Content: `{"nights": 3}`}, msgs[len(msgs)-2])
		last := msgs[len(msgs)-1]
		require.Equal(t, "user", last.Role)
		require.Equal(t, "Your answer does not match the required output schema: missing property 'city'. "+
			"Answer again with only a JSON value that matches the schema, and nothing else.", last.Content)
		require.Equal(t, 30+4+40+9, res.Metadata.TokensUsed, "both calls count")
		rows, err := e.Store().JobUsage(context.Background(), "demo", res.JobID)
		require.NoError(t, err)
		require.Len(t, rows, 2, "both calls are in the ledger")

		e.replay(id, "turn_output_repair")
	})

	t.Run("two invalid answers fail InvalidOutput", func(t *testing.T) {
		prompt := "Plan no nights in Bergen."
		_, res, err := e.run(agent.TurnRequest{AgentID: "planner", Prompt: prompt})
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, agent.ErrTypeInvalidOutput, app.Type())
		require.Equal(t, agent.StatusFailed, res.Status)
		require.Equal(t, agent.ErrTypeInvalidOutput, res.Error.Type)
		require.False(t, res.Error.Retryable)
		require.Contains(t, res.Error.Message, "/nights: minimum: got 0, want 1")
		require.Empty(t, res.OutputJSON)
		require.Len(t, e.requestsOf(prompt), 2, "the answer, and one repair: no more")
		stored, err := e.Store().Result(context.Background(), "demo", res.JobID)
		require.NoError(t, err)
		require.Equal(t, agent.ErrTypeInvalidOutput, stored.Error.Type)
	})

	t.Run("an agent without a schema answers text", func(t *testing.T) {
		prompt := "Say something."
		_, res, err := e.run(agent.TurnRequest{AgentID: "plain", Prompt: prompt})
		require.NoError(t, err)
		require.Equal(t, "Plain text.", res.Output)
		require.Empty(t, res.OutputJSON)
		require.Nil(t, e.requestsOf(prompt)[0].ResponseFormat, "no structured-output option without a schema")
	})
}

// TestStructuredOutputOfTurn: a turn request's own schema takes the place
// of its agent's (or gives an agent without one a schema); an answer in a
// code fence is read inside it. Over HTTP, as docs/guides/grpc.md's
// "Structured output" says to send it, the result carries output_json.
func TestStructuredOutputOfTurn(t *testing.T) {
	e := newStructuredEnv(t)

	t.Run("an agent without a schema", func(t *testing.T) {
		prompt := "What is the weather in Oslo?"
		_, res, err := e.run(agent.TurnRequest{AgentID: "plain", Prompt: prompt, OutputSchema: json.RawMessage(weatherSchema)})
		require.NoError(t, err)
		require.Equal(t, `{"temp_c":21}`, string(res.OutputJSON))
		reqs := e.requestsOf(prompt)
		require.Len(t, reqs, 1)
		requireSchemaSent(t, reqs[0], "plain", weatherSchema, false)
	})

	t.Run("in place of the agent's", func(t *testing.T) {
		prompt := "The weather for the planner?"
		_, res, err := e.run(agent.TurnRequest{AgentID: "planner", Prompt: prompt, OutputSchema: json.RawMessage(weatherSchema)})
		require.NoError(t, err)
		require.Equal(t, `{"temp_c":21}`, string(res.OutputJSON))
		requireSchemaSent(t, e.requestsOf(prompt)[0], "planner", weatherSchema, false)
	})

	t.Run("over HTTP", func(t *testing.T) {
		body := `{"agent_id": "plain", "job_id": "weather-` + testserver.RandomID() + `", "prompt": "And the weather in Bergen?",
		  "output_schema_json": "{\"type\":\"object\",\"properties\":{\"temp_c\":{\"type\":\"number\"}},\"required\":[\"temp_c\"]}"}`
		code, data := e.post("/v1/turns:invoke", body)
		require.Equal(t, http.StatusOK, code, "%s", data)
		var res struct {
			Status            string `json:"status"`
			OutputJSON        string `json:"output_json"`
			ResultPreviewJSON string `json:"result_preview_json"`
		}
		require.NoError(t, json.Unmarshal(data, &res), "%s", data)
		require.Equal(t, agent.StatusCompleted, res.Status)
		require.Equal(t, `{"temp_c":21}`, res.OutputJSON)
		require.JSONEq(t, `{"type":"json","chars":13,"text":"{\"temp_c\":21}"}`, res.ResultPreviewJSON)
	})
}

// post sends an HTTP API request with the env's token.
func (e *structuredEnv) post(path, body string) (int, []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.api+path, strings.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, data
}

// TestStructuredOutputRefused: a schema that does not compile is refused
// before anything is sent to a model: an agent's when the catalog is
// applied, at its file and line; a request's by the gateway, and by the
// turn itself when it was started through Temporal directly.
func TestStructuredOutputRefused(t *testing.T) {
	e := newStructuredEnv(t)
	before := len(e.Model.Requests())

	t.Run("at apply", func(t *testing.T) {
		doc := "tenant: demo\nagents:\n  - id: broken\n    model: openai:gpt-4o-mini\n    output_schema:\n      type: object\n      properties:\n        nights: {type: integr}\n"
		_, err := pb.NewCatalogServiceClient(e.Conn).UpsertCatalog(grpcAs(context.Background(), e.token),
			&pb.UpsertCatalogRequest{Files: map[string]string{"b.yaml": doc}})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), "b.yaml:8: agents[0].output_schema.properties.nights.type: output schema does not compile: /properties/nights/type: ")
		_, err = e.Store().ActiveAgent(context.Background(), "demo", "broken")
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "nothing was applied: %v", err)
	})

	bad := `{"type":"object","properties":{"n":{"$ref":"#/$defs/missing"}}}`
	t.Run("at the gateway", func(t *testing.T) {
		_, err := pb.NewAgentServiceClient(e.Conn).Start(grpcAs(context.Background(), e.token),
			&pb.StartRequest{Turn: &pb.TurnRequest{AgentId: "plain", Prompt: "hello", OutputSchemaJson: bad}})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), "output schema does not compile")

		_, err = pb.NewAgentServiceClient(e.Conn).Start(grpcAs(context.Background(), e.token),
			&pb.StartRequest{Turn: &pb.TurnRequest{AgentId: "plain", Prompt: "hello", OutputSchemaJson: `{"type":"array"}`}})
		require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
		require.Contains(t, status.Convert(err).Message(), `output schema must describe a JSON object`)
	})

	t.Run("started through Temporal", func(t *testing.T) {
		_, res, err := e.run(agent.TurnRequest{AgentID: "plain", Prompt: "hello", OutputSchema: json.RawMessage(bad)})
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app), "%v", err)
		require.Equal(t, agent.ErrTypeInvalidRequest, app.Type())
		require.Equal(t, agent.StatusRejected, res.Status)
		require.Contains(t, res.Error.Message, "output schema does not compile")
	})

	require.Len(t, e.Model.Requests(), before, "no model was called")
}

// TestStructuredOutputOpenAIClient: OpenAI's client asks the
// OpenAI-compatible endpoint for structured output as it asks OpenAI
// (response_format json_schema), and the turn holds the answer to that
// schema; a completion of an agent whose answer was repaired is the
// repaired answer alone, streamed or not.
func TestStructuredOutputOpenAIClient(t *testing.T) {
	e := newStructuredEnv(t)
	client := openai.NewClient(option.WithBaseURL(e.api+"/v1"), option.WithAPIKey(e.token), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var schema map[string]any
	require.NoError(t, json.Unmarshal([]byte(weatherSchema), &schema))
	format := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "forecast", Schema: schema, Strict: openai.Bool(true)}}}

	t.Run("a turn's schema", func(t *testing.T) {
		prompt := "What is the forecast for Oslo?"
		var resp *http.Response
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "plain", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
			ResponseFormat: format}, option.WithResponseInto(&resp))
		require.NoError(t, err)
		require.Equal(t, `{"temp_c": 18}`, c.Choices[0].Message.Content)
		requireSchemaSent(t, e.requestsOf(prompt)[0], "plain", weatherSchema, false)
		var res agent.TurnResult
		require.NoError(t, e.Client().GetWorkflow(ctx, resp.Header.Get("X-Agentflow-Stream-Id"), "").Get(ctx, &res))
		require.Equal(t, `{"temp_c":18}`, string(res.OutputJSON))
	})

	t.Run("a repaired answer, whole and streamed", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: "planner", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Plan somewhere for three nights.")}}
		c, err := client.Chat.Completions.New(ctx, params)
		require.NoError(t, err)
		require.Equal(t, `{"city": "Oslo", "nights": 3}`, c.Choices[0].Message.Content, "the answer that did not match is not part of it")

		stream := client.Chat.Completions.NewStreaming(ctx, params)
		var content strings.Builder
		for stream.Next() {
			if ch := stream.Current(); len(ch.Choices) > 0 {
				content.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		require.NoError(t, stream.Err())
		require.Equal(t, `{"city": "Oslo", "nights": 3}`, content.String())
	})

	t.Run("refused", func(t *testing.T) {
		bad := openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "plain", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			ResponseFormat: bad})
		apiErr := requireAPIError(t, err, http.StatusBadRequest, "unsupported_value")
		require.Equal(t, "response_format.type", apiErr.Param)
	})
}
