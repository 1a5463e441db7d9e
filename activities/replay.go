package activities

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
)

// replayOf is the recorded turn the call's turn replays, or nil when the
// turn is no replay. A turn replays what its request's agent.Replay
// names; a turn delegated to by a replay (agent.TurnRequest.Parent)
// replays the recorded child of the recorded delegate call its parent's
// call matched, and one whose parent's call matched none replays
// nothing (Replay.JobID empty: each of its calls diverges). The requests
// are the ones stored when the turns began, whoever started them.
func (a *Activities) replayOf(ctx context.Context, in contract.ExecuteToolInput) (*agent.Replay, error) {
	return a.replayOfJob(ctx, in.TenantID, in.JobID, 0)
}

// maxReplayDepth bounds the parents replayOf walks up (delegation chains
// are shorter: agent.DelegateConfig.MaxDepth).
const maxReplayDepth = 8

func (a *Activities) replayOfJob(ctx context.Context, tenantID, jobID string, depth int) (*agent.Replay, error) {
	var turn store.Turn
	err := a.db(ctx, "load turn", func() (err error) {
		turn, err = a.store.Turn(ctx, tenantID, jobID)
		return err
	})
	if agent.IsCode(err, agent.CodeNotFound) {
		// A call of no recorded turn (a test's, an operator's): not a
		// replay.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load turn %q: %w", jobID, err)
	}
	if rep := turn.Request.Replay; rep != nil {
		return rep, nil
	}
	p := turn.Request.Parent
	if p == nil || depth >= maxReplayDepth {
		return nil, nil
	}
	parentJob, ok := strings.CutPrefix(p.WorkflowID, contract.TurnWorkflowID(tenantID, ""))
	if !ok {
		return nil, nil
	}
	rep, err := a.replayOfJob(ctx, tenantID, parentJob, depth+1)
	if err != nil || rep == nil {
		return rep, err
	}
	if rep.JobID == "" {
		return rep, nil
	}
	rec, ok, err := a.recordedMatch(ctx, tenantID, rep.JobID, parentJob, agent.ToolCall{ID: p.CallID})
	if err != nil || !ok {
		return &agent.Replay{}, err
	}
	return &agent.Replay{JobID: agent.ChildJobID(rep.JobID, rec.Call.ID)}, nil
}

// recordedMatch is the recorded call of recordedJob that the call of
// ownJob matches (agent.MatchCalls), if one does. What a call matches
// depends only on the calls the turn's model asked for, stored before
// any of them runs, so parallel calls and retries match the same way.
// A call the model did not ask for (a guard's, a program's) is matched
// after the model's. Both turns are read under the tenant, so another
// tenant's recording is never found.
func (a *Activities) recordedMatch(ctx context.Context, tenantID, recordedJob, ownJob string, call agent.ToolCall) (agent.RecordedCall, bool, error) {
	var recorded, own []agent.Message
	err := a.db(ctx, "load recording", func() (err error) {
		recorded, err = a.store.Steps(ctx, tenantID, recordedJob)
		if err != nil {
			return err
		}
		own, err = a.store.Steps(ctx, tenantID, ownJob)
		return err
	})
	if err != nil {
		return agent.RecordedCall{}, false, fmt.Errorf("load recording %q: %w", recordedJob, err)
	}
	calls := agent.RecordedCalls(recorded)
	recordedCalls := make([]agent.ToolCall, len(calls))
	for i, c := range calls {
		recordedCalls[i] = c.Call
	}
	asked := agent.AskedCalls(own)
	at := slices.IndexFunc(asked, func(c agent.ToolCall) bool { return c.ID == call.ID })
	if at < 0 {
		asked, at = append(asked, call), len(asked)
	}
	match := agent.MatchCalls(recordedCalls, asked)[at]
	if match < 0 {
		return agent.RecordedCall{}, false, nil
	}
	return calls[match], true, nil
}

// replayed answers a replayed turn's call from its recording instead of
// running the tool: the recorded result of the matching recorded call
// (agent.MatchCalls: same tool, equal arguments, repeated calls in
// order) — or the result a person edited for it (agent.Replay.Results,
// by the recorded call's id) — or, for a call that matches none, a
// divergence the model reads as the tool's error (agent.NoRecordedResult).
func (a *Activities) replayed(ctx context.Context, in contract.ExecuteToolInput, rep agent.Replay) (tools.Output, error, error) {
	diverged := func() (tools.Output, error, error) {
		a.log(ctx).Info("replay diverged", zap.String("recording", rep.JobID))
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%s", agent.NoRecordedResult), nil
	}
	if rep.JobID == "" {
		return diverged()
	}
	rec, ok, err := a.recordedMatch(ctx, in.TenantID, rep.JobID, in.JobID, in.Call)
	if err != nil {
		return tools.Output{}, nil, err
	}
	if !ok {
		return diverged()
	}
	if edited, ok := rep.Edited(rec.Call.ID); ok {
		// A person's retry with this call's result edited: what they wrote
		// is the tool's text, whatever the recording held (an error too).
		return tools.Output{Text: edited}, nil, nil
	}
	content := rec.Result.Content
	if statusOf(content) == agent.ToolError {
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%s", strings.TrimPrefix(content, errorPrefix)), nil
	}
	return tools.Output{Text: content}, nil, nil
}

// PrepareReplay reads a recorded case's recording — as the store keeps
// it, so a value the tenant's PII settings redacted stays redacted — and
// stores its history as the case's session, once
// (store.AppendSession is idempotent per job). A recording of another
// tenant is not found.
func (a *Activities) PrepareReplay(ctx context.Context, in contract.PrepareReplayInput) (contract.PrepareReplayResult, error) {
	rec, err := a.store.RecordedTurn(ctx, in.TenantID, in.Recording)
	if err != nil {
		return contract.PrepareReplayResult{}, fmt.Errorf("read recording %q: %w", in.Recording.JobID, err)
	}
	if len(rec.History) > 0 {
		if err := a.store.AppendSession(ctx, in.TenantID, in.SessionID, in.JobID, rec.History); err != nil {
			return contract.PrepareReplayResult{}, err
		}
	}
	return contract.PrepareReplayResult{Prompt: rec.Prompt(), History: len(rec.History)}, nil
}
