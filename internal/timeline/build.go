package timeline

import (
	"cmp"
	"context"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/store"
)

// Store is what a timeline reads of the database (*store.Store). Every
// method is keyed by (tenant, job): another tenant's turn is
// agent.CodeNotFound.
type Store interface {
	TimelineTurn(ctx context.Context, tenantID, jobID string) (store.TimelineTurn, error)
	TurnTotals(ctx context.Context, tenantID, jobID string) (store.TurnTotals, error)
	DatedSteps(ctx context.Context, tenantID, jobID string, from, to int) ([]store.DatedStep, error)
	AssistantBefore(ctx context.Context, tenantID, jobID string, before, within int) (store.DatedStep, error)
	ChatCalls(ctx context.Context, tenantID, jobID string, from, to int) ([]store.ModelCall, error)
	CallApprovals(ctx context.Context, tenantID, jobID string, callIDs []string) (map[string]agent.ApprovalRecord, error)
	StepEffects(ctx context.Context, tenantID, jobID string, seqs []int) (map[int]effects.Intent, error)
	AgentVersion(ctx context.Context, tenantID, agentID string, version int) (agent.Agent, error)
}

// RunLister lists a workflow's runs, the first first (TemporalRuns).
type RunLister interface {
	Runs(ctx context.Context, workflowID string) ([]Run, error)
}

var _ Store = (*store.Store)(nil)

// Source is where a timeline comes from, and how it links elsewhere.
type Source struct {
	Store Store
	// Runs lists the turn's workflow runs; nil: none are listed.
	Runs RunLister
	// TraceURL is a trace viewer's link with {workflow_id} and {run_id}
	// in it (Links.Trace); "": none.
	TraceURL string
	// Logger hears of a visibility that could not be read. Default: none.
	Logger *zap.Logger
	// Now is the clock of a running turn's duration. Default: time.Now.
	Now func() time.Time
}

// Query selects a page of a turn's timeline.
type Query struct {
	TenantID, JobID string
	// After is the seq the page starts after; -1 from the turn's start.
	After int
	// Limit is the most steps a page holds: 0 is DefaultLimit; at most
	// MaxLimit.
	Limit int
}

// Page sizes, in steps.
const (
	DefaultLimit = 200
	MaxLimit     = 1000
)

// maxRound is how far back a page that begins among a round's tool
// results looks for the reply that asked for them.
const maxRound = 1000

// Build returns a page of a turn's timeline: agent.CodeNotFound when the
// tenant has no such turn, agent.CodeInvalid for a bad query.
func Build(ctx context.Context, src Source, q Query) (Timeline, error) {
	if err := q.check(); err != nil {
		return Timeline{}, err
	}
	limit := cmp.Or(q.Limit, DefaultLimit)
	turn, err := src.Store.TimelineTurn(ctx, q.TenantID, q.JobID)
	if err != nil {
		return Timeline{}, err
	}
	totals, err := src.Store.TurnTotals(ctx, q.TenantID, q.JobID)
	if err != nil {
		return Timeline{}, err
	}
	tl := header(turn, totals, src.now())
	tl.Runs = src.runs(ctx, turn.WorkflowID)
	tl.Links = links(turn, tl.Runs, src.TraceURL)
	from, to := q.After+1, q.After+1+limit
	p := page{src: src.Store, turn: turn, from: from, to: to}
	if tl.Items, err = p.items(ctx); err != nil {
		return Timeline{}, err
	}
	for i := range tl.Items {
		tl.Items[i].Run = runAt(tl.Runs, tl.Items[i].EndedAt)
	}
	if to-1 < totals.MaxSeq {
		next := to - 1
		tl.NextAfter = &next
	}
	return tl, nil
}

func (q Query) check() error {
	switch {
	case q.After < -1:
		return agent.Errorf(agent.CodeInvalid, "after %d: want -1 (from the start) or a step's seq", q.After)
	case q.Limit < 0 || q.Limit > MaxLimit:
		return agent.Errorf(agent.CodeInvalid, "limit %d: want 1 to %d", q.Limit, MaxLimit)
	}
	return nil
}

func (src Source) now() time.Time {
	if src.Now != nil {
		return src.Now()
	}
	return time.Now()
}

// runs lists the turn's runs; a visibility that cannot be read leaves
// them empty, and the page is answered all the same.
func (src Source) runs(ctx context.Context, workflowID string) []Run {
	if src.Runs == nil {
		return []Run{}
	}
	runs, err := src.Runs.Runs(ctx, workflowID)
	if err != nil {
		if src.Logger != nil {
			src.Logger.Warn("timeline: listing the turn's runs failed", zap.String("workflow_id", workflowID), zap.Error(err))
		}
		return []Run{}
	}
	return runs
}

// header is the timeline's part that every page repeats.
func header(t store.TimelineTurn, totals store.TurnTotals, now time.Time) Timeline {
	req := t.Request
	tl := Timeline{StreamID: t.WorkflowID, TenantID: t.TenantID, JobID: t.JobID, AgentID: t.AgentID, AgentVersion: t.AgentVersion,
		SessionID: t.SessionID, Channel: req.Channel, Model: req.Model, Status: "running", Prompt: req.Prompt,
		StartedAt: t.CreatedAt, Runs: []Run{}, Items: []Item{}}
	tl.Totals = Totals{Steps: totals.Steps, ModelCalls: totals.ModelCalls, ToolCalls: totals.ToolMessages, Retries: totals.Retries,
		Approvals: totals.Approvals, InputTokens: int64(totals.Usage.PromptTokens), OutputTokens: int64(totals.Usage.CompletionTokens),
		CachedTokens: int64(totals.Usage.CachedTokens), ReasoningTokens: int64(totals.Usage.ReasoningTokens), CostUSD: totals.CostUSD}
	end := now
	if o := t.Outcome; o != nil {
		tl.Channel = cmp.Or(tl.Channel, o.Channel)
		tl.Status = o.Status
		if o.Error != nil {
			tl.Error = &Error{Code: o.Error.Type, Message: o.Error.Message}
		}
		if o.Status == agent.StatusCanceled {
			// A canceled turn is a failed one whose error says so.
			tl.Status = agent.StatusFailed
			tl.Error = &Error{Code: agent.StatusCanceled, Message: cmp.Or(messageOf(tl.Error), "the turn was canceled")}
		}
		ended := o.EndedAt
		tl.EndedAt, end = &ended, ended
	}
	tl.Totals.DurationMs = max(end.Sub(t.CreatedAt).Milliseconds(), 0)
	tl.ForkedFrom = forkOf(req)
	return tl
}

// messageOf is an error's message; "" for none.
func messageOf(e *Error) string {
	if e == nil {
		return ""
	}
	return e.Message
}

// forkOf names the turn a retried turn was forked from, and the step.
func forkOf(req agent.TurnRequest) *ForkOrigin {
	if req.Channel != agent.ChannelRetry || req.Replay == nil || req.Replay.JobID == "" {
		return nil
	}
	return &ForkOrigin{JobID: req.Replay.JobID, Seq: req.Replay.Seq}
}

// links lead to the turn in the Web UI (its latest run), a trace viewer
// and its conversation.
func links(t store.TimelineTurn, runs []Run, traceURL string) Links {
	var l Links
	runID := ""
	if n := len(runs); n > 0 {
		l.WebUI, runID = runs[n-1].WebUI, runs[n-1].RunID
	}
	if traceURL != "" {
		l.Trace = strings.NewReplacer("{workflow_id}", escape(t.WorkflowID), "{run_id}", escape(runID)).Replace(traceURL)
	}
	if t.SessionID != "" {
		l.Conversation = "/conversations/" + url.PathEscape(t.SessionID)
	}
	return l
}

// escape makes s safe in a URL's path and in its query alike.
func escape(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }

// runAt is the index of the last run started at or before t; -1 if none.
func runAt(runs []Run, t time.Time) int {
	at := -1
	for i, r := range runs {
		if !r.StartedAt.After(t) {
			at = i
		}
	}
	return at
}
