package workflows

import (
	"strconv"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// A turn's metrics go through workflow.GetMetricsHandler, which reports
// nothing while the workflow replays: a turn is counted once, however
// often a worker replays it. Label values come from the catalog (tenant,
// agent, tool and rule names) or from fixed sets (status, kind, outcome,
// channel),
// never from a request's free text: an agent id a request names but no
// catalog has is reported as "-".

// noAgent labels a turn that never loaded an agent, and a call of a tool
// its agent does not have.
const noAgent = "-"

// meter is what the turn's metrics are labelled by and measured from:
// its request, its agent, the rule that routed it, and when it started.
type meter struct {
	req   *agent.TurnRequest
	agent *agent.Agent
	rule  string
	start time.Time
}

// metering is the component that records the turn's metrics at its
// stages: its routing, each model call, each tool call, its end. It
// holds no state: what it labels by is the core's, read as it stands
// (meter), and a next run goes on counting.
type metering struct {
	t *turn // the core: its request, agent, rule, start and model
}

func (m *metering) start(_ workflow.Context, t *turn, _ *contract.TurnCarry) error {
	m.t = t
	return nil
}

func (m *metering) carry(*contract.TurnCarry) error { return nil }

// meter is the turn's meter as the turn stands.
func (m *metering) meter() meter {
	t := m.t
	return meter{req: &t.req, agent: &t.agent, rule: t.rule, start: t.start}
}

func (m *metering) routed(ctx workflow.Context, route contract.RouteResult, err error) {
	m.meter().recordRoute(ctx, route, err)
}

// afterModel counts the call by the model that answered it (the turn's
// model once the reply is taken in).
func (m *metering) afterModel(ctx workflow.Context, _ int, reply contract.CallModelResult) *agent.TurnError {
	m.meter().recordModel(ctx, m.t.model, reply.Usage)
	return nil
}

func (m *metering) afterTool(ctx workflow.Context, rec agent.ToolCallRecord) {
	m.meter().recordTool(ctx, rec)
}

func (m *metering) ended(ctx workflow.Context, res agent.TurnResult) {
	m.meter().recordEnd(ctx, res.Status, res.Error)
}

// metrics is the handler with the labels of every turn metric.
func (m meter) metrics(ctx workflow.Context) client.MetricsHandler {
	return workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"tenant": m.req.TenantID, "agent": m.agentLabel(), "channel": m.channel()})
}

// channel is the turn's channel, one of agent.Channels, or "-" for a
// request that named another (the turn rejects it).
func (m meter) channel() string {
	if !agent.KnownChannel(m.req.Channel) {
		return noAgent
	}
	return m.req.Channel
}

func (m meter) agentLabel() string {
	if m.agent.ID == "" {
		return noAgent
	}
	return m.agent.ID
}

// recordEnd counts the turn by status and its latency; a routed turn
// whose agent refused it or failed for want of a capability is a routing
// mismatch.
func (m meter) recordEnd(ctx workflow.Context, status string, e *agent.TurnError) {
	h := m.metrics(ctx).WithTags(map[string]string{"status": status})
	h.Counter(contract.MetricTurns).Inc(1)
	h.Timer(contract.MetricAgentLatency).Record(workflow.Now(ctx).Sub(m.start))
	if !m.routed() || e == nil {
		return
	}
	switch {
	case status == agent.StatusRejected && m.agent.ID == "":
		m.mismatch(ctx, "agent_refused")
	case status == agent.StatusFailed && mismatched(e.Type):
		m.mismatch(ctx, "agent_failed")
	}
}

// routed says a rule or the tenant's default chose the turn's agent.
func (m meter) routed() bool {
	return m.rule != "" && m.rule != contract.RuleExplicit
}

// mismatched says a failure of this type means the agent could not do
// what it was routed: its model refused the request, or never answered
// within the agent's iterations.
func mismatched(errType string) bool {
	switch errType {
	case agent.ErrTypeModelRejected, agent.ErrTypeContextLength, agent.ErrTypeMaxIterations:
		return true
	}
	return false
}

// mismatch counts a routing mismatch for the turn's rule.
func (m meter) mismatch(ctx workflow.Context, reason string) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{
		"tenant": m.req.TenantID, "rule": m.rule, "reason": reason,
	}).Counter(contract.MetricRoutingMismatch).Inc(1)
}

// recordRoute counts a request no rule could route and the rules whose
// condition failed while routing it.
func (m meter) recordRoute(ctx workflow.Context, route contract.RouteResult, err error) {
	h := workflow.GetMetricsHandler(ctx)
	if err != nil && m.req.AgentID == "" {
		h.WithTags(map[string]string{"tenant": m.req.TenantID, "rule": noAgent, "reason": "no_route"}).Counter(contract.MetricRoutingMismatch).Inc(1)
		return
	}
	for _, e := range route.RuleErrors {
		h.WithTags(map[string]string{"tenant": m.req.TenantID, "rule": e.Rule, "reason": "rule_error"}).Counter(contract.MetricRoutingMismatch).Inc(1)
	}
}

// recordModel counts a model call, by whether the provider read part of
// its prompt from its cache, and its tokens by kind: cached tokens are a
// part of the input, reasoning tokens of the output. The cache hit rate
// of an agent is its cached tokens over its input tokens.
func (m meter) recordModel(ctx workflow.Context, model string, u agent.Usage) {
	h := m.metrics(ctx)
	h.WithTags(map[string]string{"model": model, "cache_hit": strconv.FormatBool(u.CachedTokens > 0)}).Counter(contract.MetricModelCalls).Inc(1)
	for _, k := range []struct {
		kind string
		n    int
	}{{"input", u.PromptTokens}, {"output", u.CompletionTokens}, {"cached", u.CachedTokens}, {"reasoning", u.ReasoningTokens}} {
		if k.n > 0 {
			h.WithTags(map[string]string{"model": model, "kind": k.kind}).Counter(contract.MetricModelTokens).Inc(int64(k.n))
		}
	}
}

// recordTool counts a tool call by its outcome. A call of a tool the
// agent does not have (a name the model made up) is counted as "-".
func (m meter) recordTool(ctx workflow.Context, rec agent.ToolCallRecord) {
	tool := rec.Tool
	if _, ok := m.agent.Tool(tool); !ok {
		tool = noAgent
	}
	m.metrics(ctx).WithTags(map[string]string{"tool": tool, "status": rec.Status, "cache_hit": strconv.FormatBool(rec.CacheHit)}).
		Counter(contract.MetricToolInvocations).Inc(1)
}

// recordApproval counts a decision on a call and how long it waited.
func (m meter) recordApproval(ctx workflow.Context, tool, outcome string, waited time.Duration) {
	h := m.metrics(ctx).WithTags(map[string]string{"tool": tool, "outcome": outcome})
	h.Counter(contract.MetricApprovals).Inc(1)
	h.Timer(contract.MetricApprovalWait).Record(waited)
}
