package activities

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// modelScript answers everything at once, except the prompts that make
// the model fail as providers do.
const modelScript = `
rules:
  - name: rejected
    when: {user: '^rejected'}
    fault: {status: 400, times: -1, message: 'unsupported parameter: temperature'}
  - name: throttled
    when: {user: '^throttled'}
    fault: {status: 429, retry_after_sec: 7, times: -1}
  - name: overloaded
    when: {user: '^overloaded'}
    fault: {status: 503, times: -1}
  - name: priced
    when: {user: '^priced'}
    reply: {text: 'Costly.', usage: {prompt_tokens: 1000, completion_tokens: 200, cached_tokens: 400, reasoning_tokens: 50}}
  - name: answer
    reply: {text: 'Hello there.'}
`

func randomJob() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

// startTurn starts a workflow under the turn's id on a task queue nobody
// polls: a real turn for CallModel to signal, whose history keeps the
// batches it was sent.
func (h *harness) startTurn(t *testing.T, job string) string {
	t.Helper()
	id := contract.TurnWorkflowID("demo", job)
	_, err := h.temporal.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-" + job}, "TokenSink")
	require.NoError(t, err)
	t.Cleanup(func() { _ = h.temporal.TerminateWorkflow(context.Background(), id, "", "test over") })
	return id
}

// signalledBatches returns the token batches the turn received, in order.
func (h *harness) signalledBatches(t *testing.T, turnID string) []sentBatch {
	t.Helper()
	dc := converter.GetDefaultDataConverter()
	var out []sentBatch
	it := h.temporal.GetWorkflowHistory(t.Context(), turnID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		sig := ev.GetWorkflowExecutionSignaledEventAttributes()
		if sig == nil || sig.GetSignalName() != contract.SignalTokens {
			continue
		}
		var b agent.TokenBatch
		require.NoError(t, dc.FromPayloads(sig.GetInput(), &b))
		out = append(out, sentBatch{TokenBatch: b})
	}
	return out
}

// slowScript streams its reply a word every 1.5 s, slower than the
// batcher's one-second heartbeat.
const slowScript = `
pacing: {chunk_words: 1, delay_ms: 1500}
rules:
  - reply: {text: 'slow reply'}
`

func TestCallModelHeartbeatsLastIndexSent(t *testing.T) {
	t.Parallel()
	h := newHarness(t, slowScript)
	job := randomJob()
	ag := h.loadAgent(t, job, "take your time")
	turnID := h.startTurn(t, job)

	var mu sync.Mutex
	var received []int64
	h.env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var index int64
		err := details.Get(&index)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			received = append(received, index)
		}
	})
	h.beats.reset()

	in := callModelInput(job, ag)
	in.Stream, in.StreamID, in.FirstIndex = true, turnID, 4
	var res contract.CallModelResult
	h.execute(t, contract.CallModel, in, &res)
	require.Equal(t, "slow reply", res.Content)

	bs := h.signalledBatches(t, turnID)
	require.Equal(t, "slow reply", strings.Join(texts(bs), ""))
	requireGapFree(t, bs, 4, in, 1)
	beats := h.beats.all()
	requireHeartbeats(t, beats, bs, 3)
	// The model pauses 1.5 s before each word, so the one-second
	// heartbeat fires between batches and reports the first batch's last
	// index while the call still runs.
	require.Contains(t, beats, bs[0].First+int64(len(bs[0].Events))-1, "heartbeats %v", beats)

	// What reached Temporal: the first heartbeat at once; the SDK
	// throttles the rest to one per window.
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, received)
	require.Equal(t, beats[0], received[0])
}

// longScript streams a reply of 120 words over 12 s.
var longScript = `
pacing: {chunk_words: 1, delay_ms: 100}
rules:
  - reply: {text: '` + strings.Repeat("word ", 119) + `word'}
`

func TestCallModelStopsWhenTurnRefusesBatches(t *testing.T) {
	t.Parallel()
	h := newHarness(t, longScript)
	job := randomJob()
	ag := h.loadAgent(t, job, "tell me everything")

	// No workflow has the stream's id: the first signal fails.
	in := callModelInput(job, ag)
	in.Stream, in.StreamID, in.FirstIndex = true, contract.TurnWorkflowID("demo", "nobody-"+job), 2
	start := time.Now()
	_, err := h.env.ExecuteActivity(contract.CallModel, in)
	elapsed := time.Since(start)

	require.ErrorContains(t, err, "send token batch")
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.False(t, app.NonRetryable(), "the retry voids this attempt's text and streams again")
	// The whole reply takes 12 s to stream; the call stops at the first
	// refused batch, a fraction of a second in.
	require.Less(t, elapsed, 8*time.Second, "the model call went on after the turn refused a batch")
	_, err = h.store.Step(t.Context(), "demo", job, 1)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "the reply is not stored: %v", err)
}

func TestCallModelReturnsStoredStep(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	calls := []agent.ToolCall{{ID: "call-1", Name: "tally", Arguments: `{}`}}
	tests := []struct {
		name     string
		stored   agent.Message
		want     contract.CallModelResult
		wantType string // of the failure; empty: none
	}{
		{
			name:   "reply an earlier attempt stored",
			stored: agent.Message{Role: agent.RoleAssistant, Content: "Stored reply.", ToolCalls: calls},
			want: contract.CallModelResult{Content: "Stored reply.", ToolCalls: calls, Model: "openai:gpt-4o-mini", Stored: true,
				FinishReason: agent.FinishToolCalls},
		},
		{
			name:     "step that is not a reply",
			stored:   agent.Message{Role: agent.RoleTool, ToolCallID: "call-1", Name: "tally", Content: "run 1"},
			wantType: agent.ErrTypeInternal,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "hello")
			require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1, tt.stored))
			before := len(h.model.Requests())

			val, err := h.env.ExecuteActivity(contract.CallModel, callModelInput(job, ag))
			require.Len(t, h.model.Requests(), before, "the model is not called")
			if tt.wantType != "" {
				var app *temporal.ApplicationError
				require.True(t, errors.As(err, &app), "%v", err)
				require.Equal(t, tt.wantType, app.Type())
				require.True(t, app.NonRetryable())
				return
			}
			require.NoError(t, err)
			var res contract.CallModelResult
			require.NoError(t, val.Get(&res))
			require.Equal(t, tt.want, res)
		})
	}
}

func TestCallModelRetryAfterReplyStored(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	ag := h.loadAgent(t, job, "hello")

	var first, again contract.CallModelResult
	h.execute(t, contract.CallModel, callModelInput(job, ag), &first)
	require.Equal(t, "Hello there.", first.Content)
	require.False(t, first.Stored)

	// A retry of an attempt whose completion was lost: the reply is read
	// back, so the workflow acts on what is stored.
	h.execute(t, contract.CallModel, callModelInput(job, ag), &again)
	require.True(t, again.Stored)
	require.Equal(t, first.Content, again.Content)
	require.Equal(t, 1, h.model.Served("answer"), "the model was called once")
	require.Positive(t, first.Usage.TotalTokens)
	require.Equal(t, first.Usage, again.Usage, "the stored reply reports what its call used, so budgets count it")
	require.Equal(t, first.Model, again.Model)

	step, err := h.store.Step(t.Context(), "demo", job, 1)
	require.NoError(t, err)
	require.Equal(t, agent.Message{Role: agent.RoleAssistant, Content: "Hello there.", Usage: &first.Usage, Model: first.Model}, step)
}

// pacedScript streams its reply a word every 5 ms: the first word leaves
// at once as a batch of its own, and the rest arrive well within the next
// interval (the test sets 200 ms), so they are still buffered when the
// call ends however loaded the machine is.
const pacedScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - reply: {text: 'one two three four five six seven eight'}
`

// TestCallModelKeepsLastBatchForResult: asked to (TailInResult), a
// streamed call signals its batches but the last, which it returns in its
// result, so that the turn logs it with the call's completion; together
// they continue the log without a gap and hold the whole reply.
func TestCallModelKeepsLastBatchForResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, pacedScript)
	h.acts.streamInterval = 200 * time.Millisecond
	job := randomJob()
	ag := h.loadAgent(t, job, "count")
	turnID := h.startTurn(t, job)

	in := callModelInput(job, ag)
	in.Stream, in.StreamID, in.FirstIndex, in.TailInResult = true, turnID, 4, true
	var res contract.CallModelResult
	h.execute(t, contract.CallModel, in, &res)
	require.Equal(t, "one two three four five six seven eight", res.Content)
	require.NotNil(t, res.Tail, "the last batch comes with the result")

	bs := h.signalledBatches(t, turnID)
	require.NotEmpty(t, bs, "the batches before the last are signalled")
	all := append(bs, sentBatch{TokenBatch: *res.Tail})
	requireGapFree(t, all, 4, in, 1)
	require.Equal(t, res.Content, strings.Join(texts(all), ""))
}

// thinkingScript reasons, says a few words and calls a tool, streamed a
// word (and a few bytes of arguments) at a time.
const thinkingScript = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - reply:
      reasoning: 'The user wants a sum.'
      text: 'Let me add.'
      tool_calls: [{name: calculator, arguments: '{"expression": "2+2"}'}]
`

// TestCallModelStreamsWhatTheModelSends: a streamed reply's reasoning,
// text and tool-call arguments reach the turn as reasoning, token and
// tool_args_delta events, in the model's order; the call's fragments
// joined are its arguments, under the id and name the result gives it;
// the result says why the model stopped.
func TestCallModelStreamsWhatTheModelSends(t *testing.T) {
	t.Parallel()
	h := newHarness(t, thinkingScript)
	h.acts.streamInterval = 20 * time.Millisecond
	job := randomJob()
	ag := h.loadAgent(t, job, "add two and two")
	turnID := h.startTurn(t, job)

	in := callModelInput(job, ag)
	in.Stream, in.StreamID, in.FirstIndex, in.TailInResult = true, turnID, 4, true
	var res contract.CallModelResult
	h.execute(t, contract.CallModel, in, &res)
	require.Equal(t, "Let me add.", res.Content)
	require.Equal(t, agent.FinishToolCalls, res.FinishReason)
	require.Len(t, res.ToolCalls, 1)
	call := res.ToolCalls[0]

	all := h.signalledBatches(t, turnID)
	if res.Tail != nil {
		all = append(all, sentBatch{TokenBatch: *res.Tail})
	}
	requireGapFree(t, all, 4, in, 1)
	var events []agent.Event
	for _, b := range all {
		events = append(events, b.Events...)
	}
	var order []agent.EventKind
	var args strings.Builder
	for _, e := range events {
		require.NoError(t, e.Validate(), "%s", e)
		if len(order) == 0 || order[len(order)-1] != e.Kind {
			order = append(order, e.Kind)
		}
		if e.Kind == agent.EventToolArgsDelta {
			require.Equal(t, call.ID, e.Tool.CallID)
			require.Equal(t, "calculator", e.Tool.Name)
			args.WriteString(e.Tool.ArgsDelta)
		}
	}
	require.Equal(t, []agent.EventKind{agent.EventReasoning, agent.EventToken, agent.EventToolArgsDelta}, order)
	require.Equal(t, "The user wants a sum.", agent.ReplayReasoning(events))
	require.Equal(t, "Let me add.", agent.ReplayText(events))
	require.JSONEq(t, call.Arguments, args.String())
}

// TestCallModelStoresAnswerCutShort: the call after a steer interrupted
// its turn's model call stores the answer cut short (Cut) at its step,
// partial, before the message, and the model reads it as cut short; a
// reply an attempt of the interrupted call stored whole there stays.
func TestCallModelStoresAnswerCutShort(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	for _, tt := range []struct {
		name   string
		stored *agent.Message // at step 1 before the call
		want   agent.Message  // step 1 after it
	}{
		{name: "cut short", want: agent.Message{Role: agent.RoleAssistant, Content: "Once upon a", Partial: true}},
		{name: "stored whole", stored: &agent.Message{Role: agent.RoleAssistant, Content: "Once upon a time."},
			want: agent.Message{Role: agent.RoleAssistant, Content: "Once upon a time."}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			ag := h.loadAgent(t, job, "hello")
			if tt.stored != nil {
				require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1, *tt.stored))
			}
			in := callModelInput(job, ag)
			in.Seq = 3
			in.Cut = &contract.CutStep{Seq: 1, Text: "Once upon a"}
			in.Steer = []contract.SteerStep{{Seq: 2, Prompt: "now a cat"}}
			var res contract.CallModelResult
			h.execute(t, contract.CallModel, in, &res)
			require.Equal(t, "Hello there.", res.Content)

			step, err := h.store.Step(t.Context(), "demo", job, 1)
			require.NoError(t, err)
			require.Equal(t, tt.want, step)
			reqs := h.model.Requests()
			var sent []string
			for _, m := range reqs[len(reqs)-1].Messages {
				sent = append(sent, m.Role+": "+m.Content)
			}
			answer := tt.want.Content
			if tt.want.Partial {
				answer += agent.InterruptedNote
			}
			require.Equal(t, []string{"user: hello", "assistant: " + answer, "user: now a cat"}, sent[len(sent)-3:])
		})
	}
}

// TestInterruptModel: InterruptModel sends the stream's interruption
// once a call, and is harmless with no live path.
func TestInterruptModel(t *testing.T) {
	t.Parallel()
	var sent []string
	a := &Activities{interrupt: func(_ context.Context, id string) error { sent = append(sent, id); return nil }}
	require.NoError(t, a.InterruptModel(t.Context(), contract.InterruptModelInput{StreamID: "turn/demo/j"}))
	require.NoError(t, a.InterruptModel(t.Context(), contract.InterruptModelInput{StreamID: "turn/demo/j"}))
	require.Equal(t, []string{"turn/demo/j", "turn/demo/j"}, sent)
	require.NoError(t, (&Activities{}).InterruptModel(t.Context(), contract.InterruptModelInput{StreamID: "turn/demo/j"}))
}
