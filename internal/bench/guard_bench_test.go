package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// guardSentence is the reply's sentence length, in words, each a chunk
// paced by chunkDelay: the window an output guard holds.
const guardSentence = 12

// guardScript answers "say <id>" with four sentences of guardSentence
// words whose first word carries the id.
func guardScript() string {
	var s strings.Builder
	for i := range 4 {
		for w := range guardSentence {
			if i == 0 && w == 0 {
				s.WriteString("${id} ")
				continue
			}
			fmt.Fprintf(&s, "word%d%d ", i, w)
		}
		s.WriteString(". ")
	}
	return fmt.Sprintf(`
pacing: {chunk_words: 1, delay_ms: %d}
rules:
  - name: say
    when: {user: '^say (?P<id>[a-z0-9]+)$'}
    reply: {text: '%s'}
`, chunkDelay.Milliseconds(), strings.TrimSpace(strings.ReplaceAll(s.String(), " . ", ". ")))
}

const guardCatalog = `
tenant: demo
agents:
  - id: plain
    model: openai:gpt-4o-mini
    limits: {max_iterations: 2, turn_timeout_sec: 60}
  - id: guarded
    model: openai:gpt-4o-mini
    guardrails:
      - output: {deny: [launch code, internal use only], regex: ['\b\d{3}-\d{2}-\d{4}\b']}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// BenchmarkOutputGuardFirstToken: the first-token latency an output
// guard adds at a one-sentence window, with the model streaming a word
// every chunkDelay (a sentence is guardSentence words): the same reply by
// an agent without a guard and one with, one turn at a time, first token
// timed at a follower of the turn's stream.
func BenchmarkOutputGuardFirstToken(b *testing.B) {
	ts := testserver.Start(b, testserver.Options{Script: guardScript(), Catalogs: []string{guardCatalog}, Logger: zap.NewNop()})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	first := func(agentID string, i int) time.Duration {
		id := fmt.Sprintf("%s%d", agentID, i)
		req := agent.TurnRequest{TenantID: "demo", JobID: "guard-" + id + testserver.RandomID(), AgentID: agentID, Prompt: "say " + id}
		req.Normalize()
		start := time.Now()
		_, err := ts.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(ts.TaskQueue, req), contract.AgentTurn, req)
		must(b, err)
		var ttft time.Duration
		err = ts.Follower().Follow(ctx, contract.TurnWorkflowID("demo", req.JobID), 0, func(e agent.Event) error {
			if e.Kind == agent.EventToken && ttft == 0 {
				ttft = time.Since(start)
			}
			return nil
		})
		must(b, err)
		return ttft
	}
	for b.Loop() {
		var plain, guarded []time.Duration
		for i := range samples / 2 {
			plain = append(plain, first("plain", i))
			guarded = append(guarded, first("guarded", i))
		}
		p, g := percentile(plain, 0.5), percentile(guarded, 0.5)
		b.ReportMetric(ms(p), "ttft-plain-p50-ms")
		b.ReportMetric(ms(g), "ttft-guarded-p50-ms")
		b.ReportMetric(ms(g-p), "added-ms")
		b.ReportMetric(float64(guardSentence*chunkDelay.Milliseconds()), "sentence-ms")
	}
}
