package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// vocabularyScript reasons before it answers and streams its tool call's
// arguments in fragments (as the scripted model always does), slowly
// enough that subscribers start while the turn runs; "Think it over" is
// cut after a few chunks, in the middle of its reasoning, once.
const vocabularyScript = `
pacing: {chunk_words: 1, delay_ms: 30}
rules:
  - name: add
    when: {user: '^What is 2\+2\?$'}
    reply:
      reasoning: 'The user wants 2+2.'
      text: 'Let me add.'
      tool_calls: [{name: calculator, arguments: '{"expression": "2+2"}'}]
  - name: think
    when: {user: '^Think it over$'}
    fault: {cut_after_chunks: 6, times: 1}
    reply:
      reasoning: 'First I weigh this, then I weigh that, and then I weigh them both together before I answer.'
      text: 'Done thinking.'
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: '2+2 = $1'}
`

// folded is a log as docs/events.md writes it in "Order": one line an
// event, a run of streamed events of one kind (and one tool call) as one
// line with their text joined, however the batches cut it.
func folded(evs []agent.Event) []string {
	var out []string
	var run *agent.Event
	flush := func() {
		if run == nil {
			return
		}
		if run.Kind == agent.EventToolArgsDelta {
			out = append(out, fmt.Sprintf("tool_args_delta %s %s %s", run.Tool.CallID, run.Tool.Name, run.Tool.ArgsDelta))
		} else {
			out = append(out, fmt.Sprintf("%s %q", run.Kind, run.Text))
		}
		run = nil
	}
	for _, e := range evs {
		if e.Kind.Streamed() {
			if run != nil && run.Kind == e.Kind && (e.Kind != agent.EventToolArgsDelta || run.Tool.CallID == e.Tool.CallID) {
				if e.Kind == agent.EventToolArgsDelta {
					t := *run.Tool
					t.ArgsDelta += e.Tool.ArgsDelta
					run.Tool = &t
				} else {
					run.Text += e.Text
				}
				continue
			}
			flush()
			c := e
			run = &c
			continue
		}
		flush()
		var line string
		switch e.Kind {
		case agent.EventStatus:
			line = "status " + e.Status
		case agent.EventStepStart:
			line = fmt.Sprintf("step_start %d", e.Step)
		case agent.EventStepFinish:
			line = fmt.Sprintf("step_finish %d %s", e.Step, e.FinishReason)
		case agent.EventUsage:
			line = fmt.Sprintf("usage %d", e.Step)
		case agent.EventApprovalRequired:
			line = fmt.Sprintf("approval_required %s %s %s", e.Tool.CallID, e.Tool.Name, e.Tool.Args)
		case agent.EventApprovalDecided:
			line = fmt.Sprintf("approval_decided %s %s by %s via %s", e.Tool.CallID, e.Approval.Outcome, e.Approval.Approver, e.Approval.Via)
		case agent.EventToolStart:
			line = fmt.Sprintf("tool_start %s %s %s", e.Tool.CallID, e.Tool.Name, e.Tool.Args)
		case agent.EventToolEnd:
			line = fmt.Sprintf("tool_end %s %s %q", e.Tool.CallID, e.Tool.Status, e.Tool.Output)
		case agent.EventContent:
			line = "content " + string(e.Content)
		default:
			line = string(e.Kind)
		}
		out = append(out, line)
	}
	flush()
	return out
}

// TestStreamVocabularyInOrder is the documented sequence (docs/events.md,
// "Order") on the real stack: a streamed turn whose model reasons, says a
// few words and streams a tool call's arguments, whose call waits for
// approval and is approved, and whose next step answers. Every reader gets
// the same events, once each, in the same order: gRPC Stream, Resume from
// every index, the events query, and the Workflow Streams poll from
// several offsets.
func TestStreamVocabularyInOrder(t *testing.T) {
	e := newStreamsEnvWith(t, vocabularyScript)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "vocab-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	s, err := e.agents.Stream(e.auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is 2+2?"}})
	require.NoError(t, err)

	type streamed struct {
		events []agent.Event
		err    error
	}
	grpcDone := make(chan streamed, 1)
	started := make(chan struct{})
	waiting := make(chan string, 1)
	go func() {
		var once sync.Once
		evs, err := recvAll(s, func(ev agent.Event) {
			once.Do(func() { close(started) })
			if ev.Kind == agent.EventApprovalRequired {
				waiting <- ev.Tool.CallID
			}
		})
		grpcDone <- streamed{evs, err}
	}()
	<-started
	subs, text, wait := e.subscribe(ctx, id, 0, 2, 4, 9, 13)

	callID := <-waiting
	_, err = turnclient.Approve(ctx, e.Client(), id, agent.ApprovalDecision{CallID: callID, Approved: true, Approver: "alice", Reason: "planned"})
	require.NoError(t, err)
	g := <-grpcDone
	require.NoError(t, g.err)
	wait()

	polled := e.requireSameStream(ctx, id, g.events, subs, text)
	for i, ev := range polled {
		require.NoError(t, ev.Validate(), "event %d: %s", i, ev)
		require.Equal(t, int64(i+1), ev.Index)
	}
	require.Equal(t, []string{
		"status RUNNING",
		"step_start 1",
		`reasoning "The user wants 2+2."`,
		`token "Let me add."`,
		"tool_args_delta " + callID + ` calculator {"expression": "2+2"}`,
		"usage 1",
		"approval_required " + callID + ` calculator {"expression":"2+2"}`,
		"status WAITING_APPROVAL",
		"approval_decided " + callID + " approved by alice via update",
		"status RUNNING",
		"tool_start " + callID + ` calculator {"expression":"2+2"}`,
		"tool_end " + callID + ` ok "4"`,
		"step_finish 1 tool_calls",
		"step_start 3",
		`token "2+2 = 4"`,
		"usage 3",
		"step_finish 3 stop",
		`content {"type":"reasoning","text":"The user wants 2+2."}`,
		`content {"type":"text","text":"2+2 = 4"}`,
		"status COMPLETED",
	}, folded(polled))
	var decided *agent.Event
	for i := range polled {
		if polled[i].Kind == agent.EventApprovalDecided {
			decided = &polled[i]
		}
	}
	require.NotNil(t, decided)
	require.Equal(t, agent.ApprovalEvent{Outcome: agent.ApprovalApproved, Approver: "alice", Reason: "planned", Via: agent.ViaUpdate}, *decided.Approval)
	require.Equal(t, []string{"Let me add.", "2+2 = 4"}, wsText(t, subs[0].got.items), "the text topic: each reply's final text")

	// Resume from every index gives the rest, and the first deltas of
	// the call name it.
	for after := range int64(len(g.events)) {
		require.Equal(t, g.events[after:], e.resume(ctx, id, after), "Resume after %d", after)
	}
	e.replay(id, "turn_vocabulary")
}

// TestStreamRetriedMidReasoning: a model call cut in the middle of its
// reasoning and tried again is exact on every reader: the log holds the
// failed attempt's reasoning and the RETRYING that voids it, once, on gRPC
// Stream and Resume, the events query and the poll alike; readers that
// apply void_from (agent.Unvoided) see the retry's reasoning and answer
// only; the text topic never holds voided text.
func TestStreamRetriedMidReasoning(t *testing.T) {
	e := newStreamsEnvWith(t, vocabularyScript)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "vocab-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	s, err := e.agents.Stream(e.auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "Think it over", StreamWindowSec: subscriberWindow}})
	require.NoError(t, err)
	first, err := s.Recv()
	require.NoError(t, err)
	subs, text, wait := e.subscribe(ctx, id, 0, 3, 7)
	rest, err := recvAll(s, nil)
	require.NoError(t, err)
	wait()
	grpcEvents := append([]agent.Event{gateway.FromPBEvent(first)}, rest...)

	polled := e.requireSameStream(ctx, id, grpcEvents, subs, text)
	require.Equal(t, 2, e.Model.Served("think"), "cut once, then answered")
	const reasoning = "First I weigh this, then I weigh that, and then I weigh them both together before I answer."
	var retrying []agent.Event
	for _, ev := range polled {
		require.NoError(t, ev.Validate(), "%s", ev)
		if ev.Status == agent.StreamRetrying {
			retrying = append(retrying, ev)
		}
	}
	require.Len(t, retrying, 1)
	r := retrying[0]
	var voided []agent.Event
	for _, ev := range polled {
		if ev.Kind.Streamed() && ev.Index >= r.VoidFrom && ev.Index < r.Index {
			voided = append(voided, ev)
		}
	}
	require.NotEmpty(t, voided, "the failed attempt streamed some of its reasoning")
	for _, ev := range voided {
		require.Equal(t, agent.EventReasoning, ev.Kind, "it was cut before its answer")
		require.Equal(t, 1, ev.Attempt)
	}
	require.Less(t, len(agent.ReplayReasoning(voided)), len(reasoning), "cut in the middle of its reasoning")

	for _, readers := range []struct {
		name   string
		events []agent.Event
	}{
		{"gRPC Stream", grpcEvents},
		{"Resume", e.resume(ctx, id, 0)},
		{"the poll", wsEvents(t, subs[0].got.items)},
		{"the events query", polled},
	} {
		kept := agent.Unvoided(readers.events)
		require.Equal(t, reasoning, agent.ReplayReasoning(kept), readers.name)
		require.Equal(t, "Done thinking.", agent.ReplayText(kept), readers.name)
		for _, ev := range kept {
			if ev.Kind.Streamed() {
				require.Equal(t, 2, ev.Attempt, "%s: only the retry's streamed events are kept", readers.name)
			}
		}
	}
	require.Equal(t, []string{"Done thinking."}, wsText(t, subs[0].got.items), "no voided text on the text topic")
}

// reportKind is a tool kind whose calls emit custom events: a chart drawn
// twice under one id (the second replaces the first) and a citation.
func reportKind() tools.Kind {
	return tools.Kind{
		Name: "report",
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) {
			return reportTool{}, nil
		},
	}
}

type reportTool struct{}

func (reportTool) Run(_ context.Context, call tools.Call) (tools.Output, error) {
	call.Progress("drawing")
	for _, c := range []agent.CustomEvent{
		{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1]}`)},
		{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1,2]}`)},
		{Name: "citation", Value: json.RawMessage(`{"doc":"handbook","page":7}`)},
	} {
		if err := call.Emit(c); err != nil {
			return tools.Output{}, err
		}
	}
	if err := call.Emit(agent.CustomEvent{Name: "not a name", Value: json.RawMessage(`1`)}); err == nil {
		return tools.Output{}, fmt.Errorf("an event not of its shape was taken")
	}
	return tools.Output{Text: "reported"}, nil
}

const reportCatalog = `
tenant: demo
default_agent: reporter
tools:
  - name: report
    kind: report
agents:
  - id: reporter
    model: openai:gpt-4o-mini
    tools: [report]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
`

const reportScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: report
    when: {user: '^report$'}
    reply: {tool_calls: [{name: report, arguments: '{}'}]}
  - name: done
    when: {tool: '^(.+)$'}
    reply: {text: 'Done: $1.'}
`

// TestToolCustomEvents: a tool's custom events reach the turn's stream as
// custom events of its call, after its tool_start and before its tool_end,
// on gRPC and in the log; the last value of a name and id is the one the
// tool gave last; the model does not see them.
func TestToolCustomEvents(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: reportScript, Catalogs: []string{reportCatalog},
		ToolKinds: []tools.Kind{reportKind()}, Tokens: map[string]string{streamsToken: "demo:user"}})
	e := &streamsEnv{env: &env{Server: ts, t: t}, agents: pb.NewAgentServiceClient(ts.Conn)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "report-" + testserver.RandomID()
	id := contract.TurnWorkflowID("demo", job)
	s, err := e.agents.Stream(e.auth(ctx), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "report"}})
	require.NoError(t, err)
	evs, err := recvAll(s, nil)
	require.NoError(t, err)

	page, err := turnclient.Events(ctx, e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	require.Equal(t, evs, asGRPCAll(page.Events), "gRPC carries custom events as the log holds them")
	var between []string
	last := map[string]string{}
	inCall := false
	for _, ev := range page.Events {
		require.NoError(t, ev.Validate(), "%s", ev)
		switch ev.Kind {
		case agent.EventToolStart:
			inCall = true
		case agent.EventToolEnd:
			inCall = false
		case agent.EventToolProgress:
			require.True(t, inCall)
			between = append(between, "progress "+ev.Tool.Message)
		case agent.EventCustom:
			require.True(t, inCall, "custom events come between the call's tool_start and tool_end")
			require.Equal(t, "report", ev.Tool.Name)
			between = append(between, "custom "+ev.Custom.Name)
			last[ev.Custom.Name+"/"+ev.Custom.ID] = string(ev.Custom.Value)
		}
	}
	require.Equal(t, "progress drawing", between[0])
	require.Contains(t, between, "custom chart")
	require.Equal(t, "custom citation", between[len(between)-1], "in the order emitted")
	require.JSONEq(t, `{"points":[1,2]}`, last["chart/c1"])
	require.JSONEq(t, `{"doc":"handbook","page":7}`, last["citation/"])
	require.Equal(t, "Done: reported.", agent.ReplayText(page.Events))
	for _, req := range e.Model.Requests() {
		for _, m := range req.Messages {
			require.NotContains(t, m.Content, "handbook", "custom events are for clients, not the model")
		}
	}
	e.replay(id, "turn_custom_events")
}
