package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// routeScript answers with the system prompt's marker, so a reply shows
// which agent version answered; "slow" replies take about a second.
const routeScript = `
pacing: {chunk_words: 1, delay_ms: 40}
rules:
  - name: slow
    when: {system: 'PROMPT-(?P<v>\w+)', user: 'slow'}
    reply: {text: 'prompt ${v} speaking slowly one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty'}
  - name: marker
    when: {system: 'PROMPT-(?P<v>\w+)'}
    reply: {text: 'prompt ${v}'}
`

func routeCatalog(generalPrompt, billingWhen string) string {
	return `
tenant: demo
default_agent: general
agents:
  - id: general
    model: openai:gpt-4o-mini
    system_prompt: ` + generalPrompt + `
  - id: billing
    model: openai:gpt-4o-mini
    system_prompt: PROMPT-billing
rules:
  - name: billing-rule
    priority: 10
    when: '` + billingWhen + `'
    agent: billing
`
}

// TestCatalogHotReload changes an agent's prompt and a routing rule with
// starter catalog apply while the worker runs.
func TestCatalogHotReload(t *testing.T) {
	// The starter applies catalogs through the gateway, as an admin.
	e := &env{Server: testserver.Start(t, testserver.Options{Script: routeScript, Catalogs: []string{testCatalog},
		Tokens: map[string]string{"tok-admin": "demo:admin"}}), t: t}
	dir := t.TempDir()
	starter := filepath.Join(dir, "starter")
	out, err := exec.Command("go", "build", "-o", starter, "github.com/agentflow/agentflow/starter").CombinedOutput()
	require.NoError(t, err, string(out))
	// The turns' time, after the build, which on a busy machine is long.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	apply := func(doc string) string {
		f := filepath.Join(dir, "catalog.yaml")
		require.NoError(t, os.WriteFile(f, []byte(doc), 0o644))
		cmd := exec.Command(starter, "catalog", "apply", "-f", f)
		cmd.Env = append(os.Environ(), "AGENTFLOW_GRPC_ADDR="+e.GRPCAddr(), "AGENTFLOW_TOKEN=tok-admin")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}
	turn := func(prompt, page string) string {
		req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: prompt, Context: agent.TurnContext{UIPage: page}}
		req.Normalize()
		run, err := e.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(e.TaskQueue, req), contract.AgentTurn, req)
		require.NoError(t, err)
		return run.GetID()
	}
	result := func(id string) agent.TurnResult {
		res, err := e.result(id)
		require.NoError(t, err)
		return res
	}

	apply(routeCatalog("PROMPT-one", `ui_page == "billing"`))
	id := turn("hello", "billing")
	res := result(id)
	require.Equal(t, "prompt billing", res.Output)
	require.Equal(t, "billing-rule", res.Metadata.RouteRule)
	id = turn("hello", "home")
	res = result(id)
	require.Equal(t, "prompt one", res.Output)
	require.Equal(t, "default", res.Metadata.RouteRule)
	oldVersion := res.Metadata.AgentVersion

	// A slow turn is in flight when the catalog changes.
	inFlight := turn("slow please", "home")
	require.Eventually(t, func() bool {
		v, err := e.Client().QueryWorkflow(ctx, inFlight, "", contract.QueryEvents, agent.EventsQuery{})
		var p agent.EventsPage
		return err == nil && v.Get(&p) == nil && len(p.Events) > 1 // the model is streaming
	}, 30*time.Second, 20*time.Millisecond)

	report := apply(routeCatalog("PROMPT-two", `ui_page == "invoices"`))
	require.Contains(t, report, "general")
	applied := time.Now()

	// The next turns see the change at once.
	next := turn("hello", "home")
	routed := turn("hello", "invoices")
	stale := turn("hello", "billing")
	res = result(next)
	require.Equal(t, "prompt two", res.Output)
	require.Equal(t, oldVersion+1, res.Metadata.AgentVersion)
	require.Equal(t, "billing-rule", result(routed).Metadata.RouteRule)
	require.Equal(t, "default", result(stale).Metadata.RouteRule, "the old condition no longer matches")
	t.Logf("three turns started right after the apply ran on the new catalog and finished %s after it", time.Since(applied).Round(time.Millisecond))

	// The turn in flight kept the version it pinned, and its history replays.
	res = result(inFlight)
	require.True(t, strings.HasPrefix(res.Output, "prompt one speaking slowly"), res.Output)
	require.Equal(t, oldVersion, res.Metadata.AgentVersion)
	e.replay(inFlight, "turn_catalog_changed_in_flight")

	// The registry's metrics saw it all.
	// Counted per execution of Route: a retried local activity counts again.
	m := gathered(t, e.Metrics())
	require.GreaterOrEqual(t, m.sum("routing_decisions_total", map[string]string{"tenant": "demo", "rule": "billing-rule"}), 2.0)
	require.GreaterOrEqual(t, m.sum("routing_decisions_total", map[string]string{"tenant": "demo", "rule": "default"}), 3.0)
	require.Equal(t, 1.0, m.sum("registry_nodes_total", map[string]string{"tenant": "demo", "kind": "rule"}))
	require.Equal(t, 3.0, m.sum("registry_nodes_total", map[string]string{"tenant": "demo", "kind": "agent"}), "assistant (from newEnv), general, billing")
	require.GreaterOrEqual(t, m.sum("registry_reload_duration_seconds_count", nil), 2.0, "loaded once per catalog version at least")
}
