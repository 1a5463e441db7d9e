package agent

import (
	"errors"
	"fmt"
)

// Code classifies an error for transports: Temporal decides retryability
// from it and the gateway maps it to a gRPC status.
type Code string

const (
	// CodeInvalid: the request is malformed; retrying it cannot help.
	CodeInvalid Code = "invalid"
	// CodeNotFound: a named thing (agent, tool, result) does not exist.
	CodeNotFound Code = "not_found"
	// CodeConflict: the request contradicts stored state (e.g. a job id reused
	// with a different request).
	CodeConflict Code = "conflict"
	// CodeLimit: a configured limit (iterations, tokens, time) was reached.
	CodeLimit Code = "limit"
	// CodeUnavailable: a dependency failed in a way a retry may fix.
	CodeUnavailable Code = "unavailable"
	// CodeInternal: a bug or an unexpected state.
	CodeInternal Code = "internal"
)

// Error is a domain error with a code. Messages are written for the person
// who sent the request: they name the field or the thing that is wrong.
type Error struct {
	Code    Code
	Message string
	Err     error // optional cause
}

func (e *Error) Error() string {
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

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// IsCode reports whether err carries the given code.
func IsCode(err error, code Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
