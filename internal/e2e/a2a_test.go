package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// a2aCatalog is httpCatalogs' tenant demo with its agents exposed over
// A2A.
var a2aCatalog = strings.NewReplacer(
	"limits: {max_iterations: 4, turn_timeout_sec: 120}", "limits: {max_iterations: 4, turn_timeout_sec: 120}\n    expose: [a2a]",
	"limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}",
	"limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}\n    expose: [a2a]",
).Replace(httpCatalogs[0])

// a2aTask is a task as a2a-js's Task.toJSON writes it (1.0's JSON).
type a2aTask struct {
	ID        string `json:"id"`
	ContextID string `json:"contextId"`
	Status    struct {
		State   string     `json:"state"`
		Message *a2aV1Text `json:"message"`
	} `json:"status"`
	Artifacts []struct {
		ArtifactID string      `json:"artifactId"`
		Parts      []a2aV1Part `json:"parts"`
	} `json:"artifacts"`
}

type a2aV1Part struct {
	Text string `json:"text"`
}

type a2aV1Text struct {
	MessageID string      `json:"messageId"`
	Parts     []a2aV1Part `json:"parts"`
}

// a2aEvent is one of a stream's events, as StreamResponse.toJSON writes
// it.
type a2aEvent struct {
	Task         *a2aTask `json:"task"`
	StatusUpdate *struct {
		TaskID string `json:"taskId"`
		Status struct {
			State   string     `json:"state"`
			Message *a2aV1Text `json:"message"`
		} `json:"status"`
	} `json:"statusUpdate"`
	ArtifactUpdate *struct {
		TaskID   string `json:"taskId"`
		Artifact struct {
			Parts []a2aV1Part `json:"parts"`
		} `json:"artifact"`
	} `json:"artifactUpdate"`
}

func (t a2aTask) answer() string {
	var b strings.Builder
	for _, a := range t.Artifacts {
		for _, p := range a.Parts {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// a2aStreamed is what a stream says of its task: its id, the states its
// updates go through (repeats folded), its last state, its streamed
// answer and the ids of its status messages.
type a2aStreamed struct {
	id, last, text string
	states         []string
	messages       []string
	artifacts      int
}

// readA2AStream checks a stream's shape — the task first and once, then
// updates of that task only, nothing after a terminal state — and
// returns what it says.
func readA2AStream(t *testing.T, events []a2aEvent) a2aStreamed {
	t.Helper()
	require.NotEmpty(t, events)
	require.NotNil(t, events[0].Task, "the task comes first")
	s := a2aStreamed{id: events[0].Task.ID, last: events[0].Task.Status.State, text: events[0].Task.answer()}
	terminal := func(state string) bool {
		switch state {
		case "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED":
			return true
		}
		return false
	}
	for i, ev := range events[1:] {
		require.False(t, terminal(s.last), "nothing after the end (event %d)", i+1)
		require.Nil(t, ev.Task, "one task")
		switch {
		case ev.StatusUpdate != nil:
			require.Equal(t, s.id, ev.StatusUpdate.TaskID)
			st := ev.StatusUpdate.Status
			if len(s.states) == 0 || s.states[len(s.states)-1] != st.State {
				s.states = append(s.states, st.State)
			}
			s.last = st.State
			if st.Message != nil {
				s.messages = append(s.messages, st.Message.MessageID)
			}
		case ev.ArtifactUpdate != nil:
			require.Equal(t, s.id, ev.ArtifactUpdate.TaskID)
			s.artifacts++
			for _, p := range ev.ArtifactUpdate.Artifact.Parts {
				s.text += p.Text
			}
		default:
			t.Fatalf("an event of no kind: %+v", ev)
		}
	}
	return s
}

// checkA2ALog checks a streamed task against its turn's log and its
// stored result: the streamed answer is the result's output; every tool
// call's start and end was streamed once, in order, and each content
// block once (no event missing, none twice).
func (e *httpEnv) checkA2ALog(t *testing.T, s a2aStreamed, after int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := e.Client()
	res, err := turnclient.Result(ctx, c.GetWorkflow(ctx, s.id, ""))
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Equal(t, res.Output, s.text, "the streamed answer is the stored result")
	code, data := e.call("GET", "/v1/results?result_ref="+url.QueryEscape(res.ResultRef), e.user, "")
	require.Equal(t, 200, code, "%s", data)
	var stored struct {
		Output string `json:"output"`
	}
	require.NoError(t, json.Unmarshal(data, &stored))
	require.Equal(t, stored.Output, s.text)

	page, err := turnclient.Events(ctx, c, s.id, agent.EventsQuery{AfterIndex: after, Limit: 1000})
	require.NoError(t, err)
	require.True(t, page.Done)
	var want []string
	contents := 0
	for _, ev := range page.Events {
		if ev.Child != nil {
			continue
		}
		switch ev.Kind {
		case agent.EventToolStart, agent.EventToolEnd, agent.EventApprovalDecided:
			want = append(want, fmt.Sprintf("%s#%d", s.id, ev.Index))
		case agent.EventContent:
			contents++
		}
	}
	require.NotEmpty(t, want)
	var got []string
	for _, m := range s.messages {
		if strings.Contains(m, "#") {
			got = append(got, m)
		}
	}
	require.Subset(t, got, want, "every tool call's updates streamed")
	seen := map[string]bool{}
	for _, m := range got {
		require.False(t, seen[m], "an update streamed twice: %s", m)
		seen[m] = true
	}
	require.Equal(t, contents, s.artifacts, "each content block streamed once")
}

// TestA2AJSClient: a2a-js 1.3's own clients against the gateway's A2A
// agents. Its default client reads the card, picks 1.0 and sends a
// message (a completed task, its id the turn's stream id), streams one
// (the streamed answer equals the stored result, with each of the log's
// updates once), reads a task, cancels one that waits, streams one to its
// approval (the stream ends input-required), and answers it with a
// message for the task while a subscriber follows the task to its end.
// Switched to 0.3 (legacyCompat) on the card's 0.3 interface, it sends,
// streams and reads the same way. It needs Node.js (with npm): without
// it the test skips, except under CI.
func TestA2AJSClient(t *testing.T) {
	dir := nodeClient(t, "a2a", "@a2a-js/sdk")
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Catalogs = []string{a2aCatalog, httpCatalogs[1]} })
	out := runNode(t, dir, "client.mjs", nodeInput(t, map[string]string{"base": e.api, "token": e.all, "calc": "assistant", "careful": "careful"}))

	type run struct {
		Version  string
		Sent     a2aTask
		Streamed []a2aEvent
		Got      a2aTask
	}
	var got struct {
		run
		Waiting, Canceled          a2aTask
		Asked, Decided, Subscribed []a2aEvent
		Legacy                     run
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)

	for _, r := range []struct {
		name string
		run  run
		want string
	}{{"1.0", got.run, "1.0"}, {"0.3", got.Legacy, "0.3"}} {
		t.Run(r.name, func(t *testing.T) {
			require.Equal(t, r.want, r.run.Version, "the client's protocol")
			require.True(t, strings.HasPrefix(r.run.Sent.ID, "turn/demo/"), "the turn's stream id: %q", r.run.Sent.ID)
			require.Equal(t, "TASK_STATE_COMPLETED", r.run.Sent.Status.State)
			require.Equal(t, "The result is 50.", r.run.Sent.answer())
			require.Equal(t, r.run.Sent.ID, r.run.Got.ID)
			require.Equal(t, "The result is 50.", r.run.Got.answer())
			s := readA2AStream(t, r.run.Streamed)
			require.Equal(t, []string{"TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}, s.states)
			require.Equal(t, "The result is 5.", s.text)
			e.checkA2ALog(t, s, 0)
		})
	}

	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", got.Waiting.Status.State)
	require.Equal(t, got.Waiting.ID, got.Canceled.ID)
	require.Equal(t, "TASK_STATE_CANCELED", got.Canceled.Status.State)

	asked := readA2AStream(t, got.Asked)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", asked.last, "a 1.0 stream ends when its task needs input")
	decided := readA2AStream(t, got.Decided)
	require.Equal(t, asked.id, decided.id, "the answer goes on with the same task")
	require.NotEqual(t, "TASK_STATE_INPUT_REQUIRED", got.Decided[0].Task.Status.State, "decided before the task was read")
	require.Equal(t, "TASK_STATE_COMPLETED", decided.last)
	require.Equal(t, "The result is 42.", decided.text)
	subscribed := readA2AStream(t, got.Subscribed)
	require.Equal(t, asked.id, subscribed.id)
	require.Equal(t, "TASK_STATE_INPUT_REQUIRED", got.Subscribed[0].Task.Status.State, "subscribed while it waited")
	require.Equal(t, "TASK_STATE_COMPLETED", subscribed.last)
	require.Equal(t, "The result is 42.", subscribed.text)
	e.checkA2ALog(t, subscribed, 0)
	// Both followed the same log: what the answer's stream saw after the
	// task it read, the subscriber saw too.
	require.Subset(t, subscribed.messages, decided.messages)
}
