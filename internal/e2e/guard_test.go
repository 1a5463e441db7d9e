package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const guardScript = `
pacing: {chunk_words: 1, delay_ms: 80}
rules:
  - name: leak
    when: {user: '(?i)launch code'}
    reply: {text: 'Sure, here it is. The launch code is 0000. Anything else?'}
  - name: fine
    reply: {text: 'The weather is fine. Nothing more to say.'}
`

const guardCatalog = `
tenant: demo
default_agent: guarded
agents:
  - id: guarded
    model: openai:gpt-4o-mini
    guardrails:
      - output: {deny: [launch code], regex: ['\b0000\b'], refusal: "I can't share that."}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// TestOutputGuardMidStream: an answer that breaks the output guard's rule
// mid-stream is cut at the last sentence that passed: no client — a live
// gRPC stream, SSE, the Workflow Streams poll — ever receives the held
// sentence; the refusal comes in its place and the turn ends
// GuardrailTripped. An answer that breaks nothing streams whole.
func TestOutputGuardMidStream(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script, o.Catalogs = guardScript, []string{guardCatalog, httpCatalogs[1]} })
	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.user), 2*time.Minute)
	defer cancel()
	job := "guard-" + testserver.RandomID()
	client := pb.NewAgentServiceClient(e.Conn)
	started, err := client.Start(ctx, &pb.StartRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: "What is the launch code?"}})
	require.NoError(t, err)
	streamID := started.GetStreamId()
	// A Workflow Streams subscriber polls while the turn runs.
	type polled struct {
		f   wsFollowed
		err error
	}
	wsDone := make(chan polled, 1)
	go func() {
		f, err := wsSubscribe(ctx, e.Client(), streamID, nil, 0)
		wsDone <- polled{f, err}
	}()
	stream, err := client.Resume(ctx, &pb.ResumeRequest{StreamId: streamID})
	require.NoError(t, err)
	live := fromPB(readAll(t, stream))
	const want = "Sure, here it is. I can't share that."
	require.Equal(t, want, agent.ReplayText(live), "the live gRPC stream")
	last := live[len(live)-1]
	require.Equal(t, agent.StreamFailed, last.Status)
	require.Equal(t, agent.ErrTypeGuardrailTripped, last.Error.Type)
	require.Contains(t, last.Error.Message, `rule deny "launch code"`)
	ws := <-wsDone
	require.NoError(t, ws.err)
	require.Equal(t, want, agent.ReplayText(wsEvents(t, ws.f.items)), "the Workflow Streams poll")

	sse, _ := e.sseEvents("GET", "/v1/"+streamID+"/events:stream", e.user, "", nil, nil)
	require.Equal(t, want, agent.ReplayText(sse), "SSE")
	for _, evs := range [][]agent.Event{live, sse, wsEvents(t, ws.f.items)} {
		for _, ev := range evs {
			require.NotContains(t, ev.Text, "0000")
			require.NotContains(t, ev.Text, "launch")
		}
	}
	steps, err := e.Store().Steps(ctx, "demo", job)
	require.NoError(t, err)
	require.Equal(t, want, steps[len(steps)-1].Content, "the stored reply is what was sent")
	usage, err := e.Store().JobUsage(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, usage, 1, "the call is in the ledger")

	(&env{Server: e.Server, t: t}).replay(streamID, "turn_guardrail_tripped")

	// An answer that breaks nothing streams whole.
	s2, err := client.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{Prompt: "How is the weather?"}})
	require.NoError(t, err)
	fine := fromPB(readAll(t, s2))
	require.Equal(t, "The weather is fine. Nothing more to say.", agent.ReplayText(fine))
	require.Equal(t, agent.StreamCompleted, fine[len(fine)-1].Status)
}
