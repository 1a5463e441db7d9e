package nexusdoor

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nexus-rpc/sdk-go/nexus"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/temporalnexus"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// RunTurnInput is run_turn's input: what a door's request says, less
// who asks. Fields it does not name are refused, a tenant or a caller
// first of all.
type RunTurnInput struct {
	Prompt string `json:"prompt"`
	// AgentID names the agent; empty: the tenant's routing decides.
	AgentID string `json:"agent_id,omitempty"`
	// AgentVersion pins a version of AgentID; 0: the active one.
	AgentVersion int `json:"agent_version,omitempty"`
	// JobID names the turn in the tenant (its idempotency key, and its
	// stream's: turn/<tenant>/<job_id>); empty: the operation's request
	// id, the same on every retry of the start.
	JobID     string `json:"job_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// History is "load" (the session's transcript) or "fresh".
	History string `json:"history,omitempty"`
	// NodeID and RunID name the caller's process step, as a door's
	// request does.
	NodeID string `json:"node_id,omitempty"`
	RunID  string `json:"run_id,omitempty"`
	// Context is what the caller's process hands the turn: earlier
	// steps' results by reference, its state, metadata.
	Context agent.TurnContext `json:"context,omitzero"`
	// OutputSchema asks for a structured answer (a JSON Schema).
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// TimeoutSec bounds the turn, as a door's request does.
	TimeoutSec int `json:"timeout_sec,omitempty"`
}

// runTurn is the async operation backed by the turn's workflow: its
// result is the turn's, and cancelling it cancels the turn. A job id
// whose turn exists backs the operation with that turn when it is the
// same request (answered at once if it has ended), and is refused when
// it is another.
func (d door) runTurn() (nexus.Operation[json.RawMessage, agent.TurnResult], error) {
	op, err := temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[json.RawMessage, agent.TurnResult]{
		Name: OpRunTurn,
		Handler: func(ctx context.Context, raw json.RawMessage, o nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[agent.TurnResult], error) {
			req, err := d.turnRequest(ctx, raw, o.RequestID)
			if err != nil {
				return nil, err
			}
			opts := turnclient.StartOptions(d.o.TurnQueue, req)
			h, err := temporalnexus.ExecuteUntypedWorkflow[agent.TurnResult](ctx, o, opts, contract.AgentTurn, req)
			started, ok := errors.AsType[*serviceerror.WorkflowExecutionAlreadyStarted](err)
			if !ok {
				return h, err
			}
			// The job has a run: the same request is backed by it, as a
			// door's repeated start attaches to it; another is refused.
			if err := turnclient.SameRequest(ctx, temporalnexus.GetClient(ctx), nil, opts.ID, started.RunId, req); err != nil {
				return nil, handlerError(OpRunTurn, err)
			}
			return d.attach(ctx, o, opts.ID)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nexus operation %s: %w", OpRunTurn, err)
	}
	return turnOperation{op, d.b.TenantID}, nil
}

// attach backs an operation with the turn workflow id: the operation
// attaches to the running turn and never starts one, nor another run of
// one that has ended (endedTurn).
func (d door) attach(ctx context.Context, o nexus.StartOperationOptions, id string) (temporalnexus.WorkflowHandle[agent.TurnResult], error) {
	h, err := temporalnexus.ExecuteUntypedWorkflow[agent.TurnResult](ctx, o, client.StartWorkflowOptions{
		ID: id, TaskQueue: d.o.TurnQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}, contract.AgentTurn)
	if _, ok := errors.AsType[*serviceerror.WorkflowExecutionAlreadyStarted](err); ok {
		return nil, endedTurn{id: id}
	}
	return h, err
}

// turnRequest is the turn b's caller asks for with raw: the tenant and
// the caller are the binding's, and what it says is checked and redacted
// as a door's request is.
func (d door) turnRequest(ctx context.Context, raw json.RawMessage, requestID string) (agent.TurnRequest, error) {
	b := d.b
	if !b.may(RoleUser) {
		return agent.TurnRequest{}, unauthorized(OpRunTurn, RoleUser)
	}
	in, err := decode[RunTurnInput](OpRunTurn, raw)
	if err != nil {
		return agent.TurnRequest{}, err
	}
	req := agent.TurnRequest{
		Version: agent.ProtocolVersion, TenantID: b.TenantID, AgentID: in.AgentID, AgentVersion: in.AgentVersion,
		SessionID: in.SessionID, JobID: cmp.Or(in.JobID, "nexus-"+requestID), Prompt: in.Prompt, History: in.History,
		NodeID: in.NodeID, RunID: in.RunID, Context: in.Context, OutputSchema: in.OutputSchema, TimeoutSec: in.TimeoutSec,
		Caller: b.Caller(), Channel: agent.ChannelNexus,
	}
	req.Normalize()
	check := func() error {
		if err := req.Validate(); err != nil {
			return err
		}
		return req.Context.Bounded()
	}
	if err := check(); err != nil {
		return agent.TurnRequest{}, badRequest(op(OpRunTurn), err.Error())
	}
	if _, err := structured.Compile(req.OutputSchema); err != nil {
		return agent.TurnRequest{}, badRequest(op(OpRunTurn), err.Error())
	}
	if err := req.Texts(d.redactor(ctx, redact.Scope(req.SessionID, req.JobID))); err != nil {
		return agent.TurnRequest{}, handlerError(OpRunTurn, err)
	}
	// A value redacted may be longer than the value: the bounds hold for
	// what the turn is given.
	if err := check(); err != nil {
		return agent.TurnRequest{}, badRequest(op(OpRunTurn), err.Error())
	}
	return req, nil
}

// SendMessageInput is send_message's: a message to the binding's
// tenant's conversation SessionID (started if needed).
type SendMessageInput struct {
	SessionID string `json:"session_id"`
	Prompt    string `json:"prompt"`
	// JobID names the turn that answers (idempotency key); empty: the
	// operation's request id.
	JobID string `json:"job_id,omitempty"`
	// AgentID is the conversation's agent, for one this message starts;
	// empty: each message is routed.
	AgentID string `json:"agent_id,omitempty"`
	// OnBusy is what the message does while a turn of the conversation
	// runs: enqueue (default), reject, interrupt, rollback or steer.
	OnBusy  string            `json:"on_busy,omitempty"`
	Context agent.TurnContext `json:"context,omitzero"`
}

// sendMessage is the async operation that sends a message and is backed
// by the turn that answers it: the operation attaches to that turn's
// workflow (started by the conversation), so its result is the turn's
// and cancelling it cancels the turn. A turn that ended before the
// operation could attach answers at once.
func (d door) sendMessage() (nexus.Operation[json.RawMessage, agent.TurnResult], error) {
	op, err := temporalnexus.NewWorkflowRunOperationWithOptions(temporalnexus.WorkflowRunOperationOptions[json.RawMessage, agent.TurnResult]{
		Name: OpSendMessage,
		Handler: func(ctx context.Context, raw json.RawMessage, o nexus.StartOperationOptions) (temporalnexus.WorkflowHandle[agent.TurnResult], error) {
			id, err := d.send(ctx, raw, o.RequestID)
			if err != nil {
				return nil, err
			}
			return d.attach(ctx, o, id)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("nexus operation %s: %w", OpSendMessage, err)
	}
	return turnOperation{op, d.b.TenantID}, nil
}

// send sends raw's message to its conversation and returns the workflow
// id of the turn that answers it, once that turn's workflow exists.
func (d door) send(ctx context.Context, raw json.RawMessage, requestID string) (string, error) {
	conv, msg, err := d.message(ctx, raw, requestID)
	if err != nil {
		return "", err
	}
	c := temporalnexus.GetClient(ctx)
	res, err := turnclient.SendMessage(ctx, c, d.o.TurnQueue, conv, msg)
	if err != nil {
		return "", handlerError(OpSendMessage, err)
	}
	// The conversation answers once the turn has started, or once it
	// rolls over to a run that starts it: wait for the workflow, so the
	// operation attaches to it and never starts it.
	for wait := 50 * time.Millisecond; ; wait = min(wait*2, time.Second) {
		_, err := c.DescribeWorkflowExecution(ctx, res.TurnWorkflowID, "")
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			return res.TurnWorkflowID, handlerError(OpSendMessage, err)
		}
		select {
		case <-ctx.Done():
			return "", nexus.HandlerErrorf(nexus.HandlerErrorTypeUpstreamTimeout, "%s: the message's turn has not started yet", OpSendMessage)
		case <-time.After(wait):
		}
	}
}

// message is the message b's caller sends with raw: the tenant and the
// caller are the binding's, and what it says is checked and redacted as
// a door's message is.
func (d door) message(ctx context.Context, raw json.RawMessage, requestID string) (agent.ConversationInput, agent.SendMessage, error) {
	if !d.b.may(RoleUser) {
		return agent.ConversationInput{}, agent.SendMessage{}, unauthorized(OpSendMessage, RoleUser)
	}
	in, err := decode[SendMessageInput](OpSendMessage, raw)
	if err != nil {
		return agent.ConversationInput{}, agent.SendMessage{}, err
	}
	conv := agent.ConversationInput{TenantID: d.b.TenantID, SessionID: in.SessionID, AgentID: in.AgentID}
	msg := agent.SendMessage{Prompt: in.Prompt, JobID: cmp.Or(in.JobID, "nexus-"+requestID), Context: in.Context,
		Caller: d.b.Caller(), Channel: agent.ChannelNexus, OnBusy: in.OnBusy}
	if err := errors.Join(conv.Validate(), msg.Validate()); err != nil {
		return conv, msg, badRequest(op(OpSendMessage), err.Error())
	}
	if err := msg.Texts(d.redactor(ctx, redact.Scope(conv.SessionID, ""))); err != nil {
		return conv, msg, handlerError(OpSendMessage, err)
	}
	return conv, msg, nil
}

// endedTurn: the message's turn ended before the operation could attach
// to it.
type endedTurn struct{ id string }

func (e endedTurn) Error() string { return "turn " + e.id + " has ended" }

// turnOperation answers with the turn's result at once when the turn
// had ended before the operation could attach to it, and cancels only
// turns of the binding's tenant.
type turnOperation struct {
	nexus.Operation[json.RawMessage, agent.TurnResult]
	tenantID string
}

// Cancel implements nexus.OperationHandler: the token names the turn to
// cancel, and a token is whatever the request says, so a turn of another
// tenant is not found, as at every operation.
func (o turnOperation) Cancel(ctx context.Context, token string, opts nexus.CancelOperationOptions) error {
	stream, err := StreamOf(token)
	if err != nil {
		return badRequest("cancel "+o.Name(), err.Error())
	}
	if tenant, _ := agent.StreamTenant(stream); tenant != o.tenantID {
		return nexus.HandlerErrorf(nexus.HandlerErrorTypeNotFound, "cancel %s: no such turn of the endpoint's tenant", o.Name())
	}
	return o.Operation.Cancel(ctx, token, opts)
}

// Start implements nexus.OperationHandler.
func (o turnOperation) Start(ctx context.Context, raw json.RawMessage, opts nexus.StartOperationOptions) (nexus.HandlerStartOperationResult[agent.TurnResult], error) {
	r, err := o.Operation.Start(ctx, raw, opts)
	var ended endedTurn
	if !errors.As(err, &ended) {
		return r, err
	}
	// As run_turn's result: the turn's, or its failure (which carries
	// the failed result) as the operation's.
	var res agent.TurnResult
	err = temporalnexus.GetClient(ctx).GetWorkflow(ctx, ended.id, "").Get(ctx, &res)
	if err == nil {
		return &nexus.HandlerStartOperationResultSync[agent.TurnResult]{Value: res}, nil
	}
	var done *temporal.WorkflowExecutionError
	if !errors.As(err, &done) {
		return nil, handlerError(o.Name(), err)
	}
	state := nexus.OperationStateFailed
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		state = nexus.OperationStateCanceled
	}
	return nil, &nexus.OperationError{State: state, Cause: errors.Unwrap(done)}
}

// StreamOf is the stream id of the turn a run_turn or send_message
// operation is backed by (its workflow id, turn/<tenant>/<job>), read
// from the operation's token: the caller follows the turn's tokens
// through Workflow Streams or any door by it while it runs.
func StreamOf(token string) (string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(token, "="))
	if err != nil {
		return "", fmt.Errorf("operation token: %w", err)
	}
	var t struct {
		Type       int    `json:"t"`
		WorkflowID string `json:"wid"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", fmt.Errorf("operation token: %w", err)
	}
	// Type 1 is Temporal's workflow-run token.
	if t.Type != 1 {
		return "", fmt.Errorf("operation token: not a turn's (type %d)", t.Type)
	}
	if _, err := agent.StreamTenant(t.WorkflowID); err != nil {
		return "", fmt.Errorf("operation token: %w", err)
	}
	return t.WorkflowID, nil
}
