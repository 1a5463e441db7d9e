package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// A tools/call without a task, of MCP 2026-07-28, asks its client to
// decide approvals and answer questions the way that version asks during
// a request (multi round-trip requests): when the turn waits for input the
// caller can give, the call answers input_required, with an elicitation
// per waiting approval or question — the same ones a task's
// input_required has, under the same keys — and a requestState that names
// the turn. The client sends the call again with its inputResponses and
// that requestState; the responses go to the turn as the caller's (settle,
// one rule with tasks/update and with elicitation in a session), and the
// call follows the same turn on, on whichever gateway it reaches.

// errMCPInput stops a call's follower when its turn waits for the client.
var errMCPInput = errors.New("the turn waits for the client's input")

// mrtr reports whether a call's client is asked through input_required
// results: it speaks 2026-07-28 or later and can be asked (elicitation).
func mrtr(session *mcp.ServerSession) bool {
	p := session.InitializeParams()
	return p != nil && p.ProtocolVersion >= mcpTasksVersion && p.Capabilities != nil && p.Capabilities.Elicitation != nil
}

// mcpCallState is a call's requestState: its turn, and the keys its
// client was asked already and answered (or declined: those are not asked
// again in this call; they wait for someone else).
type mcpCallState struct {
	StreamID string   `json:"stream_id"`
	Asked    []string `json:"asked,omitempty"`
}

// parseMCPCallState reads a requestState this gateway made.
func parseMCPCallState(s string) (mcpCallState, error) {
	var st mcpCallState
	if err := json.Unmarshal([]byte(s), &st); err != nil || st.StreamID == "" {
		return st, errors.New("requestState is not one this server gave: send the call again without it")
	}
	return st, nil
}

// mcpRound is a call of a turn that asks its client by input_required.
type mcpRound struct {
	task  *mcpTask
	asked map[string]bool
}

// pending are the requests to put to the client now: those the caller can
// answer and was not asked in this call.
func (r *mcpRound) pending(caller gateway.Token) map[string]projection.Item {
	out := r.task.inputs(caller)
	for key := range out {
		if r.asked[key] {
			delete(out, key)
		}
	}
	return out
}

// stop reports whether the call answers input_required after an event
// that projects to items: the turn logged that it waits, and waits for
// something the client is to answer.
func (r *mcpRound) stop(items []projection.Item, caller gateway.Token) bool {
	waits := slices.ContainsFunc(items, func(it projection.Item) bool {
		return it.Kind == projection.Status && (it.Status == agent.StreamWaitingApproval || it.Status == agent.StreamWaitingInput)
	})
	return waits && len(r.pending(caller)) > 0
}

// inputRequired is the call's input_required result.
func (r *mcpRound) inputRequired(caller gateway.Token) *mcp.CallToolResult {
	pending := r.pending(caller)
	res := &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{}, Meta: mcp.Meta{"agentflow/stream_id": r.task.id}}
	for key, it := range pending {
		res.InputRequests[key] = mcpElicitation(it)
	}
	asked := slices.Sorted(maps.Keys(r.asked))
	for key := range pending {
		asked = append(asked, key)
	}
	state, _ := json.Marshal(mcpCallState{StreamID: r.task.id, Asked: asked})
	res.RequestState = string(state)
	return res
}

// again is a call sent again with the responses to its input_required:
// they go to the turn, and the call follows the turn on from where its
// log is now.
func (m *mcpServer) again(ctx context.Context, req *mcp.CallToolRequest, p *mcpProgress) (*mcp.CallToolResult, error) {
	st, err := parseMCPCallState(req.Params.RequestState)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	events, err := m.turnEvents(ctx, st.StreamID)
	if err != nil {
		return nil, m.taskError(ctx, st.StreamID, err)
	}
	t := newMCPTask(st.StreamID, events)
	caller := gateway.CallerOf(ctx)
	r := &mcpRound{task: t, asked: map[string]bool{}}
	for _, key := range st.Asked {
		r.asked[key] = true
	}
	waiting := t.inputs(caller)
	for key, resp := range req.Params.InputResponses {
		it, ok := waiting[key]
		res, isElicit := resp.(*mcp.ElicitResult)
		if !ok || !isElicit {
			continue
		}
		if err := m.settle(ctx, st.StreamID, it, res); err != nil {
			telemetry.Logger(ctx, m.logger).Info("mcp input not taken", zap.String("stream_id", st.StreamID), zap.String("key", key), zap.Error(err))
		}
	}
	if len(r.pending(caller)) > 0 {
		return r.inputRequired(caller), nil
	}
	if t.end != nil {
		return t.result(), nil
	}
	ctx, release, err := m.s.HoldStream(ctx)
	if err != nil {
		return m.toolError(ctx, err), nil
	}
	defer release()
	for _, e := range events {
		p.seen(e) // the text the client has seen the preview of
	}
	err = m.s.Events().Follow(ctx, t.id, t.last, func(e agent.Event) error {
		items := t.apply(e)
		p.event(ctx, e)
		if r.stop(items, caller) {
			return errMCPInput
		}
		return nil
	})
	switch {
	case errors.Is(err, errMCPInput):
		return r.inputRequired(caller), nil
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return m.toolError(ctx, err), nil
	}
	return t.result(), nil
}
