package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/hooks"
)

// admission is the provider governor as a hook of every model call,
// the last model hook to start (concerns): the call is admitted (admit) after its
// budget is reserved, inside tracing's span, which so shows the wait;
// the admission ends as soon as the model has returned its reply or
// failed (endAdmission, with what the provider counted), and a failure's
// request to wait is passed on (refused). The clean-up ends an
// admission still held.
func (a *Activities) admission() hooks.Handler {
	return hooks.Handler{
		Name: "provider governor",
		ModelStart: modelStart(func(ctx context.Context, m *modelCall, c *hooks.ModelCall) error {
			err := m.admit(ctx, c.Messages)
			if m.permit != nil {
				m.giveBack = append(m.giveBack, m.endAdmission)
			}
			return err
		}),
		ModelReturn: func(ctx context.Context, _ *hooks.ModelCall, _ *hooks.ModelReply) error {
			if m := modelCallOf(ctx); m != nil {
				m.endAdmission(ctx)
			}
			return nil
		},
		ModelError: func(ctx context.Context, c *hooks.ModelCall, err error) {
			if m := modelCallOf(ctx); m != nil {
				m.endAdmission(ctx)
			}
			a.refused(ctx, c.Model, err)
		},
	}
}

// endAdmission ends the governor's admission of the call, once: with the
// provider's count when the model answered, else with the call's worst
// case (governor.Permit.Done).
func (m *modelCall) endAdmission(ctx context.Context) {
	if m.permit == nil {
		return
	}
	var usage *agent.Usage
	if m.resp != nil {
		usage = &m.resp.Usage
	}
	m.permit.Done(ctx, usage)
	m.permit = nil
}

// admit waits until the provider governor lets the call be sent
// (governor.Governor.Acquire), heartbeating with what it waits for, which
// the pending activity shows (temporal workflow describe, the Web UI). A
// local call does not wait: one its keys do not admit at once fails with
// contract.MustWait, and the turn sends it again as an activity.
// Its worst case is the prompt counted from the messages and the agent's
// max_output_tokens. The wait ends with the attempt's context: its
// start-to-close timeout, the turn's timeout, still applies. An
// ungoverned call gets no permit. msgs are what the model reads.
func (m *modelCall) admit(ctx context.Context, msgs []agent.Message) error {
	a, in, ag := m.a, m.in, m.ag
	if a.governor == nil {
		return nil
	}
	info := activity.GetInfo(ctx)
	call := governor.Call{
		Model:    ag.Model,
		ID:       fmt.Sprintf("%s/%s/%d/%d", in.TenantID, in.JobID, in.Seq, stepAttempt(ctx, in)),
		TenantID: in.TenantID,
		Priority: ag.Limits.ModelPriority,
		Input:    int64(agent.PromptTokens(msgs, ag.Tools)),
		Output:   int64(max(ag.Limits.MaxOutputTokens, 0)),
		Hold:     reservationTTL(info.Deadline, time.Now()),
		Waiting: func(w governor.Wait) {
			s := w.String()
			m.waiting.Store(&s)
			activity.RecordHeartbeat(ctx, s)
		},
		NoWait: info.IsLocalActivity,
	}
	defer m.waiting.Store(nil)
	err := a.db(ctx, "wait for the provider's limits", func() (err error) {
		m.permit, err = a.governor.Acquire(ctx, call)
		return err
	})
	if ww := (*governor.WouldWait)(nil); errors.As(err, &ww) {
		return contract.MustWait(ww.Error(), stepAttempt(ctx, in))
	}
	return err
}

// refused passes a provider's request to wait (the Retry-After or
// rate-limit reset headers of a failed call) to the governor, which holds
// the fleet's calls of the model's key until then.
func (a *Activities) refused(ctx context.Context, model string, err error) {
	var ae *agent.Error
	if a.governor != nil && errors.As(err, &ae) && ae.RetryAfter > 0 {
		a.governor.Refused(ctx, model, ae.RetryAfter)
	}
}

// toolRateLimit is the tool entries' rate limits as a hook of every call
// through the tool runtime, after the PII reveal and before the worker's
// hooks (concerns): a call's span starts once it is admitted (admitTool).
// The admission ends with the call, once every hook after it has ended.
func (a *Activities) toolRateLimit() hooks.Handler {
	done := func(ctx context.Context) {
		if t := toolRunOf(ctx); t != nil && t.permit != nil {
			t.permit.Done(ctx, nil)
			t.permit = nil
		}
	}
	return hooks.Handler{
		Name: "tool rate limit",
		ToolStart: toolStart(func(ctx context.Context, t *toolRun) error {
			if t.in.Foreign != nil {
				// Made already, by the team's worker, once AdmitTool admitted
				// it: the call has ended, and so does its admission.
				if a.governor != nil && t.spec.RateLimit != nil {
					t.permit = a.governor.Granted(governor.ToolKey(t.in.TenantID, t.spec.Entry()), foreignCallID(t.in), t.in.TenantID)
				}
				return nil
			}
			var err error
			t.permit, err = a.admitTool(ctx, t.spec, t.in, t.report)
			return err
		}),
		ToolEnd:   func(ctx context.Context, _ *hooks.ToolCall, _ *hooks.ToolResult) { done(ctx) },
		ToolError: func(ctx context.Context, _ *hooks.ToolCall, _ error) { done(ctx) },
	}
}

// admitTool waits until the tool entry's rate limit (agent.ToolRateLimit)
// admits the call, for the whole tenant across workers, saying what it
// waits for in the call's progress (tool_progress events, which the
// turn's details show) and its heartbeats. A tool without a limit, or a
// worker without a governor, is admitted at once (a nil permit).
func (a *Activities) admitTool(ctx context.Context, spec agent.Tool, in contract.ExecuteToolInput, report func(string)) (*governor.Permit, error) {
	info := activity.GetInfo(ctx)
	id := fmt.Sprintf("%s/%s/%d/%s/%d", in.TenantID, in.JobID, in.Seq, in.Call.ID, info.Attempt)
	return a.admitToolAs(ctx, spec, in, id, reservationTTL(info.Deadline, time.Now()), report)
}

// AdmitTool waits until a rate-limited tool entry admits a call the turn
// is about to make on a team's own worker (an activity tool), which no
// activity of agentflow's runs: the limit holds for every kind. Its
// admission is released by the ExecuteTool that stores what the call
// came to (toolRateLimit), or lapses after in.Hold. A retried attempt
// finds the admission its predecessor got: the call's id is the same.
func (a *Activities) AdmitTool(ctx context.Context, in contract.AdmitToolInput) error {
	ctx = withToolLog(ctx, in.Tool)
	defer callHeartbeats(ctx)()
	ag, err := a.agentVersion(ctx, in.Tool.TenantID, in.Tool.AgentID, in.Tool.AgentVersion)
	if err != nil {
		return err
	}
	spec, ok := ag.Tool(in.Tool.Call.Name)
	if !ok {
		return nil // ExecuteTool tells the model the tool is not granted
	}
	progress := eventlog.StartProgress(ctx, a.sinks(ctx, ""), activity.GetInfo(ctx).WorkflowExecution.ID, in.Tool.Call)
	defer progress.Close()
	_, err = a.admitToolAs(ctx, spec, in.Tool, foreignCallID(in.Tool), in.Hold, progress.Report)
	return err
}

// foreignCallID is the governed id of a call made on a team's worker:
// the same for AdmitTool's attempts and the ExecuteTool that releases
// it, and another for a second delivery a person approved.
func foreignCallID(in contract.ExecuteToolInput) string {
	id := fmt.Sprintf("%s/%s/%d/%s/foreign", in.TenantID, in.JobID, in.Seq, in.Call.ID)
	if in.Resend != nil {
		id += "/" + in.Resend.ApprovalID
	}
	return id
}

// admitToolAs is admitTool for a call of the id given, which holds a
// concurrent slot for hold at most if nothing releases it.
func (a *Activities) admitToolAs(ctx context.Context, spec agent.Tool, in contract.ExecuteToolInput, id string, hold time.Duration, report func(string)) (*governor.Permit, error) {
	if a.governor == nil || spec.RateLimit == nil {
		return nil, nil
	}
	key := governor.ToolKey(in.TenantID, spec.Entry())
	call := governor.Call{
		Model:    key,
		ID:       id,
		TenantID: in.TenantID,
		Hold:     hold,
		Waiting: func(w governor.Wait) {
			report(w.String())
			activity.RecordHeartbeat(ctx, w.String())
		},
	}
	var permit *governor.Permit
	err := a.db(ctx, "wait for the tool's rate limit", func() (err error) {
		permit, err = a.governor.AcquireKey(ctx, key, governor.ToolLimits(*spec.RateLimit), call)
		return err
	})
	return permit, err
}
