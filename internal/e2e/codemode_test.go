package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// squaresProgram adds up the squares of 0 to 19, one call of the square
// tool each, one after the other: a task of twenty calls.
const squaresProgram = `let total = 0;\nfor (let i = 0; i < 20; i++) {\n  const r = await tools.square({i: i});\n  total += r.square;\n}\nconsole.log(\"twenty squares\");\nreturn total;`

// sixtySquaresProgram is squaresProgram over 0 to 59.
var sixtySquaresProgram = strings.NewReplacer("i < 20", "i < 60", "twenty", "sixty").Replace(squaresProgram)

// codeModeScript answers "sum twenty squares" with one program, and
// "sum twenty squares, one by one" with one call a reply, each result
// naming the next call, as a model that needs each result before the
// next call would; "charge once" is a program whose one call needs
// approval.
const codeModeScript = `
rules:
  - name: program
    when: {user: '^sum twenty squares$'}
    reply: {tool_calls: [{name: run_program, arguments: '{"program": "` + squaresProgram + `"}'}]}
  - name: sixty
    when: {user: '^sum sixty squares$'}
    reply: {tool_calls: [{name: run_program, arguments: '{"program": "SIXTY"}'}]}
  - name: charge
    when: {user: '^charge once$'}
    reply: {tool_calls: [{name: run_program, arguments: '{"program": "const r = await tools.charge({i: 7});\nreturn r.square;"}'}]}
  - name: broken
    when: {user: '^use an unknown name$'}
    reply: {tool_calls: [{name: run_program, arguments: '{"program": "const a = await tools.square({i: 3});\nreturn a.square + b;"}'}]}
  - name: program-answer
    when: {tool: 'result: ([0-9]+)'}
    reply: {text: 'The sum is $1.'}
  - name: program-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The program failed: $1'}
  - name: last
    when: {tool: '"next":20\b'}
    reply: {text: 'Done: twenty squares.'}
  - name: next
    when: {tool: '"next":([0-9]+)\b'}
    reply: {tool_calls: [{name: square, arguments: '{"i": $1}'}]}
  - name: first
    when: {user: '^sum twenty squares, one by one$'}
    reply: {tool_calls: [{name: square, arguments: '{"i": 0}'}]}
  - name: fallback
    reply: {text: "I don't know."}
`

// codeModeCatalog is tenant coder: agent coder writes programs that call
// square and charge (which needs approval); agent plain calls square
// itself. EGRESS is the squares API's host:port.
const codeModeCatalog = `tenant: coder
default_agent: coder
egress: ["EGRESS"]
tools:
  - {name: square, kind: squares_api, description: "The square of i, from the squares API."}
  - {name: charge, kind: squares_api, description: "Charges for a square.", approval: always}
agents:
  - id: coder
    model: openai:gpt-4o-mini
    tools: [square, charge]
    code_mode: {tools: [square, charge]}
    limits: {max_iterations: 4, turn_timeout_sec: 120, approval_timeout_sec: 300}
  - id: long
    model: openai:gpt-4o-mini
    tools: [square]
    code_mode: {tools: [square]}
    limits: {max_iterations: 4, turn_timeout_sec: 120, history_events: 100}
  - id: plain
    model: openai:gpt-4o-mini
    tools: [square]
    limits: {max_iterations: 25, turn_timeout_sec: 120}
`

// squaresAPI is an HTTP API the squares_api tools call, counting the
// requests it serves.
type squaresAPI struct {
	*httptest.Server
	requests atomic.Int64
}

func newSquaresAPI(t *testing.T) *squaresAPI {
	api := &squaresAPI{}
	api.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.requests.Add(1)
		i, err := strconv.Atoi(r.URL.Query().Get("i"))
		if err != nil {
			http.Error(w, "i is not a number", http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, `{"i":%d,"square":%d,"next":%d}`, i, i*i, i+1)
	}))
	t.Cleanup(api.Close)
	return api
}

// squaresKind is a tool kind whose calls GET the API under the tenant's
// egress policy.
func squaresKind(base string) tools.Kind {
	return tools.Kind{Name: "squares_api", Parameters: json.RawMessage(`{"type":"object","properties":{"i":{"type":"integer"}},"required":["i"]}`),
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) { return squaresTool(base), nil }}
}

type squaresTool string

func (s squaresTool) Run(ctx context.Context, c tools.Call) (tools.Output, error) {
	var args struct {
		I int `json:"i"`
	}
	if err := json.Unmarshal(c.Args, &args); err != nil {
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "want {\"i\": <integer>}")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, string(s)+"/square?i="+strconv.Itoa(args.I), nil)
	if err != nil {
		return tools.Output{}, err
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return tools.Output{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return tools.Output{Text: string(body)}, err
}

type codeModeEnv struct {
	*env
	api *squaresAPI
}

const codeModeToken = "code-mode-token"

func newCodeModeEnv(t *testing.T) *codeModeEnv {
	return newCodeModeEnvWith(t, strings.Replace(codeModeScript, "SIXTY", sixtySquaresProgram, 1))
}

// newCodeModeEnvWith is newCodeModeEnv with another model script.
func newCodeModeEnvWith(t *testing.T, script string) *codeModeEnv {
	api := newSquaresAPI(t)
	u, err := url.Parse(api.URL)
	require.NoError(t, err)
	ts := testserver.Start(t, testserver.Options{Script: script, ToolKinds: []tools.Kind{squaresKind(api.URL)},
		Catalogs: []string{strings.Replace(codeModeCatalog, "EGRESS", u.Host, 1)},
		Tokens:   map[string]string{codeModeToken: "coder:user+approver:ann"}})
	return &codeModeEnv{env: &env{Server: ts, t: t}, api: api}
}

// start starts a turn of agent on the prompt and returns its workflow id.
func (e *codeModeEnv) start(agentID, prompt string) string {
	e.t.Helper()
	job := agentID + "-" + testserver.RandomID()
	id := contract.TurnWorkflowID("coder", job)
	_, err := e.Client().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: e.TaskQueue}, contract.AgentTurn,
		agent.TurnRequest{TenantID: "coder", JobID: job, AgentID: agentID, Prompt: prompt})
	require.NoError(e.t, err)
	return id
}

func (e *codeModeEnv) result(id string) agent.TurnResult {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var res agent.TurnResult
	require.NoError(e.t, e.Client().GetWorkflow(ctx, id, "").Get(ctx, &res))
	return res
}

func (e *codeModeEnv) events(id string) []agent.Event {
	e.t.Helper()
	v, err := e.Client().QueryWorkflow(context.Background(), id, "", contract.QueryEvents, agent.EventsQuery{})
	require.NoError(e.t, err)
	var page agent.EventsPage
	require.NoError(e.t, v.Get(&page))
	return page.Events
}

// turnCost is what a turn cost, as a benchmark compares it: its model
// calls, their input tokens as the turn's usage reports them (the
// scripted model counts the messages' words), the bytes of the requests
// the model was sent (tools' declarations included), and its wall time.
type turnCost struct {
	modelCalls, inputTokens, requestBytes int
	wall                                  time.Duration
}

// costOf is the cost of the turn whose events are given, which the model
// got requests for.
func costOf(events []agent.Event, requests []scripted.Request, wall time.Duration) turnCost {
	c := turnCost{wall: wall}
	for _, ev := range events {
		if ev.Kind == agent.EventUsage && ev.Usage != nil {
			c.modelCalls++
			c.inputTokens += ev.Usage.PromptTokens
		}
	}
	for _, r := range requests {
		c.requestBytes += r.Bytes
	}
	return c
}

// run runs a turn of agent on the prompt to its end and returns its
// result and cost.
func (e *codeModeEnv) run(agentID, prompt string) (agent.TurnResult, turnCost, string) {
	e.t.Helper()
	before := len(e.Model.Requests())
	began := time.Now()
	id := e.start(agentID, prompt)
	res := e.result(id)
	wall := time.Since(began)
	return res, costOf(e.events(id), e.Model.Requests()[before:], wall), id
}

// TestCodeModeTwentyCalls: the model answers with one program that
// calls the square tool twenty times; each call is a tool call of the
// turn, with its events, made once against the API; the model is called
// twice and reads one result.
func TestCodeModeTwentyCalls(t *testing.T) {
	e := newCodeModeEnv(t)
	res, cost, id := e.run("coder", "sum twenty squares")
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "The sum is 2470.", res.Output)
	require.EqualValues(t, 20, e.api.requests.Load(), "each call of the program made once")

	events := e.events(id)
	var starts, ends []string
	var program *agent.ToolEvent
	for _, ev := range events {
		switch {
		case ev.Kind == agent.EventToolStart:
			starts = append(starts, ev.Tool.Name)
		case ev.Kind == agent.EventToolEnd && ev.Tool.Name == agent.RunProgramTool:
			program = ev.Tool
		case ev.Kind == agent.EventToolEnd:
			require.Equal(t, agent.ToolOK, ev.Tool.Status)
			ends = append(ends, ev.Tool.CallID)
		}
	}
	require.Equal(t, append([]string{agent.RunProgramTool}, slices.Repeat([]string{"square"}, 20)...), starts)
	require.Len(t, ends, 20)
	require.NotNil(t, program)
	require.Equal(t, agent.ToolOK, program.Status)
	require.Contains(t, program.Output, "result: 2470")
	for i, callID := range ends {
		require.Regexp(t, `\.`+strconv.Itoa(i)+`$`, callID, "the program's call %d", i)
	}

	require.Equal(t, 2, cost.modelCalls)
	require.Len(t, e.Model.Requests(), 2)
	first := e.Model.Requests()[0]
	require.Equal(t, []string{agent.RunProgramTool}, first.Tools, "the program's tools are not offered to the model")
	require.Contains(t, first.ToolsJSON, "square(args: { i: number }): Promise", "run_program declares the tools")
	// The model's second request answers its one call with one result.
	last := e.Model.Requests()[1]
	tools := 0
	for _, m := range last.Messages {
		if m.Role == "tool" {
			tools++
			require.Contains(t, m.Content, "result: 2470")
		}
	}
	require.Equal(t, 1, tools, "the program's calls are not the model's")
	if e.t.Failed() {
		return
	}
	e.replay(id, "turn_code_mode")
}

// TestCodeModeContinuesAsNew: a program of sixty calls in an agent whose
// runs hold 100 history events hands its turn on between calls, run
// after run: the turn completes with the program's result, the API saw
// each call once, the model was called twice, and the runs after the
// first went on from where the program was.
func TestCodeModeContinuesAsNew(t *testing.T) {
	e := newCodeModeEnv(t)
	res, cost, id := e.run("long", "sum sixty squares")
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, "The sum is 70210.", res.Output)
	require.EqualValues(t, 60, e.api.requests.Load(), "each call of the program made once")
	require.Equal(t, 2, cost.modelCalls)

	ctx := context.Background()
	runs, err := e.Client().ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: fmt.Sprintf("WorkflowId = %q", id)})
	require.NoError(t, err)
	require.Greater(t, len(runs.GetExecutions()), 2, "the program handed its turn on")
	var ends int
	for _, ev := range e.events(id) {
		if ev.Kind == agent.EventToolEnd && ev.Tool.Name == "square" {
			require.Equal(t, agent.ToolOK, ev.Tool.Status)
			require.Regexp(t, `\.`+strconv.Itoa(ends)+`$`, ev.Tool.CallID, "the program's calls in order across runs")
			ends++
		}
	}
	require.Equal(t, 60, ends)
	if t.Failed() {
		return
	}
	e.replay(id, "turn_code_mode_resumed")
}

// TestCodeModeVersusPlainCalls measures the twenty-call task both ways,
// for BENCHMARKS.md: plain tool calling one call a reply (the model needs
// each result to make the next call) against one program, with a model
// that answers at once and one that takes 200 ms a reply (a fast hosted
// model's time to its reply). It logs one turn of each.
func TestCodeModeVersusPlainCalls(t *testing.T) {
	for _, latency := range []time.Duration{0, 200 * time.Millisecond} {
		script := strings.ReplaceAll(codeModeScript, "reply: {", fmt.Sprintf("reply: {delay_ms: %d, ", latency.Milliseconds()))
		e := newCodeModeEnvWith(t, script)
		measure := func(agentID, prompt, output string, modelCalls int) turnCost {
			res, cost, _ := e.run(agentID, prompt)
			require.Equal(t, output, res.Output)
			require.Equal(t, modelCalls, cost.modelCalls)
			return cost
		}
		plain := measure("plain", "sum twenty squares, one by one", "Done: twenty squares.", 21)
		code := measure("coder", "sum twenty squares", "The sum is 2470.", 2)
		require.EqualValues(t, 2*20, e.api.requests.Load(), "twenty calls a turn, each made once")
		require.Less(t, code.inputTokens, plain.inputTokens)
		for _, c := range []struct {
			name string
			turnCost
		}{{"plain, one call a reply", plain}, {"code mode, one program", code}} {
			t.Logf("model latency %-5s %-24s model calls %2d  input tokens %5d  request bytes %6d  wall %s", latency, c.name,
				c.modelCalls, c.inputTokens, c.requestBytes, c.wall.Round(time.Millisecond))
		}
	}
}

// TestCodeModeApproval: a call inside a program whose tool needs
// approval pauses the turn; approved over gRPC, the program resumes
// where it was and the tool is called once.
func TestCodeModeApproval(t *testing.T) {
	e := newCodeModeEnv(t)
	id := e.start("coder", "charge once")
	var p []agent.PendingApproval
	require.Eventually(t, func() bool {
		v, err := e.Client().QueryWorkflow(context.Background(), id, "", contract.QueryPendingApprovals)
		return err == nil && v.Get(&p) == nil && len(p) == 1
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "charge", p[0].Tool)
	require.JSONEq(t, `{"i":7}`, string(p[0].Args))
	require.Zero(t, e.api.requests.Load(), "nothing is charged before the approval")

	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), codeModeToken), time.Minute)
	defer cancel()
	_, err := pb.NewAgentServiceClient(e.Conn).Approve(ctx, &pb.ApproveRequest{StreamId: id, CallId: p[0].CallID,
		ApprovalId: p[0].ApprovalID, Approved: proto.Bool(true)})
	require.NoError(t, err)
	res := e.result(id)
	require.Equal(t, "The sum is 49.", res.Output)
	require.EqualValues(t, 1, e.api.requests.Load())
	recs, err := e.Store().Approvals(context.Background(), "coder", strings.TrimPrefix(id, "turn/coder/"))
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.Equal(t, p[0].CallID, recs[0].CallID)
	require.Equal(t, agent.ApprovalApproved, recs[0].Outcome)
}

// TestCodeModeProgramError: a program that fails goes back to the model
// as its call's error, with the line and what the program did before;
// the call it made before is not made again.
func TestCodeModeProgramError(t *testing.T) {
	e := newCodeModeEnv(t)
	res, cost, _ := e.run("coder", "use an unknown name")
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Contains(t, res.Output, "The program failed: the program failed: ReferenceError: b is not defined")
	require.Contains(t, res.Output, "(line 2, column")
	require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[len(res.Metadata.ToolCalls)-1].Status)
	require.Equal(t, 2, cost.modelCalls)
	require.EqualValues(t, 1, e.api.requests.Load())
}
