package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// toolKindsScript: "api <id>" calls the order API through openapi_action,
// "activity <id>" the same lookup as the team's activity; then the answer.
const toolKindsScript = `
rules:
  - name: api
    when: {user: '^api (?P<id>[a-z0-9]+)$', tool: '(?s).+'}
    reply: {text: 'done ${id}'}
  - name: api-call
    when: {user: '^api (?P<id>[a-z0-9]+)$'}
    reply: {tool_calls: [{name: orders, arguments: '{"operation_id": "getOrder", "params": {"id": "${id}"}}'}]}
  - name: activity
    when: {user: '^activity (?P<id>[a-z0-9]+)$', tool: '(?s).+'}
    reply: {text: 'done ${id}'}
  - name: activity-call
    when: {user: '^activity (?P<id>[a-z0-9]+)$'}
    reply: {tool_calls: [{name: lookup_order, arguments: '{"id": "${id}"}'}]}
`

const toolKindsCatalog = `
tenant: demo
default_agent: clerk
egress: ["API_HOST"]
tools:
  - name: orders
    kind: openapi_action
    approval: never
    config:
      server: API_URL
      spec:
        openapi: 3.0.3
        info: {title: Orders, version: "1"}
        paths:
          /orders/{id}:
            get:
              operationId: getOrder
              parameters: [{name: id, in: path, required: true, schema: {type: string}}]
              responses:
                "200":
                  description: the order
                  content: {application/json: {schema: {type: object}}}
  - name: lookup_order
    kind: activity
    description: Looks an order up by its id.
    approval: never
    delivery: idempotent
    parameters: {type: object, properties: {id: {type: string}}, required: [id]}
    config: {task_queue: QUEUE, activity_type: LookupOrder}
agents:
  - id: clerk
    model: openai:gpt-4o-mini
    tools: [orders, lookup_order]
    limits: {max_iterations: 3, turn_timeout_sec: 120}
`

// BenchmarkActivityToolCall compares a tool call made as the team's own
// activity (kind activity: the turn schedules it on the team's queue, a
// worker in this process answers) with the same lookup made as an HTTP
// call to a local API (openapi_action), each answering at once with the
// same JSON: 40 one-tool turns of each kind, alternated, one at a time.
// It reports each kind's turn p50 and p99 and the activity's p50 over
// the API's.
func BenchmarkActivityToolCall(b *testing.B) {
	order := func(id string) map[string]any { return map[string]any{"id": id, "status": "shipped", "items": 3} }
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(order(strings.TrimPrefix(r.URL.Path, "/orders/")))
	}))
	defer api.Close()
	queue := "bench-orders-" + testserver.RandomID()
	allow, err := reach.Parse("demo=task_queue:" + queue + "+activity:LookupOrder")
	must(b, err)
	catalog := strings.NewReplacer("API_URL", api.URL, "API_HOST", strings.TrimPrefix(api.URL, "http://"), "QUEUE", queue).Replace(toolKindsCatalog)
	srv := testserver.Start(b, testserver.Options{Script: toolKindsScript, Catalogs: []string{catalog}, TemporalAllow: allow, Logger: zap.NewNop()})
	w := worker.New(srv.Client(), queue, worker.Options{})
	w.RegisterActivityWithOptions(func(_ context.Context, in struct {
		ID string `json:"id"`
	}) (map[string]any, error) {
		return order(in.ID), nil
	}, activity.RegisterOptions{Name: "LookupOrder"})
	must(b, w.Start())
	defer w.Stop()

	ctx := context.Background()
	turn := func(kind string, i int) time.Duration {
		id := fmt.Sprintf("%s%d%s", kind[:3], i, strings.ToLower(testserver.RandomID()))
		start := time.Now()
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
			TenantID: "demo", JobID: "kinds-" + id, Prompt: kind + " " + id})
		must(b, err)
		res, err := turnclient.Result(ctx, run)
		must(b, err)
		if res.Output != "done "+id || len(res.Metadata.ToolCalls) != 1 || res.Metadata.ToolCalls[0].Status != agent.ToolOK {
			b.Fatalf("%s turn %s: %q %+v", kind, id, res.Output, res.Metadata.ToolCalls)
		}
		return time.Since(start)
	}
	const n = 40
	for b.Loop() {
		took := map[string][]time.Duration{}
		for i := range n + 4 {
			for _, kind := range []string{"api", "activity"} {
				d := turn(kind, i)
				if i >= 4 { // the first few warm both paths
					took[kind] = append(took[kind], d)
				}
			}
		}
		for _, kind := range []string{"api", "activity"} {
			b.ReportMetric(ms(percentile(took[kind], 0.5)), kind+"-p50-ms")
			b.ReportMetric(ms(percentile(took[kind], 0.99)), kind+"-p99-ms")
		}
		b.ReportMetric(float64(percentile(took["activity"], 0.5))/float64(percentile(took["api"], 0.5)), "activity/api-p50")
	}
}
