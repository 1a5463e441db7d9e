package workflows

import (
	"errors"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// callFailure is how a tool call ends whose activity failed
// with err (notSent: a local activity or a program, which sends no write
// of its own; canceled: the turn was cancelled).
//
// A call whose last attempt was lost mid-call — its worker gone or cut
// off until Temporal timed the attempt out — may have sent its write;
// when its retries are spent too (each lost the same way: a worker cut
// off from Temporal silently can take attempt after attempt), nothing
// answered for it. Its outcome is unknown, as the effects rule says of a
// write sent without an answer (internal/effects), never an error: an
// error tells the model the call did nothing, and it may make it again —
// a new call, under a new key, which even a far side that deduplicates
// applies a second time.
func callFailure(notSent bool, err error, canceled bool) (status, msg string) {
	msg = contract.ErrorOf(err).Message
	switch {
	case canceled && contract.ErrorOf(err).Code == agent.CodeCanceled:
		return agent.ToolCanceled, "the turn was cancelled while the call ran"
	case !notSent && lostMidCall(err):
		return agent.ToolUnknown, "the call's worker was lost while it ran and no later attempt answered (" + msg +
			"): it may or may not have taken effect"
	}
	return agent.ToolError, msg
}

// lostMidCall reports whether err is an attempt that started and was
// timed out without an answer: its heartbeat or its start-to-close
// timeout. One that never started (schedule-to-start) sent nothing.
func lostMidCall(err error) bool {
	var te *temporal.TimeoutError
	if !errors.As(err, &te) {
		return false
	}
	switch te.TimeoutType() {
	case enumspb.TIMEOUT_TYPE_HEARTBEAT, enumspb.TIMEOUT_TYPE_START_TO_CLOSE:
		return true
	}
	return false
}
