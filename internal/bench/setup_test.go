package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// words is the length of the benchmark's streamed reply; each word is a
// chunk, paced by chunkDelay.
const (
	words      = 40
	chunkDelay = 20 * time.Millisecond
	// longWords is the reply to "long <id>": ten seconds of streaming, for
	// followers that must be open at the same time.
	longWords = 500
)

// benchScript answers "bench <id>" with words "<id>-00 <id>-01 …": every
// chunk of every stream is unique, so its emission can be timed.
func benchScript() string {
	var text strings.Builder
	for i := range words {
		fmt.Fprintf(&text, "${id}-%02d ", i)
	}
	return fmt.Sprintf(`
pacing: {chunk_words: 1, delay_ms: %d}
rules:
  - name: calc
    when: {user: '^calc (?P<id>[a-z0-9]+)$', tool: '(?P<result>.+)'}
    reply: {text: 'result ${result}'}
  - name: calc-call
    when: {user: '^calc (?P<id>[a-z0-9]+)$'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "12.5 * 4"}'}]}
  - name: bench
    when: {user: '^bench (?P<id>[a-z0-9]+)$'}
    reply: {text: '%s'}
  - name: long
    when: {user: '^long (?P<id>[a-z0-9]+)$'}
    reply: {text: '%s'}
`, chunkDelay.Milliseconds(), strings.TrimSpace(text.String()), strings.TrimSpace(strings.Repeat("${id} ", longWords)))
}

const benchCatalog = `
tenant: demo
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: You are benchmarked.
    tools: [calculator]
    limits: {max_iterations: 3, turn_timeout_sec: 120}
    expose: [mcp]
`

// emissions records when the scripted server flushed each chunk.
type emissions struct{ m sync.Map }

func (e *emissions) record(text string, at time.Time) { e.m.Store(strings.TrimSpace(text), at) }

func (e *emissions) at(word string) (time.Time, bool) {
	v, ok := e.m.Load(word)
	if !ok {
		return time.Time{}, false
	}
	return v.(time.Time), true
}

// stack is a worker and gateway with the scripted model, on the shared
// dev stack; emitted times the model's chunks.
type stack struct {
	*testserver.Server
	emitted *emissions
}

func newStack(b *testing.B) *stack {
	b.Helper()
	emitted := &emissions{}
	ts := testserver.Start(b, testserver.Options{
		Script:   benchScript(),
		Model:    scripted.Options{OnChunk: emitted.record, MaxRecorded: 1},
		Catalogs: []string{benchCatalog},
		Tokens:   map[string]string{"bench-token": "demo"},
		HTTPAPI:  true,
		Logger:   zap.NewNop(),
	})
	return &stack{Server: ts, emitted: emitted}
}

// startTurn starts a streamed turn whose reply's words carry id.
func (st *stack) startTurn(ctx context.Context, c client.Client, id string) (string, error) {
	req := agent.TurnRequest{TenantID: "demo", JobID: "bench-" + id, Prompt: "bench " + id}
	req.Normalize()
	if _, err := c.ExecuteWorkflow(ctx, turnclient.StartOptions(st.TaskQueue, req), contract.AgentTurn, req); err != nil {
		return "", err
	}
	return contract.TurnWorkflowID(req.TenantID, req.JobID), nil
}

func must(b *testing.B, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
}

// percentile of sorted durations, p in [0,1].
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(p*float64(len(s)-1) + 0.5)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
