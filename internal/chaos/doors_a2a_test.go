package chaos

import (
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2aclient"
	"github.com/a2aproject/a2a-go/a2aclient/agentcard"

	a2adoor "github.com/agentflow/agentflow/internal/gateway/a2a"
)

// a2aClient sends the prompt with a2a-go's client (message/stream, A2A
// 0.3) and, when the stream breaks, resubscribes to the task
// (tasks/resubscribe): the task as it is now, then its updates. It keeps
// the task as the client's events build it — the answer artifact's parts,
// appended or replaced as each update says, replaced by a snapshot — and
// a status message read twice outside a snapshot is a duplicate.
func a2aClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	hc := httpClient()
	defer hc.CloseIdleConnections()
	actx := a2aclient.WithSessionID(ctx, "chaos")
	card, err := agentcard.NewResolver(hc).Resolve(actx, c.base+a2adoor.A2APrefix+"calc",
		agentcard.WithRequestHeader("Authorization", "Bearer "+token))
	if err != nil {
		return doorRead{}, fmt.Errorf("agent card: %w", err)
	}
	creds := a2aclient.NewInMemoryCredentialsStore()
	creds.Set("chaos", "bearer", a2aclient.AuthCredential(token))
	cl, err := a2aclient.NewFromCard(actx, card, a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	if err != nil {
		return doorRead{}, fmt.Errorf("a2a client: %w", err)
	}
	defer func() { _ = cl.Destroy() }()

	t := &a2aRead{artifacts: map[a2a.ArtifactID][]a2a.Part{}, statuses: map[string]bool{}}
	var read doorRead
	err = resume(ctx, &read, "stream", func(int) (bool, error) {
		var events func(func(a2a.Event, error) bool)
		if t.id == "" {
			// No task yet: send the message (again: a task the first
			// sending started, if any, is left to end on its own, and the
			// run fails on its second result).
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.TextPart{Text: c.prompt})
			events = cl.SendStreamingMessage(actx, &a2a.MessageSendParams{Message: msg})
		} else {
			events = cl.ResubscribeToTask(actx, &a2a.TaskIDParams{ID: t.id})
		}
		var broke error
		for ev, err := range events {
			if err != nil {
				broke = err
				break
			}
			t.apply(ev)
		}
		if !t.final {
			if broke == nil {
				broke = fmt.Errorf("the stream of task %q ended before the task did", t.id)
			}
			return false, broke
		}
		if t.state != a2a.TaskStateCompleted {
			return true, fmt.Errorf("task %s ended %s", t.id, t.state)
		}
		id := string(t.id)
		read.job = id[strings.LastIndexByte(id, '/')+1:]
		read.text, read.flaws = t.answer(), t.flaws
		return true, nil
	})
	return read, err
}

// a2aRead is a task as a client's events build it.
type a2aRead struct {
	id        a2a.TaskID
	state     a2a.TaskState
	final     bool
	artifacts map[a2a.ArtifactID][]a2a.Part
	statuses  map[string]bool // the status messages read, by id
	flaws     []string
}

func (t *a2aRead) apply(ev a2a.Event) {
	switch ev := ev.(type) {
	case *a2a.Task:
		// A snapshot: what it holds replaces what was read.
		t.id, t.state = ev.ID, ev.Status.State
		t.final = ev.Status.State.Terminal()
		t.artifacts = map[a2a.ArtifactID][]a2a.Part{}
		for _, a := range ev.Artifacts {
			t.artifacts[a.ID] = append([]a2a.Part(nil), a.Parts...)
		}
		if m := ev.Status.Message; m != nil {
			t.statuses[m.ID] = true
		}
	case *a2a.TaskStatusUpdateEvent:
		t.state, t.final = ev.Status.State, ev.Final
		if m := ev.Status.Message; m != nil {
			if t.statuses[m.ID] {
				t.flaws = append(t.flaws, "status message "+m.ID+" twice")
			}
			t.statuses[m.ID] = true
		}
	case *a2a.TaskArtifactUpdateEvent:
		if ev.Artifact == nil {
			return
		}
		if ev.Append {
			t.artifacts[ev.Artifact.ID] = append(t.artifacts[ev.Artifact.ID], ev.Artifact.Parts...)
		} else {
			t.artifacts[ev.Artifact.ID] = append([]a2a.Part(nil), ev.Artifact.Parts...)
		}
	}
}

// answer is the text of the answer artifact; a text part that repeats
// the one before it is a duplicate.
func (t *a2aRead) answer() string {
	var b strings.Builder
	prev := ""
	for _, p := range t.artifacts["answer"] {
		var text string
		switch p := p.(type) {
		case a2a.TextPart:
			text = p.Text
		case *a2a.TextPart:
			text = p.Text
		default:
			continue
		}
		if text == prev {
			t.flaws = append(t.flaws, fmt.Sprintf("answer part %q twice", text))
		}
		prev = text
		b.WriteString(text)
	}
	return b.String()
}
