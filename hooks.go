package agentflow

import (
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/hooks"
)

// Hook is one concern's callbacks around every turn, model call and tool
// call: a guard, an audit log, metrics of your own. Set what you need of
// TurnStart, ModelStart, ModelChunk, ModelReturn, ModelEnd, ModelError,
// ToolStart, ToolReturn, ToolEnd, ToolError, ToolRead, Event and TurnEnd.
// TurnStart sees each turn as it begins (its prompt as the turn records
// it, redacted) and may reject it (Refuse); Event sees each event of its
// log, in order, once it has logged its last (it cannot change one: the
// log is what every door reads; the turn's close waits for it); TurnEnd
// sees its stored result. Starts run in the
// order the hooks are given, returns, ends and errors in reverse; a start
// may return a context for the call and the hooks after it, or refuse the
// call (Refuse). A return (ModelReturn, ToolReturn) sees what the call
// returned before any end does, and may change it or fail the call;
// ToolRead sees, and may change, what the model reads of a tool's
// result. Your hooks run inside the worker's own concerns, which are
// hooks too: the agent's input guards start first; the tool's PII reveal
// and rate limit start before yours; the budget reservation, the output
// guard and the provider governor start after yours (a model call's span
// covers the wait), so your returns and ends see the reply past the
// output guard; the PII redaction of a tool's output returns before
// yours. Hooks run in the worker's activities, on every attempt of a
// call: they may do I/O.
type Hook = hooks.Handler

// What hooks see of the calls.
type (
	ModelCall  = hooks.ModelCall
	ModelReply = hooks.ModelReply
	ToolCall   = hooks.ToolCall
	ToolResult = hooks.ToolResult
	// TurnBegin is a turn as it begins: whose, who asks, its prompt.
	TurnBegin = hooks.TurnBegin
	// TurnEvent is one event of a turn's log, and whose turn it is.
	TurnEvent = hooks.TurnEvent
	// Turn is a turn once it has ended: its tenant, agent and result.
	Turn = hooks.Turn
	// Message is one message of what the model reads.
	Message = agent.Message
)

// Refuse is the error a hook's start returns to refuse a call: the turn
// ends GuardrailTripped with the reason, which its caller is shown. Any
// other error fails the attempt, which Temporal retries.
func Refuse(format string, args ...any) error { return hooks.Refuse(format, args...) }
