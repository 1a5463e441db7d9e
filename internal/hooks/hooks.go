// Package hooks is the one registry of what runs around a turn's model
// and tool calls, and at its end, in the worker's activities: tracing, a team's own
// guards, audit, metrics of its own. A concern is a Handler — a name and
// the callbacks it needs, each optional — registered once; the activities
// call the Registry at each point and name no concern.
//
// The shape is eino's callbacks and adk-go's plugins: start, end and
// error around each component's call, and a stream variant for the
// model's chunks. Start callbacks run in the order the handlers were
// registered, end and error callbacks in the reverse order, so a handler
// that wraps the call (a span) sees it whole. A start callback may return
// a new context (the call, and the handlers after it, run under it) or
// refuse the call with an error: Refuse for a refusal the model and the
// caller are told about (agent.CodeGuardrailTripped), any other error
// for a failure the activity retries.
//
// Between the call and its end, a return callback (ModelReturn,
// ToolReturn) sees what the call returned before anything else is done
// with it, and may change it or fail the call: every return runs before
// any end, so a handler registered early (a span) ends on what the
// handlers registered after it made of the reply. ToolRead sees, last,
// what the model will read of a tool call's result.
//
// The activities' own concerns are handlers too, registered around the
// worker's (activities.New): the agent's input guards first; the PII
// reveal of a tool's arguments and the tool's rate limit before the
// worker's handlers (tracing's span starts after the limit admits the
// call); the budget reservation, the output guard and the provider
// governor's admission after them (the span covers the wait), and the
// PII redaction of a tool's output last, so that its return runs first
// and every handler reads the output redacted.
//
// Around the calls, the turn: TurnStart sees it begin, where LoadAgent
// pins its agent version, before anything of it is recorded, and may
// reject it (Refuse); TurnEnd sees its result once SaveResult has stored
// it; Event sees each event of its log, in order, once the turn has
// logged its terminal one (ObserveEvents). The turn logs its events in
// workflow code, and no activity sees them all as they happen (a call's
// activity sees its own tokens, the others what the turn hands them
// when it streams), so the one place each passes once is the ended log,
// read as every door reads it. None of them sees a value the tenant's
// PII redaction holds back: the prompt, the model's messages, a tool's
// arguments and output and the events hold placeholders; only the tool
// the tenant lets see a value gets it, in what the tool is given.
//
// Hooks run in activities, so they may do I/O; they run on every attempt
// of a call. Deterministic hooks on the turn itself are the workflow's
// components (workflows/component.go).
package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

// ModelCall is a model call as hooks see it: whose it is and what the
// model reads, after the turn's prompt, context policy and input guards.
// Start callbacks may change Messages (a redaction of their own); the
// model reads what they leave.
type ModelCall struct {
	TenantID, AgentID, JobID, SessionID string
	AgentVersion                        int
	// Step is the model call's step in its turn.
	Step int
	// Model is "provider:name", the model this attempt calls.
	Model    string
	Messages []agent.Message
}

// ModelReply is what the model answered: past the output guard for every
// handler registered before it (ModelReturn), and for every ModelEnd.
type ModelReply struct {
	Model        string
	Message      agent.Message
	Reasoning    string
	Usage        agent.Usage
	FinishReason string
}

// ToolCall is a tool call as hooks see it. Arguments are the model's,
// as the history keeps them (redacted values stay placeholders).
type ToolCall struct {
	TenantID, AgentID, JobID string
	AgentVersion             int
	// Kind is the tool's kind (calculator, openapi_action, a Go
	// function's name…).
	Kind      string
	ID, Name  string
	Arguments json.RawMessage
}

// ToolResult is what a tool call returned: its text, past the tenant's
// PII redaction for every ToolReturn and ToolEnd; for ToolRead, what
// the model reads of the result.
type ToolResult struct {
	Text string
}

// TurnBegin is a turn as hooks see it as it begins: whose it is, who
// asks and what. The prompt is the request's, as the turn records it:
// the gateway has applied the tenant's PII redaction to it, so a
// redacted value is a placeholder here, never the value behind it.
// What a callback changes of it is not kept.
type TurnBegin struct {
	TenantID, AgentID, JobID, SessionID string
	AgentVersion                        int
	// Caller is who asks, from the request's credential; nil for a turn
	// started through Temporal directly.
	Caller *agent.Caller
	Prompt agent.Message
}

// TurnEvent is one event of a turn's log as hooks see it: whose turn it
// is, and the event as the log holds it, index and all.
type TurnEvent struct {
	TenantID, AgentID, JobID string
	Event                    agent.Event
}

// Turn is a turn as hooks see it once it has ended: whose it was and its
// result, as stored.
type Turn struct {
	TenantID, AgentID string
	Result            agent.TurnResult
}

// Handler is one concern's callbacks; leave unset what it does not need.
type Handler struct {
	// Name says whose handler it is, in errors and logs.
	Name string

	ModelStart func(ctx context.Context, c *ModelCall) (context.Context, error)
	// ModelChunk sees each piece of a streamed reply as it comes (text
	// and reasoning, before the output guard holds it back); it must
	// be quick: the stream waits for it.
	ModelChunk func(ctx context.Context, c *ModelCall, kind, text string)
	// ModelReturn sees the reply as soon as the model has returned it,
	// before its stream is closed and before any ModelEnd: a handler that
	// holds something for the provider's call gives it back here, one
	// that checks the reply checks it here. It may change the reply's
	// Message, Reasoning and FinishReason (what is stored and what the
	// turn gets; what was streamed stays sent), or fail the call with an
	// error: the handlers after it in this order do not run, and every
	// handler sees ModelError in place of ModelEnd.
	ModelReturn func(ctx context.Context, c *ModelCall, r *ModelReply) error
	ModelEnd    func(ctx context.Context, c *ModelCall, r *ModelReply)
	ModelError  func(ctx context.Context, c *ModelCall, err error)

	ToolStart func(ctx context.Context, c *ToolCall) (context.Context, error)
	// ToolReturn sees a tool's output as soon as the tool has returned it
	// (not its failure), before any ToolEnd. It may change the text, or
	// fail the call as ModelReturn does: every handler then sees
	// ToolError, and the attempt fails (it is retried).
	ToolReturn func(ctx context.Context, c *ToolCall, r *ToolResult) error
	ToolEnd    func(ctx context.Context, c *ToolCall, r *ToolResult)
	ToolError  func(ctx context.Context, c *ToolCall, err error)
	// ToolRead sees what the model will read of a turn's tool call once
	// it is made: the tool's output as the model is shown it (its data
	// described, its files named), or the error it can act on (bad
	// arguments, a tool's not-found), replayed calls' too; it may change
	// it. It runs in order, after the call's ToolEnd or ToolError, and
	// not for the calls a guard or a reconciliation makes of a tool.
	ToolRead func(ctx context.Context, c *ToolCall, r *ToolResult)

	// TurnStart sees each turn as it begins, once its agent version is
	// pinned and before the turn is recorded, on every attempt of that
	// step (a hook that must act once keys by the job); not a job whose
	// result is stored already, nor a later run of a long turn. It may
	// refuse the turn (Refuse): the turn is rejected with the reason,
	// as a request the worker will not run, and stores nothing; any
	// other error fails the attempt, which is retried. It runs before
	// the turn holds a place of its agent's rate, so a turn rejected
	// after it (the rate, a job id in use) has a start and no end.
	TurnStart func(ctx context.Context, t *TurnBegin) error
	// Event sees each event of a turn's log, in order, once the turn has
	// logged its last: the log is what every door reads, so a hook reads
	// it as they do and cannot change or drop an event. It sees the log
	// whole (retried calls' voided text, child turns' events and all,
	// agent.Unvoided tells them apart), on every attempt of the read: a
	// hook that must act once keys by the job and the event's index. It
	// must be quick: the turn's close waits for it.
	Event func(ctx context.Context, e *TurnEvent)
	// TurnEnd sees each turn's result once it is stored, on every
	// attempt of the store: a hook that must act once keys by the job.
	TurnEnd func(ctx context.Context, t *Turn)
}

// Registry holds the handlers, in registration order. Build it before the
// worker starts; it is read concurrently and never changed after.
type Registry struct {
	handlers []Handler
}

// New returns a registry of handlers, in order.
func New(handlers ...Handler) *Registry {
	return &Registry{handlers: handlers}
}

// Handlers are the registry's handlers, in order (nil registry: none).
func (r *Registry) Handlers() []Handler {
	if r == nil {
		return nil
	}
	return r.handlers
}

// Refuse is the error a start callback returns to refuse a call: the
// turn ends GuardrailTripped with reason, which the caller is shown.
func Refuse(format string, args ...any) error {
	return agent.Errorf(agent.CodeGuardrailTripped, format, args...)
}

// ModelStart runs the handlers' ModelStart in order. When one fails, the
// handlers started before it see the error (ModelError), and the call is
// not made.
func (r *Registry) ModelStart(ctx context.Context, c *ModelCall) (context.Context, error) {
	return start(ctx, r.Handlers(), c, func(h Handler) startFunc[*ModelCall] { return h.ModelStart },
		func(h Handler) errorFunc[*ModelCall] { return h.ModelError })
}

// ModelChunk runs the handlers' ModelChunk in order.
func (r *Registry) ModelChunk(ctx context.Context, c *ModelCall, kind, text string) {
	for _, h := range r.Handlers() {
		if h.ModelChunk != nil {
			h.ModelChunk(ctx, c, kind, text)
		}
	}
}

// Chunks reports whether a handler takes the stream's chunks.
func (r *Registry) Chunks() bool {
	for _, h := range r.Handlers() {
		if h.ModelChunk != nil {
			return true
		}
	}
	return false
}

// ModelReturn runs the handlers' ModelReturn in reverse order, up to
// the first that fails; the caller then runs ModelError.
func (r *Registry) ModelReturn(ctx context.Context, c *ModelCall, reply *ModelReply) error {
	return returned(r.Handlers(), func(h Handler) func(context.Context, *ModelCall, *ModelReply) error { return h.ModelReturn }, ctx, c, reply)
}

// ModelEnd runs the handlers' ModelEnd in reverse order.
func (r *Registry) ModelEnd(ctx context.Context, c *ModelCall, reply *ModelReply) {
	backwards(r.Handlers(), func(h Handler) func(context.Context, *ModelCall, *ModelReply) { return h.ModelEnd }, ctx, c, reply)
}

// ModelError runs the handlers' ModelError in reverse order.
func (r *Registry) ModelError(ctx context.Context, c *ModelCall, err error) {
	backwards(r.Handlers(), func(h Handler) func(context.Context, *ModelCall, error) { return h.ModelError }, ctx, c, err)
}

// ToolStart runs the handlers' ToolStart in order, as ModelStart does.
func (r *Registry) ToolStart(ctx context.Context, c *ToolCall) (context.Context, error) {
	return start(ctx, r.Handlers(), c, func(h Handler) startFunc[*ToolCall] { return h.ToolStart },
		func(h Handler) errorFunc[*ToolCall] { return h.ToolError })
}

// ToolReturn runs the handlers' ToolReturn in reverse order, up to the
// first that fails; the caller then runs ToolError.
func (r *Registry) ToolReturn(ctx context.Context, c *ToolCall, res *ToolResult) error {
	return returned(r.Handlers(), func(h Handler) func(context.Context, *ToolCall, *ToolResult) error { return h.ToolReturn }, ctx, c, res)
}

// ToolEnd runs the handlers' ToolEnd in reverse order.
func (r *Registry) ToolEnd(ctx context.Context, c *ToolCall, res *ToolResult) {
	backwards(r.Handlers(), func(h Handler) func(context.Context, *ToolCall, *ToolResult) { return h.ToolEnd }, ctx, c, res)
}

// ToolError runs the handlers' ToolError in reverse order.
func (r *Registry) ToolError(ctx context.Context, c *ToolCall, err error) {
	backwards(r.Handlers(), func(h Handler) func(context.Context, *ToolCall, error) { return h.ToolError }, ctx, c, err)
}

// ToolRead runs the handlers' ToolRead in order.
func (r *Registry) ToolRead(ctx context.Context, c *ToolCall, res *ToolResult) {
	for _, h := range r.Handlers() {
		if h.ToolRead != nil {
			h.ToolRead(ctx, c, res)
		}
	}
}

// TurnStart runs the handlers' TurnStart in order, up to the first that
// fails: its error, named.
func (r *Registry) TurnStart(ctx context.Context, t *TurnBegin) error {
	for _, h := range r.Handlers() {
		if h.TurnStart == nil {
			continue
		}
		if err := h.TurnStart(ctx, t); err != nil {
			return named(h.Name, err)
		}
	}
	return nil
}

// Event runs the handlers' Event in order.
func (r *Registry) Event(ctx context.Context, e *TurnEvent) {
	for _, h := range r.Handlers() {
		if h.Event != nil {
			h.Event(ctx, e)
		}
	}
}

// Events reports whether a handler takes a turn's events: only then
// does the turn hand its log to them.
func (r *Registry) Events() bool {
	for _, h := range r.Handlers() {
		if h.Event != nil {
			return true
		}
	}
	return false
}

// TurnEnd runs the handlers' TurnEnd in order.
func (r *Registry) TurnEnd(ctx context.Context, t *Turn) {
	for _, h := range r.Handlers() {
		if h.TurnEnd != nil {
			h.TurnEnd(ctx, t)
		}
	}
}

type (
	startFunc[C any] func(context.Context, C) (context.Context, error)
	errorFunc[C any] func(context.Context, C, error)
)

// start runs each handler's start in order; when one fails, the handlers
// started before it get the error, in reverse order.
func start[C any](ctx context.Context, hs []Handler, c C, startOf func(Handler) startFunc[C], errorOf func(Handler) errorFunc[C]) (context.Context, error) {
	for i, h := range hs {
		f := startOf(h)
		if f == nil {
			continue
		}
		next, err := f(ctx, c)
		if err != nil {
			err = named(h.Name, err)
			backwards(hs[:i], func(h Handler) func(context.Context, C, error) { return errorOf(h) }, ctx, c, err)
			return ctx, err
		}
		ctx = next
	}
	return ctx, nil
}

// returned calls the callback pick finds of each handler that has it,
// last first, until one fails: its error, named.
func returned[C, R any](hs []Handler, pick func(Handler) func(context.Context, C, R) error, ctx context.Context, c C, r R) error {
	for i := len(hs) - 1; i >= 0; i-- {
		if f := pick(hs[i]); f != nil {
			if err := f(ctx, c, r); err != nil {
				return named(hs[i].Name, err)
			}
		}
	}
	return nil
}

// backwards calls the callback pick finds of each handler that has it,
// last first.
func backwards[C, V any](hs []Handler, pick func(Handler) func(context.Context, C, V), ctx context.Context, c C, v V) {
	for i := len(hs) - 1; i >= 0; i-- {
		if f := pick(hs[i]); f != nil {
			f(ctx, c, v)
		}
	}
}

// named says which handler failed. A refusal, or any error with an
// agent code, is the handler's word to the caller and stays as it is; so
// is a Temporal application error, whose type and retry policy Temporal
// reads only from the error the activity returns, unwrapped.
func named(name string, err error) error {
	var ae *agent.Error
	if _, app := err.(*temporal.ApplicationError); name == "" || app || errors.As(err, &ae) {
		return err
	}
	return fmt.Errorf("hook %s: %w", name, err)
}
