package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// governorScript answers every prompt at once.
const governorScript = `
rules:
  - name: answer
    when: {user: '.'}
    reply: {text: 'Noted.', usage: {prompt_tokens: 20, completion_tokens: 2}}
`

// governorCatalog gives two tenants the same agent.
const governorCatalog = `
tenant: %s
agents:
  - id: governed
    model: openai:gpt-4o-mini
    limits: {max_iterations: 2, turn_timeout_sec: 120}
`

// governorLimits: 10 requests per 6 seconds to openai, for the whole
// fleet. The same logic as 10 per minute, in a tenth of the time.
const governorLimits = "openai=requests:10/6s"

// TestGovernorSharedByTwoWorkers: two worker processes (each its own
// server, worker, governor and connection pool, sharing only the
// database, the task queue and the provider) run 30 turns of two tenants
// started at once under a limit of 10 requests per 6 seconds. The
// provider never sees more than 10 requests in any 6 seconds, the calls
// over the limit wait (their activities say what for) instead of being
// refused, both workers send calls, and every turn completes.
func TestGovernorSharedByTwoWorkers(t *testing.T) {
	limits, err := governor.ParseLimits(governorLimits)
	require.NoError(t, err)
	dbURL := devtest.Database(t)
	first := testserver.Start(t, testserver.Options{Script: governorScript, DatabaseURL: dbURL, ModelLimits: limits,
		Catalogs: []string{fmt.Sprintf(governorCatalog, "demo"), fmt.Sprintf(governorCatalog, "acme")}})
	second := testserver.Start(t, testserver.Options{SharedModel: first.Model, DatabaseURL: dbURL, ModelLimits: limits,
		TaskQueue: first.TaskQueue})

	// Both workers poll before the turns start, so that either may take
	// them.
	require.Eventually(t, func() bool { return polling(t, first.Metrics()) && polling(t, second.Metrics()) },
		time.Minute, 20*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// A client of neither worker, as a gateway's: a worker's own client
	// would start turns eagerly on that worker, and their activities
	// would follow.
	c, err := client.DialContext(ctx, client.Options{HostPort: first.Address, Namespace: first.Namespace})
	require.NoError(t, err)
	defer c.Close()
	const turns = 30
	runs := make([]string, turns)
	for i := range turns {
		tenant := []string{"demo", "acme"}[i%2]
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: tenant, AgentID: "governed",
			JobID: "gov-" + testserver.RandomID(), Prompt: fmt.Sprintf("note %d", i)}
		run, err := turnclient.Start(ctx, c, first.TaskQueue, req)
		require.NoError(t, err)
		runs[i] = run.GetID()
	}

	// While the window is full, waiting calls say so on their pending
	// activity.
	require.Eventually(t, func() bool {
		for _, id := range runs {
			if strings.Contains(pendingDetails(t, first, id), "waiting for openai: its requests are at the limit") {
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond)

	var wg sync.WaitGroup
	results := make([]agent.TurnResult, turns)
	errs := make([]error, turns)
	for i, id := range runs {
		wg.Go(func() { errs[i] = first.Client().GetWorkflow(ctx, id, "").Get(ctx, &results[i]) })
	}
	wg.Wait()
	for i := range turns {
		require.NoError(t, errs[i], runs[i])
		require.Equal(t, agent.StatusCompleted, results[i].Status, runs[i])
		require.Equal(t, "Noted.", results[i].Output)
	}

	var at []time.Time
	for _, r := range first.Model.Requests() {
		require.Equal(t, 200, r.Status)
		at = append(at, r.At)
	}
	require.Len(t, at, turns, "one model request per turn, none refused and sent again")
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := 0; i+10 < len(at); i++ {
		require.GreaterOrEqual(t, at[i+10].Sub(at[i]), 6*time.Second,
			"requests %d and %d reached the provider %s apart: 11 requests in 6 seconds", i, i+10, at[i+10].Sub(at[i]))
	}

	// Both workers sent calls, each counted by its own process's metrics.
	one, two := counterSum(t, first.Metrics(), governor.MetricRequests), counterSum(t, second.Metrics(), governor.MetricRequests)
	require.Equal(t, float64(turns), one+two)
	require.Positive(t, one, "the first worker sent none")
	require.Positive(t, two, "the second worker sent none")
	require.Equal(t, float64(turns*22), counterSum(t, first.Metrics(), governor.MetricTokens)+counterSum(t, second.Metrics(), governor.MetricTokens))
}

// pendingDetails is the heartbeat details of a turn's pending
// activities, as `temporal workflow describe` shows them.
func pendingDetails(t *testing.T, srv *testserver.Server, workflowID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := srv.Client().DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	var out []string
	for _, pa := range desc.GetPendingActivities() {
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_UNSPECIFIED {
			continue
		}
		for _, p := range pa.GetHeartbeatDetails().GetPayloads() {
			var s string
			if converter.GetDefaultDataConverter().FromPayload(p, &s) == nil {
				out = append(out, s)
			}
		}
	}
	return strings.Join(out, "\n")
}

// polling reports whether a server's worker has asked for a workflow
// task (the SDK counts a long poll when it starts).
func polling(t *testing.T, reg *prometheus.Registry) bool {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "temporal_long_request_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" && l.GetValue() == "PollWorkflowTaskQueue" && m.GetCounter().GetValue() > 0 {
					return true
				}
			}
		}
	}
	return false
}

// counterSum is the sum of a counter's series in reg.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// pauseScript refuses the first call of "first" with a 429 that says,
// in OpenAI's rate-limit headers only, that requests are used up for 4
// seconds.
const pauseScript = `
rules:
  - name: refused
    when: {user: first}
    fault: {status: 429, times: 1, headers: {x-ratelimit-remaining-requests: "0", x-ratelimit-reset-requests: 4s}}
    reply: {text: 'First, at last.'}
  - name: answer
    when: {user: '.'}
    reply: {text: 'Noted.'}
`

// TestGovernorPausedByProviderRefusal: a provider's 429 with rate-limit
// reset headers pauses its key for every call, not only the refused
// one: a turn started after the refusal waits, saying the provider asked
// to wait, and reaches the provider only when the pause is over.
func TestGovernorPausedByProviderRefusal(t *testing.T) {
	limits, err := governor.ParseLimits("openai=concurrent:10")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: pauseScript, ModelLimits: limits,
		Catalogs: []string{fmt.Sprintf(governorCatalog, "demo")}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := func(prompt string) string {
		req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", AgentID: "governed",
			JobID: "gov-" + testserver.RandomID(), Prompt: prompt}
		run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
		require.NoError(t, err)
		return run.GetID()
	}
	first := start("first")
	require.Eventually(t, func() bool { return counterSum(t, srv.Metrics(), governor.MetricPauses) == 1 }, time.Minute, 20*time.Millisecond)
	refusedAt := srv.Model.Requests()[0].At
	second := start("second")
	require.Eventually(t, func() bool {
		return strings.Contains(pendingDetails(t, srv, second), "waiting for openai: the provider asked to wait")
	}, time.Minute, 50*time.Millisecond)

	for _, id := range []string{first, second} {
		var res agent.TurnResult
		require.NoError(t, srv.Client().GetWorkflow(ctx, id, "").Get(ctx, &res))
		require.Equal(t, agent.StatusCompleted, res.Status)
	}
	reqs := srv.Model.Requests()
	require.Len(t, reqs, 3, "the refused call, its retry and the second turn's")
	for _, r := range reqs[1:] {
		require.GreaterOrEqual(t, r.At.Sub(refusedAt), 4*time.Second, "rule %s reached the provider during the pause", r.Rule)
	}
}
