package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// contentScript thinks before it calls the calculator and before it
// answers; draws a chart (a tool that returns an image) and describes it;
// and describes an image a person sent.
const contentScript = `
pacing: {chunk_words: 1, delay_ms: 0}
rules:
  - name: think-add
    when: {user: '^add 2 and 3$'}
    reply: {reasoning: 'The user wants a sum.', tool_calls: [{name: calculator, arguments: '{"expression": "2+3"}'}]}
  - name: think-answer
    when: {tool: '^5$'}
    reply: {reasoning: 'The calculator said 5.', text: 'It is 5.'}
  - name: draw
    when: {user: '^draw the sales$'}
    reply: {tool_calls: [{name: chart, arguments: '{}'}]}
  - name: drawn-anthropic
    when: {tool: 'drawn'}
    reply: {text: 'Here is the chart.'}
  - name: look
    when: {user: '^what is in this picture\?$', has_image: true}
    reply: {text: 'A red square.'}
  - name: blind
    when: {user: '^what is in this picture\?$'}
    reply: {text: 'I see no picture.'}
`

const contentCatalog = `
tenant: demo
default_agent: thinker
tools:
  - name: calculator
    kind: calculator
  - name: chart
    kind: chart
agents:
  - id: thinker
    model: anthropic:claude-test
    thinking: {effort: low}
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
  - id: painter
    model: anthropic:claude-test
    tools: [chart]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
  - id: viewer
    model: openai:gpt-4o-mini
    limits: {max_iterations: 2, turn_timeout_sec: 60}
  - id: claude-viewer
    model: anthropic:claude-test
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// chartPNG is the chart tool's image.
var chartPNG = append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("chart"), 20)...)

func chartKind() tools.Kind {
	return tools.Kind{Name: "chart", Build: func(agent.Tool, tools.Deps) (tools.Tool, error) { return chartTool{}, nil }}
}

type chartTool struct{}

func (chartTool) Run(context.Context, tools.Call) (tools.Output, error) {
	return tools.Output{Text: "drawn", Files: []tools.File{{Name: "sales.png", MIMEType: "image/png", Data: chartPNG}}}, nil
}

const contentToken = "content-token"

type contentEnv struct {
	*env
	agents pb.AgentServiceClient
}

// newContentEnv starts the stack; the tenant's egress policy opens
// egress, the host:port of a server of the test's, when given.
func newContentEnv(t *testing.T, egress string) *contentEnv {
	catalog := contentCatalog
	if egress != "" {
		catalog = strings.Replace(catalog, "tenant: demo\n", "tenant: demo\negress: [\""+egress+"\"]\n", 1)
	}
	ts := testserver.Start(t, testserver.Options{Script: contentScript, Catalogs: []string{catalog},
		ToolKinds: []tools.Kind{chartKind()}, HTTPAPI: true, Tokens: map[string]string{contentToken: "demo:user", "other-token": "other:user"}})
	return &contentEnv{env: &env{Server: ts, t: t}, agents: pb.NewAgentServiceClient(ts.Conn)}
}

func (e *contentEnv) auth(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+contentToken)
}

// TestReasoningOnTheWire: an Anthropic-style model's thinking reaches gRPC
// and the event log as reasoning events, apart from the answer's text; is
// stored with its step, signed; goes back to the model, signed, with the
// tool result of the next step; and is the result's reasoning block.
func TestReasoningOnTheWire(t *testing.T) {
	e := newContentEnv(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "think-" + testserver.RandomID()
	s, err := e.agents.Stream(e.auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, AgentId: "thinker", Prompt: "add 2 and 3"}})
	require.NoError(t, err)
	evs, err := recvAll(s, nil)
	require.NoError(t, err)
	require.Equal(t, "The user wants a sum.The calculator said 5.", agent.ReplayReasoning(evs))
	require.Equal(t, "It is 5.", agent.ReplayText(evs), "reasoning is never the answer's text")
	page, err := turnclient.Events(ctx, e.Client(), contract.TurnWorkflowID("demo", job), agent.EventsQuery{})
	require.NoError(t, err)
	require.Equal(t, evs, asGRPCAll(page.Events), "the log holds what gRPC carried")

	reqs := e.Model.Requests()
	require.Len(t, reqs, 2)
	for _, r := range reqs {
		require.Equal(t, scripted.APIAnthropic, r.API)
		require.JSONEq(t, `{"type":"enabled","budget_tokens":1024}`, string(r.Thinking), "effort low is 1024 tokens")
	}
	var sentBack *scripted.Message
	for i, m := range reqs[1].Messages {
		if m.Role == "assistant" {
			sentBack = &reqs[1].Messages[i]
		}
	}
	require.NotNil(t, sentBack)
	require.Equal(t, "The user wants a sum.", sentBack.Reasoning)
	require.Equal(t, scripted.Signature("The user wants a sum."), sentBack.Signature, "the thinking goes back as it was signed")

	res, err := e.result(contract.TurnWorkflowID("demo", job))
	require.NoError(t, err)
	require.Equal(t, "It is 5.", res.Output)
	require.Equal(t, []agent.Block{
		{Type: agent.BlockReasoning, Text: "The user wants a sum.\n\nThe calculator said 5."},
		{Type: agent.BlockText, Text: "It is 5."},
	}, res.Blocks)
	var content []string
	for _, ev := range evs {
		if ev.Kind == agent.EventContent {
			content = append(content, string(ev.Content))
		}
	}
	require.Equal(t, []string{`{"type":"reasoning","text":"The user wants a sum.\n\nThe calculator said 5."}`, `{"type":"text","text":"It is 5."}`}, content)

	steps := e.steps(job)
	require.Equal(t, []agent.Reasoning{{Text: "The user wants a sum.", Signature: scripted.Signature("The user wants a sum.")}}, steps[1].Reasoning)
	e.replay(contract.TurnWorkflowID("demo", job), "turn_reasoning_blocks")
}

// steps reads a turn's stored steps.
func (e *env) steps(job string) []agent.Message {
	e.t.Helper()
	steps, err := e.Store().Steps(context.Background(), "demo", job)
	require.NoError(e.t, err)
	return steps
}

// TestToolImageBlock: an image a tool returns is stored as the tenant's
// blob, shown to the model inside the tool's result, and becomes an image
// block of the result by cas:// ref — never bytes in the history — that
// the tenant can download and another tenant cannot.
func TestToolImageBlock(t *testing.T) {
	e := newContentEnv(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "chart-" + testserver.RandomID()
	res, err := e.agents.Invoke(e.auth(ctx), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, AgentId: "painter", Prompt: "draw the sales"}})
	require.NoError(t, err)
	require.Equal(t, "Here is the chart.", res.GetOutput())
	sum := sha256.Sum256(chartPNG)
	ref := agent.CASRefPrefix + hex.EncodeToString(sum[:])
	require.Len(t, res.GetBlocks(), 2)
	img := res.GetBlocks()[0]
	require.Equal(t, "image", img.GetType())
	require.Equal(t, ref, img.GetRef())
	require.Equal(t, "image/png", img.GetMimeType())
	require.Equal(t, "sales.png", img.GetName())
	require.NotEmpty(t, img.GetCallId())
	require.Equal(t, "text", res.GetBlocks()[1].GetType())

	reqs := e.Model.Requests()
	require.Len(t, reqs, 2)
	last := reqs[1].Messages[len(reqs[1].Messages)-1]
	require.Equal(t, "tool", last.Role)
	require.Contains(t, last.Content, "image: "+ref, "the model is told the image's ref")
	var seen bool
	for _, p := range last.Parts {
		if p.Type == "image" && p.DataSHA256 == hex.EncodeToString(sum[:]) {
			seen = true
		}
	}
	require.True(t, seen, "the model was sent the image's bytes: %+v", last.Parts)

	for _, ev := range e.history(contract.TurnWorkflowID("demo", job)) {
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		require.NotContains(t, string(b), "chartchartchart", "the image's bytes are in no history event")
	}
	get := func(token string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e.HTTPAPIAddr()+"/v1/files/"+url.PathEscape(ref), nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == http.StatusOK {
			require.Equal(t, chartPNG, body)
		}
		return resp.StatusCode
	}
	require.Equal(t, http.StatusOK, get(contentToken))
	require.Equal(t, http.StatusNotFound, get("other-token"), "another tenant cannot read it")
	e.replay(contract.TurnWorkflowID("demo", job), "turn_tool_image")
}

// upload stores a file over POST /v1/files and returns its ref.
func (e *contentEnv) upload(ctx context.Context, token, mime string, data []byte) string {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.HTTPAPIAddr()+"/v1/files", bytes.NewReader(data))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", mime)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	require.Equal(e.t, http.StatusCreated, resp.StatusCode, "%s", body)
	var info struct {
		Ref string `json:"ref"`
	}
	require.NoError(e.t, json.Unmarshal(body, &info))
	return info.Ref
}

// TestMultimodalInput: a prompt's image, uploaded or by URL (fetched
// through the tenant's egress policy), reaches the model by its bytes;
// a URL the policy closes, another tenant's ref, an image that is not
// one, and a file an OpenAI model cannot take are refused, saying why,
// and nothing reaches the model.
func TestMultimodalInput(t *testing.T) {
	square := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte("red"), 10)...)
	sum := sha256.Sum256(square)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/square.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write(square)
		case "/page.html":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html></html>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(images.Close)
	e := newContentEnv(t, strings.TrimPrefix(images.URL, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	uploaded := e.upload(ctx, contentToken, "image/png", square)
	theirs := e.upload(ctx, "other-token", "image/png", append([]byte("\x89PNG\r\n\x1a\n"), "theirs"...))
	pdf := e.upload(ctx, contentToken, "application/pdf", []byte("%PDF-1.4 a report"))

	look := func(agentID string, parts ...*pb.Part) (*pb.TurnResult, error) {
		return e.agents.Invoke(e.auth(ctx), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "look-" + testserver.RandomID(),
			AgentId: agentID, Prompt: "what is in this picture?", Parts: parts}})
	}
	for _, tc := range []struct {
		name, agentID string
		part          *pb.Part
	}{
		{"uploaded, openai", "viewer", &pb.Part{Type: "image", Url: uploaded}},
		{"uploaded, anthropic", "claude-viewer", &pb.Part{Type: "image", Url: uploaded}},
		{"by url", "viewer", &pb.Part{Type: "image", Url: images.URL + "/square.png"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.Model.Requests())
			res, err := look(tc.agentID, tc.part)
			require.NoError(t, err)
			require.Equal(t, "A red square.", res.GetOutput(), "%v", res.GetError())
			reqs := e.Model.Requests()[before:]
			require.Len(t, reqs, 1)
			var got []string
			for _, p := range reqs[0].Messages[len(reqs[0].Messages)-1].Parts {
				got = append(got, p.Type+" "+p.DataSHA256)
			}
			require.Contains(t, got, "image "+hex.EncodeToString(sum[:]))
		})
	}

	for _, tc := range []struct {
		name, agentID string
		part          *pb.Part
		want          string
	}{
		{"another tenant's ref", "viewer", &pb.Part{Type: "image", Url: theirs}, "is not a file of tenant \"demo\""},
		{"not an image", "viewer", &pb.Part{Type: "image", Url: images.URL + "/page.html"}, "is text/html, not an image type models take"},
		{"missing", "viewer", &pb.Part{Type: "image", Url: images.URL + "/gone.png"}, "HTTP 404"},
		{"closed by egress", "viewer", &pb.Part{Type: "image", Url: "http://203.0.113.7/cat.png"}, "parts[0]: fetch http://203.0.113.7/cat.png"},
		{"data url", "viewer", &pb.Part{Type: "image", Url: "data:image/png;base64,AAAA"}, "data: URLs are not taken"},
		{"file to openai", "viewer", &pb.Part{Type: "file", Url: pdf, Name: "report.pdf"}, "provider openai cannot take file parts (report.pdf)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.Model.Requests())
			res, err := look(tc.agentID, tc.part)
			if err == nil {
				// Refused by the turn, not at the gateway: the result says why.
				require.NotEqual(t, "completed", res.GetStatus())
				err = fmt.Errorf("%s: %s", res.GetError().GetType(), res.GetError().GetMessage())
			}
			require.ErrorContains(t, err, tc.want)
			require.Len(t, e.Model.Requests(), before, "nothing reached the model")
		})
	}

	// The PDF reaches an Anthropic model as a document.
	before := len(e.Model.Requests())
	_, err := look("claude-viewer", &pb.Part{Type: "file", Url: pdf, Name: "report.pdf"})
	require.NoError(t, err)
	reqs := e.Model.Requests()[before:]
	require.Len(t, reqs, 1)
	var kinds []string
	for _, p := range reqs[0].Messages[len(reqs[0].Messages)-1].Parts {
		kinds = append(kinds, fmt.Sprintf("%s %s", p.Type, p.MIMEType))
	}
	require.Contains(t, strings.Join(kinds, ","), "file application/pdf")
}
