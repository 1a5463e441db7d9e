package activities

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/words"
)

// saveResultInput saves the result of the request loadAgentInput(job,
// "hello") loads.
func saveResultInput(job, output string) contract.SaveResultInput {
	return contract.SaveResultInput{
		Request:    loadAgentInput(job, "hello").Request,
		WorkflowID: contract.TurnWorkflowID("demo", job),
		Result:     agent.TurnResult{JobID: job, Status: agent.StatusCompleted, Output: output},
	}
}

func TestSaveResultFirstWins(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	h.loadAgent(t, job, "hello")

	var first, second agent.TurnResult
	h.execute(t, contract.SaveResult, saveResultInput(job, "first"), &first)
	require.Equal(t, "first", first.Output)
	require.NotEmpty(t, first.ResultRef)

	// A second writer (a retry, or another run of the job) gets the
	// stored result, result_ref included.
	h.execute(t, contract.SaveResult, saveResultInput(job, "second"), &second)
	require.Equal(t, first, second)

	// The exchange went into the session once.
	msgs, err := h.store.SessionMessages(t.Context(), "demo", "session-1", 10)
	require.NoError(t, err)
	require.Equal(t, []agent.Message{
		{Role: agent.RoleUser, Content: "hello"},
		{Role: agent.RoleAssistant, Content: "first"},
	}, msgs)
}

// TestSaveResultPublishesClosingEvents: a streamed turn's SaveResult
// publishes, once the result and the session's exchange are stored, the
// events handed to it and the closing events the turn logs next, at the
// indices the turn gave, and returns the closing events to be logged as
// they are; a turn not streamed, or one whose hand-on was a wake-up,
// has nothing published and nothing returned.
func TestSaveResultPublishesClosingEvents(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript, func(d *Deps) { d.Events = pglive.NewPublisher(d.Store.Pool()) })
	ctx, cancel := context.WithCancel(t.Context())
	hub := pglive.NewHub(h.store.Pool(), zaptest.NewLogger(t))
	done := make(chan error, 1)
	go func() { done <- hub.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	require.Eventually(t, hub.Connected, 10*time.Second, 5*time.Millisecond)

	job := randomJob()
	h.loadAgent(t, job, "hello")
	in := saveResultInput(job, "the answer")
	sub := hub.Subscribe(in.WorkflowID)
	defer sub.Close()
	handed := agent.Event{StreamID: in.WorkflowID, Index: 7, Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishStop}
	in.Live, in.CloseFrom = contract.Live{Events: []agent.Event{handed}}, 8
	// What the turn handed its calls before, on the live path: it is
	// gone by the time a follower has the close (a read then answers
	// from the log, with the end, not from the live path without it).
	earlier := agent.Event{StreamID: in.WorkflowID, Index: 1, Kind: agent.EventStatus, Status: agent.StreamRunning}
	pub := pglive.NewPublisher(h.store.Pool())
	require.NoError(t, pub.Put(t.Context(), agent.TokenBatch{StreamID: in.WorkflowID, First: 1, Events: []agent.Event{earlier}}))
	<-sub.Events()

	var saved agent.TurnResult
	h.execute(t, contract.SaveResult, in, &saved)
	closing := eventlog.Closing(saved)
	require.Len(t, saved.StreamTail, len(closing))
	for i := range closing {
		closing[i].StreamID, closing[i].Index = in.WorkflowID, 8+int64(i)
	}
	require.Equal(t, closing, saved.StreamTail)
	require.Equal(t, agent.StreamCompleted, closing[len(closing)-1].Status)
	require.JSONEq(t, `{"type":"text","text":"the answer"}`, string(closing[0].Content))

	select {
	case evs := <-sub.Events():
		require.Equal(t, append([]agent.Event{handed}, closing...), evs)
		left, err := hub.Stored(t.Context(), in.WorkflowID, 0)
		require.NoError(t, err)
		require.Empty(t, left, "the live path holds the turn's events without their end")
	case <-time.After(30 * time.Second):
		t.Fatal("nothing published")
	}

	// No CloseFrom (a turn not streamed), a hand-on too large to publish,
	// or an answer too large: the turn logs its closing events as before,
	// and its close carries them.
	long := strings.Repeat("long answer ", eventlog.MaxLiveBytes/12+1)
	for _, in := range []contract.SaveResultInput{saveResultInput(randomJob(), "quiet"), saveResultInput(randomJob(), "large"), saveResultInput(randomJob(), long)} {
		h.loadAgent(t, in.Request.JobID, "hello")
		switch in.Result.Output {
		case "large":
			in.Live, in.CloseFrom = contract.Live{Wake: true}, 3
		case long:
			in.CloseFrom = 3
		}
		var saved agent.TurnResult
		h.execute(t, contract.SaveResult, in, &saved)
		require.Empty(t, saved.StreamTail, words.Clip(in.Result.Output, 20))
	}
}

func TestLoadAgentReturnsStoredResult(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	h.loadAgent(t, job, "hello")
	var saved agent.TurnResult
	h.execute(t, contract.SaveResult, saveResultInput(job, "done before"), &saved)

	// Another run of the same job: it gets the result, not an agent.
	var res contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, loadAgentInput(job, "hello"), &res)
	require.NotNil(t, res.Existing)
	require.Equal(t, saved, *res.Existing)
	require.Empty(t, res.Agent.ID)
}

func TestLoadAgentTwiceBeginsTurnOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	job := randomJob()
	first := h.loadAgent(t, job, "hello")
	again := h.loadAgent(t, job, "hello")
	require.Equal(t, first, again)

	steps, err := h.store.Steps(t.Context(), "demo", job)
	require.NoError(t, err)
	require.Equal(t, []agent.Message{{Role: agent.RoleUser, Content: "hello"}}, steps)
}

// TestJobIDNamesOneRequest: another request under a job id that is begun
// or answered fails with Conflict, whatever workflow runs it, and nothing
// of it is stored.
func TestJobIDNamesOneRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	begun, answered := randomJob(), randomJob()
	h.loadAgent(t, begun, "hello")
	h.loadAgent(t, answered, "hello")
	var saved agent.TurnResult
	h.execute(t, contract.SaveResult, saveResultInput(answered, "done"), &saved)

	for _, job := range []string{begun, answered} {
		tests := []struct {
			name   string
			mutate func(*contract.LoadAgentInput)
		}{
			{"another prompt", func(in *contract.LoadAgentInput) { in.Request.Prompt = "goodbye" }},
			{"another session", func(in *contract.LoadAgentInput) { in.Request.SessionID = "session-2" }},
			{"another prompt, another workflow", func(in *contract.LoadAgentInput) {
				in.Request.Prompt, in.WorkflowID = "goodbye", "manual-"+job
			}},
			{"routed", func(in *contract.LoadAgentInput) { in.Request.AgentID = "" }},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				in := loadAgentInput(job, "hello")
				tt.mutate(&in)
				_, err := h.env.ExecuteActivity(contract.LoadAgent, in)
				requireFailure(t, err, agent.ErrTypeConflict, "names another request")
			})
		}
		steps, err := h.store.Steps(t.Context(), "demo", job)
		require.NoError(t, err)
		require.Equal(t, []agent.Message{{Role: agent.RoleUser, Content: "hello"}}, steps, "the first request's prompt stands")
	}

	// The same request again: the stored result, or the begun turn.
	var res contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, loadAgentInput(answered, "hello"), &res)
	require.Equal(t, saved, *res.Existing)
	h.loadAgent(t, begun, "hello")

	// A result for another request is not saved over the job's, nor
	// returned as its own.
	other := saveResultInput(answered, "other")
	other.Request.Prompt = "goodbye"
	_, err := h.env.ExecuteActivity(contract.SaveResult, other)
	requireFailure(t, err, agent.ErrTypeConflict, "names another request")
	stored, err := h.store.Result(t.Context(), "demo", answered)
	require.NoError(t, err)
	require.Equal(t, saved, stored)
}

// requireFailure checks that an activity failed, for good, with an error
// of type typ whose message contains msg.
func requireFailure(t *testing.T, err error, typ, msg string) {
	t.Helper()
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "want an application error, got %v", err)
	require.Equal(t, typ, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Message(), msg)
}
