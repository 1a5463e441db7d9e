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

// replayOf is the recorded turn the call's turn replays (its request's
// agent.Replay), or nil when the turn is no replay. The request is the
// one stored when the turn began, whoever started it.
func (a *Activities) replayOf(ctx context.Context, in contract.ExecuteToolInput) (*agent.Replay, error) {
	var turn store.Turn
	err := a.db(ctx, "load turn", func() (err error) {
		turn, err = a.store.Turn(ctx, in.TenantID, in.JobID)
		return err
	})
	if agent.IsCode(err, agent.CodeNotFound) {
		// A call of no recorded turn (a test's, an operator's): not a
		// replay.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load turn %q: %w", in.JobID, err)
	}
	return turn.Request.Replay, nil
}

// replayed answers a replayed turn's call from its recording instead of
// running the tool: the recorded result of the matching recorded call
// (agent.MatchCalls: same tool, equal arguments, repeated calls in
// order), or, for a call that matches none, a divergence the model reads
// as the tool's error (agent.NoRecordedResult). The recording is read
// under the turn's own tenant, so another tenant's turn is never found.
// What a call matches depends only on the calls the turn's model asked
// for, stored before any of them runs, so parallel calls and retries
// match the same way.
func (a *Activities) replayed(ctx context.Context, in contract.ExecuteToolInput, rep agent.Replay) (tools.Output, error, error) {
	var recorded, own []agent.Message
	err := a.db(ctx, "load recording", func() (err error) {
		recorded, err = a.store.Steps(ctx, in.TenantID, rep.JobID)
		if err != nil {
			return err
		}
		own, err = a.store.Steps(ctx, in.TenantID, in.JobID)
		return err
	})
	if err != nil {
		return tools.Output{}, nil, fmt.Errorf("load recording %q: %w", rep.JobID, err)
	}
	if len(recorded) == 0 {
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%s (the recorded turn %q is not found)", agent.NoRecordedResult, rep.JobID), nil
	}
	calls := agent.RecordedCalls(recorded)
	recordedCalls := make([]agent.ToolCall, len(calls))
	for i, c := range calls {
		recordedCalls[i] = c.Call
	}
	asked := agent.AskedCalls(own)
	at := slices.IndexFunc(asked, func(c agent.ToolCall) bool { return c.ID == in.Call.ID })
	if at < 0 {
		// A call the model did not ask for (a guard's, a program's):
		// matched after the model's.
		asked, at = append(asked, in.Call), len(asked)
	}
	match := agent.MatchCalls(recordedCalls, asked)[at]
	if match < 0 {
		a.log(ctx).Info("replay diverged", zap.String("recording", rep.JobID))
		return tools.Output{}, agent.Errorf(agent.CodeInvalid, "%s", agent.NoRecordedResult), nil
	}
	content := calls[match].Result.Content
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
