package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/actions"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// actionsScript drives actionsCatalog's agents, told apart by their
// system prompts: the assistant calls the calculator once, the counter
// counts to twenty with it, the lead delegates to the helper, who calls
// the calculator once.
const actionsScript = `
rules:
  - name: count-next
    when: {system: 'the counter', tool: '^(?P<n>[0-9]+)$', below: {n: 20}}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "${n}+1"}'}]}
  - name: count-done
    when: {system: 'the counter', tool: '^[0-9]+$'}
    reply: {text: 'Counted to twenty.'}
  - name: count-start
    when: {system: 'the counter', user: '^count'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "0+1"}'}]}
  - name: lead-quotes
    when: {system: 'the lead', tool: '(?s)(.+)'}
    reply: {text: 'The helper says: done.'}
  - name: lead-asks
    when: {system: 'the lead', user: '^ask'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "helper", "prompt": "calc 6*7"}'}]}
  - name: answer
    when: {tool: '(.+)'}
    reply: {text: 'result $1'}
  - name: calc
    when: {user: '^calc'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "12.5 * 4"}'}]}
  - name: fallback
    reply: {text: 'Nothing to add.'}
`

const actionsCatalog = `
tenant: actions
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
  - name: delegate
    kind: delegate_to_agent
    config: {agents: [helper], max_depth: 1}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: You are the assistant.
    tools: [calculator]
    limits: {max_iterations: 3, turn_timeout_sec: 120}
  - id: counter
    model: openai:gpt-4o-mini
    system_prompt: You are the counter.
    tools: [calculator]
    limits: {max_iterations: 25, turn_timeout_sec: 300}
  - id: lead
    model: openai:gpt-4o-mini
    system_prompt: You are the lead.
    tools: [delegate]
    limits: {max_iterations: 3, turn_timeout_sec: 120}
  - id: helper
    model: openai:gpt-4o-mini
    system_prompt: You are the helper.
    tools: [calculator]
    limits: {max_iterations: 3, turn_timeout_sec: 120}
`

// sample is one sample turn's actions, over every run of its workflows.
type sample struct {
	name      string
	workflows int // workflow runs counted
	counts    actions.Counts
	// seen counts the signals received and activities scheduled by
	// name, to tell what the counts are made of.
	seen map[string]int
}

// BenchmarkActions counts the Temporal Cloud billable actions of sample
// turns, with internal/actions' rules, over all the runs of each turn's
// workflow and of the children it started: one tool call, twenty, a
// conversation's first and next message (its Conversation workflow's
// share included), and a delegation. It reports each turn's total and
// logs a table by kind, with the cost of a million such turns at the list
// price.
func BenchmarkActions(b *testing.B) {
	st := testserver.Start(b, testserver.Options{Script: actionsScript, Catalogs: []string{actionsCatalog}, Logger: zap.NewNop()})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for range b.N {
		samples := []sample{
			turnSample(ctx, b, st, "one-tool", "assistant", "calc one", 1),
			turnSample(ctx, b, st, "twenty-calls", "counter", "count to twenty", 20),
			turnSample(ctx, b, st, "delegated", "lead", "ask the helper", 1),
		}
		samples = append(samples, conversationSamples(ctx, b, st)...)
		for _, s := range samples {
			b.ReportMetric(float64(s.counts.Total), s.name+"-actions")
		}
		// One log, of ten lines at most: a benchmark's longer log is cut.
		b.Log("\n" + actionsTable(samples))
	}
}

// turnSample runs one turn of agentID, which makes calls tool calls, to
// its end and counts its actions.
func turnSample(ctx context.Context, b *testing.B, st *testserver.Server, name, agentID, prompt string, calls int) sample {
	b.Helper()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "actions", AgentID: agentID, JobID: "actions-" + testserver.RandomID(), Prompt: prompt}
	run, err := turnclient.Start(ctx, st.Client(), st.TaskQueue, req)
	must(b, err)
	res, err := turnclient.Result(ctx, run)
	must(b, err)
	if res.Status != agent.StatusCompleted {
		b.Fatalf("%s: turn %s: %+v", name, res.Status, res.Error)
	}
	if len(res.Metadata.ToolCalls) != calls {
		b.Fatalf("%s: %d tool calls, want %d: %q", name, len(res.Metadata.ToolCalls), calls, res.Output)
	}
	s := sample{name: name}
	countTree(ctx, b, st.Client(), run.GetID(), &s)
	return s
}

// conversationSamples sends two messages to a new session and counts the
// session's Conversation workflow with every turn it started: the first
// message's share is the count after it (the conversation's start
// included), the next message's the count's growth over the second.
func conversationSamples(ctx context.Context, b *testing.B, st *testserver.Server) []sample {
	b.Helper()
	in := agent.ConversationInput{TenantID: "actions", SessionID: "actions-" + testserver.RandomID(), AgentID: "assistant", History: agent.HistoryFresh}
	id := contract.ConversationWorkflowID(in.TenantID, in.SessionID)
	var after []sample
	for i := range 2 {
		sent, err := turnclient.SendMessage(ctx, st.Client(), st.TaskQueue, in, agent.SendMessage{Prompt: "calc " + testserver.RandomID()})
		must(b, err)
		must(b, awaitTurn(ctx, st.Client(), sent.TurnWorkflowID))
		settle(ctx, b, st.Client(), id)
		s := sample{name: fmt.Sprintf("conversation-%d", i+1)}
		countTree(ctx, b, st.Client(), id, &s)
		after = append(after, s)
	}
	first, next := after[0], after[1]
	next.name, first.name = "conversation-next", "conversation-first"
	next.workflows -= first.workflows
	next.counts = subtract(next.counts, first.counts)
	for k, n := range first.seen {
		next.seen[k] -= n
	}
	return []sample{first, next}
}

// subtract is a's counts less b's, kind by kind.
func subtract(a, b actions.Counts) actions.Counts {
	var d actions.Counts
	neg := actions.Counts{ByKind: map[actions.Kind]int{}, SignalsSent: -b.SignalsSent, ExemptUpserts: -b.ExemptUpserts}
	for k, n := range b.ByKind {
		neg.ByKind[k] = -n
		neg.Total -= n
	}
	d.Add(a)
	d.Add(neg)
	return d
}

// settle waits until the latest run of a workflow has written no event
// for a while: what a conversation records after its turn ends (the
// child's completion, the task it wakes) belongs to the message.
func settle(ctx context.Context, b *testing.B, c client.Client, workflowID string) {
	b.Helper()
	last := -1
	for {
		n := len(testserver.History(ctx, b, c, workflowID, ""))
		if n == last {
			return
		}
		last = n
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			b.Fatal(ctx.Err())
		}
	}
}

// countTree adds the actions of every run of a workflow, and of every
// child those runs started, to s.
func countTree(ctx context.Context, b *testing.B, c client.Client, workflowID string, s *sample) {
	b.Helper()
	for _, events := range testserver.Runs(ctx, b, c, workflowID) {
		s.workflows++
		s.counts.Add(actions.Count(events))
		for _, ev := range events {
			if s.seen == nil {
				s.seen = map[string]int{}
			}
			if a := ev.GetWorkflowExecutionSignaledEventAttributes(); a != nil {
				s.seen["signal "+a.GetSignalName()]++
			}
			if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
				s.seen["activity "+a.GetActivityType().GetName()]++
			}
			if a := ev.GetMarkerRecordedEventAttributes(); a != nil {
				s.seen["marker "+a.GetMarkerName()]++
			}
			if a := ev.GetChildWorkflowExecutionStartedEventAttributes(); a != nil {
				countTree(ctx, b, c, a.GetWorkflowExecution().GetWorkflowId(), s)
			}
		}
	}
}

// actionsTable is the samples as a Markdown table: the kinds any sample
// shows, the total, the signals sent (billed to their receivers, counted
// there when counted at all), and the list-price cost of a million turns.
func actionsTable(samples []sample) string {
	var kinds []actions.Kind
	for _, k := range actions.Kinds {
		for _, s := range samples {
			if s.counts.Get(k) != 0 {
				kinds = append(kinds, k)
				break
			}
		}
	}
	var t strings.Builder
	t.WriteString("| turn | runs |")
	for _, k := range kinds {
		fmt.Fprintf(&t, " %s |", k)
	}
	t.WriteString(" total | signals sent | $ per 1M turns | made of |\n|---|---:|")
	t.WriteString(strings.Repeat("---:|", len(kinds)+3) + "---|\n")
	for _, s := range samples {
		fmt.Fprintf(&t, "| %s | %d |", s.name, s.workflows)
		for _, k := range kinds {
			fmt.Fprintf(&t, " %d |", s.counts.Get(k))
		}
		fmt.Fprintf(&t, " %d | %d | %.0f | %s |\n", s.counts.Total, s.counts.SignalsSent, float64(s.counts.Total)*actions.ListPricePerMillion, madeOf(s.seen))
	}
	return t.String()
}

// madeOf lists what seen counted, by name: "activity CallModel ×2, …".
func madeOf(seen map[string]int) string {
	var parts []string
	for name, n := range seen {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s ×%d", name, n))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
