package agent

import (
	"errors"
	"fmt"
	"time"
)

// Code classifies an error. Every transport reads its classification from
// one table (see Class): the error type that Temporal failures, update
// refusals and TurnError.Type carry, the gRPC status code, the HTTP status,
// and whether a retry may succeed.
type Code string

const (
	// CodeInvalid: the request is malformed; retrying it cannot help.
	CodeInvalid Code = "invalid"
	// CodeNotFound: a named thing (result, stream, tool call) does not exist.
	CodeNotFound Code = "not_found"
	// CodeAgentNotFound: the agent a turn asks for (or routes to) does not exist.
	CodeAgentNotFound Code = "agent_not_found"
	// CodeUnauthenticated: the caller did not say who it is.
	CodeUnauthenticated Code = "unauthenticated"
	// CodePermissionDenied: the caller may not do this.
	CodePermissionDenied Code = "permission_denied"
	// CodeConflict: the request contradicts stored state (a job id reused
	// with a different request, a tool call already decided).
	CodeConflict Code = "conflict"
	// CodeRateLimited: the agent's turns_per_minute is used up.
	CodeRateLimited Code = "rate_limited"
	// CodeModelRejected: the model refused the request (a 4xx other than 429).
	CodeModelRejected Code = "model_rejected"
	// CodeContextLength: the model refused the request because it is
	// longer than its context window: a ModelRejected of its own kind, so
	// that an agent can fall back to a model with a larger window
	// (Agent.FallbackOn) and a client can tell it apart.
	CodeContextLength Code = "context_length"
	// CodeInvalidOutput: the model's answer did not match the turn's
	// output schema, neither at first nor after the one repair call.
	CodeInvalidOutput Code = "invalid_output"
	// CodeModelFailed: the model failed in a way a retry may fix.
	CodeModelFailed Code = "model_failed"
	// CodeGuardrailTripped: the answer broke a rule of the agent's output
	// guard; what broke it was never sent.
	CodeGuardrailTripped Code = "guardrail_tripped"
	// CodeMaxIterations: the model still asked for tools after the agent's
	// max_iterations.
	CodeMaxIterations Code = "max_iterations"
	// CodeTokenBudget: the turn used more tokens than the agent's budget.
	CodeTokenBudget Code = "token_budget"
	// CodeBudget: the tenant has used its daily or monthly budget of
	// tokens or cost (the catalog's budgets); no model is called.
	CodeBudget Code = "budget"
	// CodeTimeout: the turn did not finish within its timeout.
	CodeTimeout Code = "timeout"
	// CodeCanceled: someone cancelled the work.
	CodeCanceled Code = "canceled"
	// CodeUnavailable: a dependency failed in a way a retry may fix.
	CodeUnavailable Code = "unavailable"
	// CodeInternal: a bug or an unexpected state.
	CodeInternal Code = "internal"
)

// Class is how one code is seen outside the process.
type Class struct {
	// Type is the error's name on the wire: the Temporal application error
	// type of activity and workflow failures and update refusals, and
	// TurnError.Type. Types are part of the public contract.
	Type string
	// GRPC is the google.golang.org/grpc/codes value the gateway answers
	// with (a number, so that this package needs nothing but the standard
	// library; the gateway's tests check it against the named codes).
	GRPC uint32
	// HTTP is the status the HTTP API answers with (net/http's StatusXxx
	// values).
	HTTP int
	// Retryable says a retry of the same request may succeed: Temporal
	// retries activities that fail with it, and TurnError.Retryable tells
	// callers.
	Retryable bool
	// Public says the error's message is written for the caller and may be
	// shown as it is; other errors reach clients as a plain message and a
	// reference to the log.
	Public bool
}

// gRPC status code values (google.golang.org/grpc/codes).
const (
	grpcCanceled           = 1
	grpcInvalidArgument    = 3
	grpcDeadlineExceeded   = 4
	grpcNotFound           = 5
	grpcPermissionDenied   = 7
	grpcResourceExhausted  = 8
	grpcFailedPrecondition = 9
	grpcInternal           = 13
	grpcUnavailable        = 14
	grpcUnauthenticated    = 16
)

// classes is the one table every transport maps errors with. The HTTP
// statuses are RFC 9110's, and 429 (RFC 6585) for a limit that a later
// request may fit in.
var classes = map[Code]Class{
	CodeInvalid:          {Type: ErrTypeInvalidRequest, GRPC: grpcInvalidArgument, HTTP: 400, Public: true},
	CodeNotFound:         {Type: ErrTypeNotFound, GRPC: grpcNotFound, HTTP: 404, Public: true},
	CodeAgentNotFound:    {Type: ErrTypeAgentNotFound, GRPC: grpcNotFound, HTTP: 404, Public: true},
	CodeUnauthenticated:  {Type: ErrTypeUnauthenticated, GRPC: grpcUnauthenticated, HTTP: 401, Public: true},
	CodePermissionDenied: {Type: ErrTypePermissionDenied, GRPC: grpcPermissionDenied, HTTP: 403, Public: true},
	CodeConflict:         {Type: ErrTypeConflict, GRPC: grpcFailedPrecondition, HTTP: 409, Public: true},
	CodeRateLimited:      {Type: ErrTypeRateLimited, GRPC: grpcResourceExhausted, HTTP: 429, Public: true},
	// The model refused what the turn sent it: the request cannot be
	// served as it is, and sending it again will not change that.
	CodeModelRejected: {Type: ErrTypeModelRejected, GRPC: grpcFailedPrecondition, HTTP: 422, Public: true},
	CodeContextLength: {Type: ErrTypeContextLength, GRPC: grpcFailedPrecondition, HTTP: 422, Public: true},
	// The model could not answer in the shape the request asks for, even
	// when told what was wrong: the same request would likely end the
	// same way.
	CodeInvalidOutput: {Type: ErrTypeInvalidOutput, GRPC: grpcFailedPrecondition, HTTP: 422, Public: true},
	// The model is the server's upstream: it failed, and may not next time.
	CodeModelFailed: {Type: ErrTypeModelFailed, GRPC: grpcUnavailable, HTTP: 502, Retryable: true, Public: true},
	// The agent's own limits: the same request would end the same way.
	CodeGuardrailTripped: {Type: ErrTypeGuardrailTripped, GRPC: grpcFailedPrecondition, HTTP: 422, Public: true},
	CodeMaxIterations:    {Type: ErrTypeMaxIterations, GRPC: grpcResourceExhausted, HTTP: 422, Public: true},
	CodeTokenBudget:      {Type: ErrTypeTokenBudget, GRPC: grpcResourceExhausted, HTTP: 422, Public: true},
	// The tenant's budget for the day or month: a later period has room.
	CodeBudget:  {Type: ErrTypeBudget, GRPC: grpcResourceExhausted, HTTP: 429, Public: true},
	CodeTimeout: {Type: ErrTypeTimeout, GRPC: grpcDeadlineExceeded, HTTP: 504, Retryable: true, Public: true},
	// The work was cancelled by someone: it conflicts with the request.
	CodeCanceled:    {Type: ErrTypeCanceled, GRPC: grpcCanceled, HTTP: 409, Public: true},
	CodeUnavailable: {Type: ErrTypeUnavailable, GRPC: grpcUnavailable, HTTP: 503, Retryable: true},
	CodeInternal:    {Type: ErrTypeInternal, GRPC: grpcInternal, HTTP: 500},
}

// Error types: Class.Type of each code. They are the types of TurnError
// and of the Temporal application errors a failed AgentTurn ends with.
const (
	ErrTypeInvalidRequest   = "InvalidRequest"
	ErrTypeNotFound         = "NotFound"
	ErrTypeAgentNotFound    = "AgentNotFound"
	ErrTypeUnauthenticated  = "Unauthenticated"
	ErrTypePermissionDenied = "PermissionDenied"
	ErrTypeConflict         = "Conflict"
	ErrTypeRateLimited      = "RateLimited"
	ErrTypeModelRejected    = "ModelRejected"
	ErrTypeContextLength    = "ContextLengthExceeded"
	ErrTypeInvalidOutput    = "InvalidOutput"
	ErrTypeModelFailed      = "ModelFailed"
	ErrTypeGuardrailTripped = "GuardrailTripped"
	ErrTypeMaxIterations    = "MaxIterationsExceeded"
	ErrTypeTokenBudget      = "TokenBudgetExceeded"
	ErrTypeBudget           = "BudgetExceeded"
	ErrTypeTimeout          = "TurnTimeout"
	ErrTypeCanceled         = "Canceled"
	ErrTypeUnavailable      = "Unavailable"
	ErrTypeInternal         = "InternalError"
)

// Codes lists every code, for tests and documentation.
func Codes() []Code {
	return []Code{CodeInvalid, CodeNotFound, CodeAgentNotFound, CodeUnauthenticated, CodePermissionDenied, CodeConflict, CodeRateLimited, CodeModelRejected,
		CodeContextLength, CodeInvalidOutput, CodeGuardrailTripped, CodeModelFailed, CodeMaxIterations, CodeTokenBudget, CodeBudget, CodeTimeout, CodeCanceled, CodeUnavailable, CodeInternal}
}

// Class returns the code's classification; an unknown code is classed as
// CodeInternal.
func (c Code) Class() Class {
	if k, ok := classes[c]; ok {
		return k
	}
	return classes[CodeInternal]
}

// CodeOfType returns the code whose Class().Type is typ, and false for a
// type of no code (then CodeInternal).
func CodeOfType(typ string) (Code, bool) {
	for _, c := range Codes() {
		if classes[c].Type == typ {
			return c, true
		}
	}
	return CodeInternal, false
}

// Error is a domain error with a code. Messages are written for the person
// who sent the request: they name the field or the thing that is wrong.
type Error struct {
	Code    Code
	Message string
	Err     error // optional cause
	// RetryAfter, on a retryable error, is the least time before a retry
	// may succeed (a provider's Retry-After); 0 leaves it to the retry policy.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Message == "" && e.Err != nil {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithCode gives err the code, keeping its whole message: the way to say
// what an error means where only the caller knows (a store's "not found"
// is an agent's AgentNotFound to the turn that asked for it).
func WithCode(code Code, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCode(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// TurnErrorOf describes err for a TurnError: its code's type and
// retryability, and its message.
func TurnErrorOf(err error) *TurnError {
	c := ErrorCode(err).Class()
	return &TurnError{Type: c.Type, Message: err.Error(), Retryable: c.Retryable}
}
