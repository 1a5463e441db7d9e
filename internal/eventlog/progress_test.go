package eventlog_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// heldClient is the real client whose first signal waits until the test
// lets it go, so that the test knows what a send took.
type heldClient struct {
	client.Client
	release chan struct{}

	mu      sync.Mutex
	signals int
}

func (c *heldClient) SignalWorkflow(ctx context.Context, workflowID, runID, name string, arg any) error {
	c.mu.Lock()
	c.signals++
	first := c.signals == 1
	c.mu.Unlock()
	if first {
		<-c.release
	}
	return c.Client.SignalWorkflow(ctx, workflowID, runID, name, arg)
}

func (c *heldClient) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.signals
}

// progressSignals are the tool_progress signals a workflow received, in
// order.
func progressSignals(t *testing.T, c client.Client, id string) []agent.ToolProgress {
	t.Helper()
	var out []agent.ToolProgress
	it := c.GetWorkflowHistory(t.Context(), id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err)
		sig := ev.GetWorkflowExecutionSignaledEventAttributes()
		if sig == nil || sig.GetSignalName() != contract.SignalToolProgress {
			continue
		}
		var p agent.ToolProgress
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(sig.GetInput(), &p))
		out = append(out, p)
	}
	return out
}

// TestProgressCustomEvents: a tool call's custom events reach its turn in
// the tool_progress signal, each one, in the order emitted, beside the
// latest progress message; one not yet sent is replaced, in its place, by
// a later one of the same name and id; an event not of its shape is
// refused and never sent.
func TestProgressCustomEvents(t *testing.T) {
	address, namespace := devtest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	// A turn nobody runs: its history keeps the signals it was sent.
	id := contract.TurnWorkflowID("demo", "job-"+randomID())
	_, err = c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-" + randomID()}, "ProgressSink")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), id, "", "test over") })

	held := &heldClient{Client: c, release: make(chan struct{})}
	call := agent.ToolCall{ID: "call_1", Name: "report"}
	p := eventlog.StartProgress(t.Context(), eventlog.Sinks{Temporal: held, Logger: quiet()}, id, call)
	custom := func(name, id, value string) agent.CustomEvent {
		return agent.CustomEvent{Name: name, ID: id, Value: json.RawMessage(value)}
	}

	p.Report("starting")
	// The first send leaves at once, with what it found, and is held:
	// what follows waits for the next.
	require.Eventually(t, func() bool { return held.count() == 1 }, waitFor, time.Millisecond)

	p.Report("reading")
	p.Report("drawing")
	require.NoError(t, p.Emit(custom("chart", "c1", `{"points":[1]}`)))
	require.NoError(t, p.Emit(custom("citation", "", `"doc-7"`)))
	require.NoError(t, p.Emit(custom("chart", "c1", `{"points":[1,2]}`)), "replaces the c1 not yet sent, in its place")
	require.NoError(t, p.Emit(custom("chart", "c2", `{"points":[3]}`)), "another id: another chart")
	for _, bad := range []struct {
		e    agent.CustomEvent
		want string
	}{
		{custom("", "", `1`), "custom.name is required"},
		{custom("9lives", "", `1`), "want a letter"},
		{custom("x", "", `{`), "not valid JSON"},
		{custom("x", "", ``), "value is required"},
		{custom("x", "", `"`+strings.Repeat("a", agent.MaxCustomValueBytes)+`"`), "the limit is 16384"},
	} {
		err := p.Emit(bad.e)
		require.ErrorContains(t, err, bad.want)
		require.True(t, agent.IsCode(err, agent.CodeInvalid))
	}
	close(held.release)
	p.Close()

	got := progressSignals(t, c, id)
	require.Equal(t, []agent.ToolProgress{
		{CallID: "call_1", Tool: "report", Message: "starting"},
		{CallID: "call_1", Tool: "report", Message: "drawing", Custom: []agent.CustomEvent{
			custom("chart", "c1", `{"points":[1,2]}`), custom("citation", "", `"doc-7"`), custom("chart", "c2", `{"points":[3]}`)}},
	}, got)
}

// TestProgressCustomBudget: a call emits at most MaxCustomBytes of custom
// values in all (a value replaced before it was sent does not count), in
// signals of a bounded size; past the budget, Emit refuses and says why.
func TestProgressCustomBudget(t *testing.T) {
	address, namespace := devtest.Temporal(t)
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: quiet()})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	id := contract.TurnWorkflowID("demo", "job-"+randomID())
	_, err = c.ExecuteWorkflow(t.Context(), client.StartWorkflowOptions{ID: id, TaskQueue: "nobody-polls-" + randomID()}, "ProgressSink")
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), id, "", "test over") })

	held := &heldClient{Client: c, release: make(chan struct{})}
	p := eventlog.StartProgress(t.Context(), eventlog.Sinks{Temporal: held, Logger: quiet()}, id, agent.ToolCall{ID: "call_1", Name: "report"})
	value := func(i int) json.RawMessage {
		s := fmt.Sprintf("%05d", i)
		return json.RawMessage(`"` + s + strings.Repeat("a", agent.MaxCustomValueBytes-2-len(s)) + `"`)
	}
	p.Report("held")
	require.Eventually(t, func() bool { return held.count() == 1 }, waitFor, time.Millisecond)
	// Replacing a queued value many times costs one value.
	for i := range 10 {
		require.NoError(t, p.Emit(agent.CustomEvent{Name: "bar", ID: "b", Value: value(i)}))
	}
	n := 1
	for ; n < eventlog.MaxCustomBytes/agent.MaxCustomValueBytes; n++ {
		require.NoError(t, p.Emit(agent.CustomEvent{Name: "row", Value: value(n)}), "event %d", n)
	}
	err = p.Emit(agent.CustomEvent{Name: "row", Value: value(n)})
	require.ErrorContains(t, err, "may emit 1048576 in all")
	require.True(t, agent.IsCode(err, agent.CodeInvalid))
	close(held.release)
	p.Close()

	got := progressSignals(t, c, id)
	require.Greater(t, len(got), 3, "a megabyte goes in several signals")
	var values []json.RawMessage
	for _, s := range got[1:] {
		size := 0
		for _, e := range s.Custom {
			size += len(e.Value)
			values = append(values, e.Value)
		}
		require.LessOrEqual(t, size, 256<<10)
	}
	require.Len(t, values, eventlog.MaxCustomBytes/agent.MaxCustomValueBytes)
	require.Equal(t, value(9), values[0], "the bar's latest value")
	require.Equal(t, value(n-1), values[len(values)-1])
}
