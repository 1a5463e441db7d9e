package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// dataScript asks execute_pipeline to fetch n rows, sort them all and
// keep them (the dataset is the answer), then answers from the preview.
const dataScript = `
pacing: {chunk_words: 8, delay_ms: 1}
rules:
  - name: fetch
    when: {user: '^rows (?P<n>[0-9]+) (?P<id>[a-z0-9]+)$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "${id}", "pipeline": [{"step": "http_request", "url": "API/rows", "params": {"n": ${n}, "id": "${id}"}}, {"step": "table_sort", "field": "price", "order": "desc"}]}'
  - name: answer
    when: {tool: 'a table of (?P<rows>[0-9]+) rows'}
    reply: {text: 'kept ${rows} rows'}
`

const dataCatalog = `
tenant: demo
default_agent: data
egress: ["API"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    config: {cache_ttl_sec: 0}
agents:
  - id: data
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 3, turn_timeout_sec: 300}
`

// rowsAPI answers GET /rows?n=N with N rows of a sales-like table.
func rowsAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		_, _ = w.Write([]byte("["))
		for i := range n {
			if i > 0 {
				_, _ = w.Write([]byte(","))
			}
			_ = enc.Encode(map[string]any{"id": i, "city": []string{"NYC", "LAX", "SFO", "BOS"}[i%4],
				"category": fmt.Sprintf("cat-%02d", i%50), "price": (i * 7919) % 1000})
		}
		_, _ = w.Write([]byte("]"))
	}))
}

// BenchmarkDataTurn runs turns whose tool fetches, sorts and keeps n rows
// (cache off), and reports the turn's latency and how big its workflow
// history is next to the data it kept by reference: the rows never enter
// the history.
func BenchmarkDataTurn(b *testing.B) {
	api := rowsAPI()
	defer api.Close()
	ts := testserver.Start(b, testserver.Options{
		Script:   strings.ReplaceAll(dataScript, "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(dataCatalog, "API", strings.TrimPrefix(api.URL, "http://"))},
		Logger:   zap.NewNop(),
	})
	ctx := context.Background()
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			const turns = 5
			var lat []time.Duration
			var hist, data int
			for range b.N {
				for range turns {
					id := testserver.RandomID()
					req := agent.TurnRequest{TenantID: "demo", JobID: "data-" + id, Prompt: fmt.Sprintf("rows %d %s", n, id)}
					req.Normalize()
					start := time.Now()
					run, err := ts.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(ts.TaskQueue, req), contract.AgentTurn, req)
					must(b, err)
					var res agent.TurnResult
					must(b, run.Get(ctx, &res))
					lat = append(lat, time.Since(start))
					if res.Output != fmt.Sprintf("kept %d rows", n) {
						b.Fatalf("output %q", res.Output)
					}
					raw, err := ts.Store().Data(ctx, "demo", res.DataRef)
					must(b, err)
					data = len(raw)
					hist = 0
					for _, ev := range testserver.History(ctx, b, ts.Client(), run.GetID(), "") {
						hist += proto.Size(ev)
					}
				}
			}
			b.ReportMetric(ms(percentile(lat, 0.5)), "p50-ms")
			b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
			b.ReportMetric(float64(hist)/1e3, "history-kB")
			b.ReportMetric(float64(data)/1e6, "data-MB")
		})
	}
}
