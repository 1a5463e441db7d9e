package contract

import (
	"errors"

	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

// Failure converts an error for Temporal. A domain error becomes an
// application error whose type is its code's type and which is retryable
// as agent's table says (with the error's RetryAfter as the next retry
// delay); any other error is returned as it is, and Temporal retries it.
func Failure(err error) error {
	var e *agent.Error
	if err == nil || !errors.As(err, &e) {
		return err
	}
	c := e.Code.Class()
	return temporal.NewApplicationErrorWithOptions(err.Error(), c.Type, temporal.ApplicationErrorOptions{
		NonRetryable:   !c.Retryable,
		NextRetryDelay: e.RetryAfter,
	})
}

// ErrorOf reads a domain error back from what Temporal returned: an
// application error whose type is in agent's table keeps its code; a
// cancellation is CodeCanceled; a timeout is CodeUnavailable; anything
// else, including an activity's unclassified failure, is CodeInternal.
// The message is the innermost one, without the SDK's wrapping.
func ErrorOf(err error) *agent.Error {
	if err == nil {
		return nil
	}
	var app *temporal.ApplicationError
	var canceled *temporal.CanceledError
	var timeout *temporal.TimeoutError
	var domain *agent.Error
	switch {
	case errors.As(err, &app):
		code, _ := agent.CodeOfType(app.Type())
		return &agent.Error{Code: code, Message: app.Message()}
	case errors.As(err, &canceled):
		return agent.Errorf(agent.CodeCanceled, "cancelled")
	case errors.As(err, &timeout):
		return agent.Errorf(agent.CodeUnavailable, "timed out (%s)", timeout.TimeoutType())
	case errors.As(err, &domain):
		return domain
	}
	return &agent.Error{Code: agent.CodeInternal, Message: err.Error()}
}

// ErrTypeInterrupted is the type of a model call's failure when its turn
// interrupted it (InterruptModel, or an interruption on the live path
// after a cancel_turn signal). It is not retried: an attempt run again
// would call the model again for an answer the turn has stopped. The turn
// tells it apart from the call's other failures (Interrupted) and acts on
// what interrupted it: a cancellation, else the messages steered in.
const ErrTypeInterrupted = "ModelInterrupted"

// Interrupted returns the failure of a model call its turn interrupted.
// It is benign: the SDK logs it at debug, not as an "Activity error." with
// a stack trace, since a person's cancel or steer is no fault.
func Interrupted() error {
	return temporal.NewApplicationErrorWithOptions("the model call was interrupted by its turn", ErrTypeInterrupted,
		temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
}

// IsInterrupted reports whether err is a model call's Interrupted failure.
func IsInterrupted(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.Type() == ErrTypeInterrupted
}

// ErrTypeMustWait is the type of a local model call's failure when the
// provider governor would have it wait (governor.Call.NoWait). It is not
// retried: the turn sends the call again as an activity, which waits
// outside the workflow task and says what for on its pending state.
const ErrTypeMustWait = "ModelCallMustWait"

// MustWait returns a local model call's ErrTypeMustWait failure saying
// why; attempt is the step attempt it claimed, which the activity's
// attempts follow (CallModelInput.AttemptBase).
func MustWait(why string, attempt int) error {
	return temporal.NewNonRetryableApplicationError(why, ErrTypeMustWait, nil, attempt)
}

// MustWaitAttempt reports whether err is a MustWait failure, and the
// attempt it claimed.
func MustWaitAttempt(err error) (int, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != ErrTypeMustWait {
		return 0, false
	}
	var attempt int
	if app.HasDetails() && app.Details(&attempt) != nil {
		return 0, false
	}
	return attempt, true
}

// TurnFailure is the error a turn that did not complete ends with: a
// non-retryable application error of the result's error type, whose
// details hold the result.
func TurnFailure(res agent.TurnResult) error {
	e := res.Error
	if e == nil {
		e = &agent.TurnError{Type: agent.ErrTypeInternal, Message: "turn failed without an error"}
	}
	return temporal.NewNonRetryableApplicationError(e.Message, e.Type, nil, res)
}

// TurnCanceled is what a cancelled turn ends with: a cancellation whose
// details hold the result.
func TurnCanceled(res agent.TurnResult) error { return temporal.NewCanceledError(res) }

// FailedResult returns the result a turn's TurnFailure or TurnCanceled
// carries, and false when err is neither.
func FailedResult(err error) (agent.TurnResult, bool) {
	var app *temporal.ApplicationError
	var canceled *temporal.CanceledError
	var res agent.TurnResult
	switch {
	case errors.As(err, &app):
		if app.HasDetails() && app.Details(&res) == nil && res.Status != "" {
			return res, true
		}
	case errors.As(err, &canceled):
		if canceled.HasDetails() && canceled.Details(&res) == nil && res.Status != "" {
			return res, true
		}
	}
	return agent.TurnResult{}, false
}

// ToolCallFailed is the failure of an ExecuteTool attempt that a retry may
// fix, saying which pipeline step failed (step, "" when the tool is not a
// pipeline or did not say): Temporal retries it, and once the retries are
// spent the turn reads the step back (StepOf) for the call's record.
func ToolCallFailed(message, step string) error {
	opts := temporal.ApplicationErrorOptions{}
	if step != "" {
		opts.Details = []any{toolFailureDetails{Step: step}}
	}
	return temporal.NewApplicationErrorWithOptions(message, "", opts)
}

// toolFailureDetails are the details of a ToolCallFailed.
type toolFailureDetails struct {
	Step string `json:"step"`
}

// StepOf is the pipeline step a failed ExecuteTool names (ToolCallFailed),
// "" when it names none.
func StepOf(err error) string {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.HasDetails() {
		return ""
	}
	var d toolFailureDetails
	if app.Details(&d) != nil {
		return ""
	}
	return d.Step
}
