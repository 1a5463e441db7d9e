package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/deliver"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
)

// hookReceiver is a webhook receiver as docs/guides/pushing-answers.md's
// recipe writes one:
// it checks the signature and the timestamp, answers 500 to the first
// fails deliveries, and accepts each delivery id once.
type hookReceiver struct {
	mu       sync.Mutex
	fails    int
	calls    int
	accepted map[string]deliver.Payload
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if err := deliver.Verify("hook-key-1", r.Header, body, time.Now(), 5*time.Minute); err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls <= h.fails {
		http.Error(w, "not now", http.StatusInternalServerError)
		return
	}
	var p deliver.Payload
	if err := json.Unmarshal(body, &p); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, dup := h.accepted[r.Header.Get(deliver.HeaderID)]; !dup {
		h.accepted[r.Header.Get(deliver.HeaderID)] = p
	}
}

// TestNotifyWebhook: a turn of an agent with a webhook target is pushed
// to it when it ends, signed; the receiver fails twice and then takes
// it: one accepted delivery, three attempts recorded. A target whose host
// the tenant's egress allowlist does not name is refused at its first
// attempt, and nothing reaches it.
func TestNotifyWebhook(t *testing.T) {
	t.Setenv("NOTIFY_HOOK_KEY", "hook-key-1")
	recv := &hookReceiver{fails: 2, accepted: map[string]deliver.Payload{}}
	srv := httptest.NewServer(recv)
	defer srv.Close()
	var outsideHits int
	outside := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { outsideHits++ }))
	defer outside.Close()
	outsideURL := strings.Replace(outside.URL, "127.0.0.1", "localhost", 1)

	catalog := `tenant: demo
default_agent: assistant
egress: ["127.0.0.1"]
tools:
  - {name: calculator, kind: calculator}
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
    deliver:
      - {name: hook, kind: webhook, url: '` + srv.URL + `/in', secret: 'env:NOTIFY_HOOK_KEY', always: true}
      - {name: outside, kind: webhook, url: '` + outsideURL + `/in', secret: 'env:NOTIFY_HOOK_KEY'}
`
	ts := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{catalog}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	job := "hook-" + testserver.RandomID()
	wid := contract.TurnWorkflowID("demo", job)
	run, err := ts.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: wid, TaskQueue: ts.TaskQueue}, contract.AgentTurn,
		agent.TurnRequest{TenantID: "demo", JobID: job, Prompt: "What is 2 + 3?", Deliver: []agent.DeliverTo{{Target: "outside"}}})
	require.NoError(t, err)
	var res agent.TurnResult
	require.NoError(t, run.Get(ctx, &res))
	require.Equal(t, "The result is 5.", res.Output)

	// The Delivery ends failed: one of its targets was refused.
	err = ts.Client().GetWorkflow(ctx, contract.DeliveryWorkflowID(wid), "").Get(ctx, nil)
	require.Error(t, err)
	require.Contains(t, err.Error(), "not in tenant demo's egress allowlist")

	recv.mu.Lock()
	require.Len(t, recv.accepted, 1)
	got := recv.accepted[wid+"/hook"]
	require.Equal(t, 3, recv.calls)
	recv.mu.Unlock()
	require.Equal(t, deliver.Payload{DeliveryID: wid + "/hook", StreamID: wid, JobID: job, TenantID: "demo", AgentID: "assistant",
		Status: agent.StatusCompleted, Output: "The result is 5.", ResultPreview: got.ResultPreview, ResultRef: res.ResultRef,
		CompletedAt: got.CompletedAt}, got)
	require.NotEmpty(t, got.ResultRef)
	require.Zero(t, outsideHits)

	attempts, err := ts.Store().DeliveryAttempts(ctx, "demo", job)
	require.NoError(t, err)
	var outcomes []string
	for _, a := range attempts {
		outcomes = append(outcomes, a.Target+":"+a.Outcome)
		require.NotContains(t, a.Error, "hook-key-1")
	}
	require.Equal(t, []string{"hook:" + store.DeliveryRetrying, "hook:" + store.DeliveryRetrying, "hook:" + store.DeliveryDelivered,
		"outside:" + store.DeliveryFailed}, outcomes)
	require.Equal(t, 500, attempts[0].HTTPStatus)
	require.Contains(t, attempts[3].Error, "not in tenant demo's egress allowlist")
	(&env{Server: ts, t: t}).replay(contract.DeliveryWorkflowID(wid), "delivery_retried")
}
