package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

const toolGuardScript = `
pacing: {chunk_words: 1, delay_ms: 20}
rules:
  - name: recipe
    when: {user: '(?i)recipe'}
    reply: {text: 'The recipe is simple. The secret sauce is ketchup. Enjoy.'}
  - name: other
    reply: {text: 'Fine.'}
`

// toolGuardCatalog: agents whose guards are tools of an MCP server of the
// tenant's (@URL, at @HOST), none of them granted to the agents.
const toolGuardCatalog = `
tenant: demo
default_agent: cook
egress: ["@HOST"]
tools:
  - name: policy
    kind: mcp
    approval: never
    config: {url: "@URL", timeout_sec: 10}
agents:
  - id: cook
    model: openai:gpt-4o-mini
    guardrails:
      - tool: {name: policy_policy_check, timeout_ms: 5000}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
  - id: closed
    model: openai:gpt-4o-mini
    guardrails:
      - tool: {name: policy_broken_check, on: [input], timeout_ms: 5000}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
  - id: open
    model: openai:gpt-4o-mini
    guardrails:
      - tool: {name: policy_broken_check, on: [input], fail: open, timeout_ms: 5000}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
  - id: vague
    model: openai:gpt-4o-mini
    guardrails:
      - tool: {name: policy_vague_check, on: [output], timeout_ms: 5000}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// TestToolGuard: a tool guard asks an MCP server's tool of the tenant,
// through the tool runtime, about a model call's input before it is sent
// and about the answer a window at a time before clients see it. An input
// it refuses ends the turn GuardrailTripped before the model is called;
// an answer it refuses is cut mid-stream, and no client — a live gRPC
// stream, SSE, the Workflow Streams poll — receives the refused window. A
// tool that fails, or answers no verdict, fails closed, or open when the
// guard says so. Each decision is counted; nothing of the checked text is
// logged.
func TestToolGuard(t *testing.T) {
	policy := mcptest.StartPolicy(t, map[string]string{"forbidden topic": "that topic is not discussed here", "secret sauce": "trade secret"})
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script, o.HTTP = toolGuardScript, true
		o.Catalogs = []string{strings.NewReplacer("@HOST", policy.Addr, "@URL", policy.URL).Replace(toolGuardCatalog), httpCatalogs[1]}
	})
	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.user), 2*time.Minute)
	defer cancel()
	client := pb.NewAgentServiceClient(e.Conn)
	turn := func(agentID, job, prompt string) []agent.Event {
		s, err := client.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{AgentId: agentID, JobId: job, Prompt: prompt}})
		require.NoError(t, err)
		return fromPB(readAll(t, s))
	}

	// The guard's tool is pinned with the agent, and not given to the model.
	ag, err := e.Store().ActiveAgent(ctx, "demo", "cook")
	require.NoError(t, err)
	require.Empty(t, ag.Tools)
	require.Equal(t, "policy", ag.Guardrails[0].Tool.Spec.Source)

	// An input the tool refuses never reaches the model.
	before := len(e.Model.Requests())
	job := "toolguard-" + testserver.RandomID()
	evs := turn("cook", job, "Tell me about the forbidden topic.")
	last := evs[len(evs)-1]
	require.Equal(t, agent.ErrTypeGuardrailTripped, last.Error.Type)
	require.Contains(t, last.Error.Message, "tool guard policy_policy_check refused: that topic is not discussed here")
	require.Len(t, e.Model.Requests(), before, "the model was not called")
	checks := policy.Checks()
	require.Equal(t, mcptest.PolicyCheck{Stage: "input", Text: "Tell me about the forbidden topic.", AgentID: "cook", JobID: job}, checks[len(checks)-1])

	// An answer the tool refuses is cut at the window it refused.
	started, err := client.Start(ctx, &pb.StartRequest{Turn: &pb.TurnRequest{Prompt: "What is the recipe?", StreamWindowSec: subscriberWindow}})
	require.NoError(t, err)
	streamID := started.GetStreamId()
	channels := readEveryChannel(ctx, t, e, client, streamID)
	live := channels["gRPC"]
	const want = "The recipe is simple. I can't help with that."
	require.Equal(t, want, agent.ReplayText(live), "the live gRPC stream")
	last = live[len(live)-1]
	require.Equal(t, agent.StreamFailed, last.Status)
	require.Equal(t, agent.ErrTypeGuardrailTripped, last.Error.Type)
	require.Contains(t, last.Error.Message, "tool guard policy_policy_check refused: trade secret")
	for name, evs := range channels {
		require.Equal(t, want, agent.ReplayText(evs), name)
		for _, ev := range evs {
			require.NotContains(t, ev.Text, "sauce", name)
			require.NotContains(t, ev.Text, "ketchup", name)
		}
	}
	var stages []string
	for _, c := range policy.Checks() {
		stages = append(stages, c.Stage)
	}
	require.Contains(t, stages, "output")

	// A tool that fails fails closed, without quoting what it said...
	before = len(e.Model.Requests())
	evs = turn("closed", "", "Hello there")
	last = evs[len(evs)-1]
	require.Equal(t, agent.ErrTypeGuardrailTripped, last.Error.Type)
	require.Contains(t, last.Error.Message, "tool guard policy_broken_check failed closed: the call failed")
	require.NotContains(t, last.Error.Message, "cannot check")
	require.Len(t, e.Model.Requests(), before, "the model was not called")
	// ... or open when the guard says so.
	evs = turn("open", "", "Hello there")
	require.Equal(t, agent.StreamCompleted, evs[len(evs)-1].Status)
	require.Equal(t, "Fine.", agent.ReplayText(evs))
	// A tool that answers no verdict fails closed at the output stage too.
	evs = turn("vague", "", "Hello there")
	require.Equal(t, "I can't help with that.", agent.ReplayText(evs))
	require.Contains(t, evs[len(evs)-1].Error.Message, `tool guard policy_vague_check failed closed: the answer is not {"allow": true|false, "reason"}`)

	m := scrape(t, e.HTTPAddr())
	count := func(outcome string) float64 {
		return m.sum("guardrail_findings_total", map[string]string{"tenant": "demo", "guard": "tool", "outcome": outcome})
	}
	require.Equal(t, 2.0, count("refused"))
	require.Equal(t, 2.0, count("failed_closed"))
	require.Equal(t, 1.0, count("failed_open"))
	require.Equal(t, 2.0, count("allowed"), "the recipe's input and first sentence")

	log := string(e.log.Bytes())
	require.Contains(t, log, "tool guard failed")
	for _, text := range []string{"forbidden topic", "secret sauce", "cannot check", "Looks fine to me"} {
		require.NotContains(t, log, text)
	}
}
