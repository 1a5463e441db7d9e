package e2e

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// traceScript reports fixed usage, so that the spans' token counts can be
// checked against it.
const traceScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}], usage: {prompt_tokens: 123, completion_tokens: 17}}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.', usage: {prompt_tokens: 161, completion_tokens: 6}}
`

const traceToken = "tok-trace"

// spans is what a test's tracer provider ended, with lookups.
type spans struct {
	t   *testing.T
	exp *tracetest.InMemoryExporter
}

func newTracing(t *testing.T) (*sdktrace.TracerProvider, *spans) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, &spans{t: t, exp: exp}
}

// await waits until a span named name has ended and returns all ended.
func (s *spans) await(name string) tracetest.SpanStubs {
	s.t.Helper()
	var got tracetest.SpanStubs
	require.Eventually(s.t, func() bool {
		got = s.exp.GetSpans()
		return len(got.Snapshots()) > 0 && len(named(got, name)) > 0
	}, 30*time.Second, 50*time.Millisecond, "no span %q ended", name)
	return got
}

func named(all tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range all {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func one(t *testing.T, all tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	got := named(all, name)
	require.Len(t, got, 1, "spans named %q", name)
	return got[0]
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// isAncestor says whether a is s or one of its ancestors in all.
func isAncestor(all tracetest.SpanStubs, a, s tracetest.SpanStub) bool {
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, x := range all {
		byID[x.SpanContext.SpanID()] = x
	}
	for cur, ok := s, true; ok; cur, ok = byID[cur.Parent.SpanID()] {
		if cur.SpanContext.SpanID() == a.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

// TestTraceStreamedToolTurn: a streamed turn with a calculator call over
// the gateway's gRPC is one trace, from the gRPC server span through the
// workflow to the model calls (each a chat span under its CallModel), the
// calculator call (an execute_tool span under its ExecuteTool) and
// SaveResult, with the GenAI attributes and the scripted usage, and no
// prompt or output text.
func TestTraceStreamedToolTurn(t *testing.T) {
	tp, rec := newTracing(t)
	ts := testserver.Start(t, testserver.Options{Script: traceScript, Catalogs: []string{testCatalog},
		Tokens: map[string]string{traceToken: "demo:user"}, TracerProvider: tp})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+traceToken)
	job := "trace-" + testserver.RandomID()
	s, err := pb.NewAgentServiceClient(ts.Conn).Stream(gctx, &pb.StreamRequest{Turn: &pb.TurnRequest{
		JobId: job, AgentId: "assistant", SessionId: "sess-" + job, Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	var text strings.Builder
	for {
		ev, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		text.WriteString(ev.GetToken().GetText())
	}
	require.Equal(t, "The result is 42.", text.String())

	rec.await("RunWorkflow:" + contract.AgentTurn)
	all := rec.await("agentflow.v1.AgentService/Stream")
	rpc := one(t, all, "agentflow.v1.AgentService/Stream")
	require.Equal(t, trace.SpanKindServer, rpc.SpanKind)
	traceID := rpc.SpanContext.TraceID()
	var inTrace tracetest.SpanStubs
	for _, sp := range all {
		if sp.SpanContext.TraceID() == traceID {
			inTrace = append(inTrace, sp)
		}
	}
	wf := one(t, inTrace, "RunWorkflow:"+contract.AgentTurn)
	require.True(t, isAncestor(inTrace, rpc, wf), "the workflow's span is not under the gRPC call's")
	start := one(t, inTrace, "StartWorkflow:"+contract.AgentTurn)
	require.Equal(t, rpc.SpanContext.SpanID(), start.Parent.SpanID(), "StartWorkflow is not the gRPC span's child")

	// Two model calls, each a chat span under its activity's span, under
	// the workflow's.
	calls := named(inTrace, "RunActivity:"+contract.CallModel)
	require.Len(t, calls, 2)
	chats := named(inTrace, "chat gpt-4o-mini")
	require.Len(t, chats, 2)
	want := []struct{ in, out int64 }{{123, 17}, {161, 6}}
	finish := []string{"tool_calls", "stop"}
	if chats[0].StartTime.After(chats[1].StartTime) {
		chats[0], chats[1] = chats[1], chats[0]
	}
	for i, c := range chats {
		require.True(t, isAncestor(inTrace, wf, c))
		var parent tracetest.SpanStub
		for _, a := range calls {
			if a.SpanContext.SpanID() == c.Parent.SpanID() {
				parent = a
			}
		}
		require.True(t, parent.SpanContext.IsValid(), "chat span %d is not a CallModel activity's child", i)
		require.Equal(t, trace.SpanKindClient, c.SpanKind)
		a := attrs(c)
		require.Equal(t, "chat", a["gen_ai.operation.name"].AsString())
		require.Equal(t, "openai", a["gen_ai.system"].AsString())
		require.Equal(t, "openai", a["gen_ai.provider.name"].AsString())
		require.Equal(t, "gpt-4o-mini", a["gen_ai.request.model"].AsString())
		require.Equal(t, "gpt-4o-mini", a["gen_ai.response.model"].AsString())
		require.Equal(t, want[i].in, a["gen_ai.usage.input_tokens"].AsInt64())
		require.Equal(t, want[i].out, a["gen_ai.usage.output_tokens"].AsInt64())
		require.Equal(t, []string{finish[i]}, a["gen_ai.response.finish_reasons"].AsStringSlice())
		require.Equal(t, "demo", a["agentflow.tenant"].AsString())
		require.Equal(t, "assistant", a["agentflow.agent.id"].AsString())
		require.Equal(t, int64(1), a["agentflow.agent.version"].AsInt64())
		require.Equal(t, "sess-"+job, a["agentflow.session"].AsString())
		require.Equal(t, job, a["agentflow.job"].AsString())
		require.NotContains(t, a, attribute.Key("gen_ai.input.messages"))
		require.NotContains(t, a, attribute.Key("gen_ai.output.messages"))
		require.Equal(t, codes.Unset, c.Status.Code)
	}

	// The calculator, a quick tool, runs as a local activity: its span is
	// under the workflow's too, between the two model calls.
	tool := one(t, inTrace, "execute_tool calculator")
	require.True(t, isAncestor(inTrace, wf, tool))
	toolAct := one(t, inTrace, "RunActivity:"+contract.ExecuteTool)
	require.Equal(t, toolAct.SpanContext.SpanID(), tool.Parent.SpanID())
	a := attrs(tool)
	require.Equal(t, "execute_tool", a["gen_ai.operation.name"].AsString())
	require.Equal(t, "calculator", a["gen_ai.tool.name"].AsString())
	require.NotEmpty(t, a["gen_ai.tool.call.id"].AsString())
	require.Equal(t, "calculator", a["agentflow.tool.kind"].AsString())
	require.Equal(t, agent.ToolOK, a["agentflow.tool.status"].AsString())
	require.Equal(t, job, a["agentflow.job"].AsString())
	require.NotContains(t, a, attribute.Key("gen_ai.tool.call.arguments"))
	require.NotContains(t, a, attribute.Key("gen_ai.tool.call.result"))
	require.True(t, chats[0].EndTime.Before(tool.StartTime) || chats[0].EndTime.Equal(tool.StartTime))
	require.True(t, tool.EndTime.Before(chats[1].StartTime))

	save := one(t, inTrace, "RunActivity:"+contract.SaveResult)
	require.True(t, isAncestor(inTrace, wf, save))
	require.True(t, chats[1].EndTime.Before(save.StartTime))

	route := one(t, inTrace, "RunActivity:"+contract.Route)
	require.Equal(t, contract.RuleExplicit, attrs(route)["agentflow.route.rule"].AsString())

	// The token batches' signals are not traced.
	for _, sp := range all {
		require.False(t, strings.HasPrefix(sp.Name, "SignalWorkflow:") || strings.HasPrefix(sp.Name, "HandleSignal:"),
			"signals are not traced, got %s", sp.Name)
	}

	// No span of the trace quotes the prompt or the reply.
	for _, sp := range inTrace {
		for _, kv := range sp.Attributes {
			require.NotContains(t, kv.Value.String(), "6 * 7", "span %s attribute %s", sp.Name, kv.Key)
			require.NotContains(t, kv.Value.String(), "result is", "span %s attribute %s", sp.Name, kv.Key)
		}
	}
}

// TestTraceContentOptIn: with AGENTFLOW_TRACE_CONTENT the chat span
// carries the messages and the tool span the call's arguments and result.
func TestTraceContentOptIn(t *testing.T) {
	tp, rec := newTracing(t)
	ts := testserver.Start(t, testserver.Options{Script: traceScript, Catalogs: []string{testCatalog},
		TracerProvider: tp, TraceContent: true})
	calcTurn(t, ts)

	all := rec.await("RunWorkflow:" + contract.AgentTurn)
	chats := named(all, "chat gpt-4o-mini")
	require.Len(t, chats, 2)
	var in, out []string
	for _, c := range chats {
		a := attrs(c)
		in = append(in, a["gen_ai.input.messages"].AsString())
		out = append(out, a["gen_ai.output.messages"].AsString())
	}
	require.Contains(t, strings.Join(in, "\n"), `"content":"What is 6 * 7?"`)
	require.Contains(t, strings.Join(out, "\n"), `"content":"The result is 42."`)
	require.Contains(t, strings.Join(out, "\n"), `"type":"tool_call"`)
	a := attrs(one(t, all, "execute_tool calculator"))
	require.JSONEq(t, `{"expression": "6 * 7"}`, a["gen_ai.tool.call.arguments"].AsString())
	require.Equal(t, "42", a["gen_ai.tool.call.result"].AsString())
}

// TestTracingOff: without a tracer provider the server builds no exporter
// and installs nothing, and turns run as ever.
func TestTracingOff(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: traceScript, Catalogs: []string{testCatalog}})
	require.False(t, ts.Tracing().Enabled())
	calcTurn(t, ts)
}

// TestTraceAcrossEviction: a turn waiting for approval leaves the
// worker's cache (its workflow coroutine torn down) and is replayed when
// the approval comes. The trace still has one RunWorkflow span, ended
// when the turn ended, and every span of the turn once, all in the trace
// the client started.
func TestTraceAcrossEviction(t *testing.T) {
	tp, rec := newTracing(t)
	ts := testserver.Start(t, testserver.Options{Script: traceScript, Catalogs: []string{testCatalog, careCatalog}, TracerProvider: tp})
	e := &env{Server: ts, t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "care", JobID: "trace-" + testserver.RandomID(), Prompt: "What is 6 * 7?"}
	req.Normalize()
	run, err := turnclient.Start(ctx, ts.Client(), ts.TaskQueue, req)
	require.NoError(t, err)
	p := e.awaitPending(run.GetID())

	sdkworker.PurgeStickyWorkflowCache()
	require.Empty(t, named(rec.exp.GetSpans(), "RunWorkflow:"+contract.AgentTurn), "the evicted workflow's span ended")

	_, err = turnclient.Approve(ctx, ts.Client(), run.GetID(), agent.ApprovalDecision{CallID: p.CallID, Approved: true, Approver: "ana"})
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.Output)

	all := rec.await("RunWorkflow:" + contract.AgentTurn)
	start := one(t, all, "StartWorkflow:"+contract.AgentTurn)
	for _, sp := range all {
		switch sp.Name {
		case "UpdateWorkflow:" + contract.UpdateApprove, "ValidateUpdate:" + contract.UpdateApprove, "HandleUpdate:" + contract.UpdateApprove:
			continue // the approval, a trace of its own
		}
		if sp.Name == "CreateSchedule:"+contract.RetentionScheduleID(ts.TaskQueue) {
			continue // the worker's retention schedule, kept at its start
		}
		require.False(t, strings.HasPrefix(sp.Name, "QueryWorkflow:") || strings.HasPrefix(sp.Name, "HandleQuery:"),
			"queries are not traced, got %s", sp.Name)
		require.Equal(t, start.SpanContext.TraceID(), sp.SpanContext.TraceID(), "span %s in another trace", sp.Name)
	}
	wf := one(t, all, "RunWorkflow:"+contract.AgentTurn)
	require.Equal(t, start.SpanContext.SpanID(), wf.Parent.SpanID())
	require.Len(t, named(all, "chat gpt-4o-mini"), 2)
	require.Len(t, named(all, "RunActivity:"+contract.CallModel), 2)
	tool := one(t, all, "execute_tool calculator")
	require.True(t, isAncestor(all, wf, tool), "the call after the replay is not under the workflow's span")
	one(t, all, "HandleUpdate:"+contract.UpdateApprove)
	one(t, all, "RunActivity:"+contract.SaveResult)
}

// TestTraceFailures: a model call the provider refuses and a tool call
// with bad arguments end their spans with status Error and agentflow's
// error code, not the error's message; the failure's log line carries the
// trace and span ids.
func TestTraceFailures(t *testing.T) {
	tp, rec := newTracing(t)
	core, logs := observer.New(zapcore.WarnLevel)
	ts := testserver.Start(t, testserver.Options{Script: `
rules:
  - name: rejected
    when: {user: 'rejected'}
    fault: {status: 400, times: -1, message: 'unsupported parameter: temperature'}
  - name: bad-calc
    when: {user: 'bad calc'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "6 * secret"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'Could not compute.'}
`, Catalogs: []string{testCatalog}, TracerProvider: tp, Logger: zap.New(core)})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	turn := func(prompt string) (agent.TurnResult, error) {
		req := agent.TurnRequest{TenantID: "demo", JobID: "trace-" + testserver.RandomID(), AgentID: "assistant", Prompt: prompt}
		req.Normalize()
		run, err := turnclient.Start(ctx, ts.Client(), ts.TaskQueue, req)
		require.NoError(t, err)
		return turnclient.Result(ctx, run)
	}

	res, err := turn("rejected, please")
	require.NoError(t, err)
	require.Equal(t, agent.StatusFailed, res.Status)
	chat := one(t, rec.await("chat gpt-4o-mini"), "chat gpt-4o-mini")
	require.Equal(t, codes.Error, chat.Status.Code)
	require.Equal(t, string(agent.CodeModelRejected), chat.Status.Description)
	require.Equal(t, string(agent.CodeModelRejected), attrs(chat)["error.type"].AsString())
	failed := logs.FilterMessage("model call failed").All()
	require.NotEmpty(t, failed)
	require.Equal(t, chat.SpanContext.TraceID().String(), failed[0].ContextMap()["trace_id"])
	require.Equal(t, chat.SpanContext.SpanID().String(), failed[0].ContextMap()["span_id"])

	res, err = turn("bad calc")
	require.NoError(t, err)
	require.Equal(t, "Could not compute.", res.Output)
	tool := one(t, rec.await("execute_tool calculator"), "execute_tool calculator")
	require.Equal(t, codes.Error, tool.Status.Code)
	require.Equal(t, string(agent.CodeInvalid), tool.Status.Description)
	a := attrs(tool)
	require.Equal(t, string(agent.CodeInvalid), a["error.type"].AsString())
	require.Equal(t, agent.ToolError, a["agentflow.tool.status"].AsString())
	for _, sp := range []tracetest.SpanStub{chat, tool} {
		for _, kv := range sp.Attributes {
			require.NotContains(t, kv.Value.String(), "temperature")
			require.NotContains(t, kv.Value.String(), "secret")
		}
		require.Empty(t, sp.Events, "span %s records the error's message", sp.Name)
	}
}

// calcTurn runs a calculator turn of tenant demo from Go and checks its
// answer.
func calcTurn(t *testing.T, ts *testserver.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{TenantID: "demo", JobID: "trace-" + testserver.RandomID(), AgentID: "assistant", Prompt: "What is 6 * 7?"}
	req.Normalize()
	run, err := turnclient.Start(ctx, ts.Client(), ts.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.Output)
}
