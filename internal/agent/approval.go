package agent

import (
	"encoding/json"
	"strings"
	"time"
)

// ApprovalDecision is a person's answer to a tool call waiting for
// approval: the payload of a turn's "approve" signal and update.
type ApprovalDecision struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	Approver string `json:"approver,omitempty"`

	// stated is set when the decision says whether it approves: made by
	// NewApprovalDecision, or decoded from JSON with an "approved" field.
	stated bool
}

// NewApprovalDecision returns a complete decision.
func NewApprovalDecision(callID string, approved bool, reason, approver string) ApprovalDecision {
	return ApprovalDecision{CallID: callID, Approved: approved, Reason: reason, Approver: approver, stated: true}
}

// UnmarshalJSON notes whether the JSON says "approved": a missing field
// is not a rejection.
func (d *ApprovalDecision) UnmarshalJSON(b []byte) error {
	type plain ApprovalDecision
	var v struct {
		plain
		Approved *bool `json:"approved"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = ApprovalDecision(v.plain)
	if v.Approved != nil {
		d.Approved, d.stated = *v.Approved, true
	}
	return nil
}

// Complete refuses a decision that does not say what it decides or who
// decided: "approved" (true or false) and "approver" are required.
func (d ApprovalDecision) Complete() error {
	switch {
	case !d.stated:
		return Errorf(CodeInvalid, `approved is required: true runs the call, false rejects it`)
	case strings.TrimSpace(d.Approver) == "":
		return Errorf(CodeInvalid, "approver is required: who decided")
	}
	return nil
}

// Validate checks the decision's shape (whether the call waits is the
// turn's business).
func (d ApprovalDecision) Validate() error {
	switch {
	case strings.TrimSpace(d.CallID) == "":
		return Errorf(CodeInvalid, "call_id is required")
	case len(d.CallID) > MaxKeyLength:
		return Errorf(CodeInvalid, "call_id is longer than %d bytes", MaxKeyLength)
	case len(d.Reason) > 4096:
		return Errorf(CodeInvalid, "reason is longer than 4096 bytes")
	case len(d.Approver) > MaxKeyLength:
		return Errorf(CodeInvalid, "approver is longer than %d bytes", MaxKeyLength)
	}
	return nil
}

// PendingApproval is a tool call waiting for a decision.
type PendingApproval struct {
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args,omitempty"`
	RequestedAt time.Time       `json:"requested_at"`
	Deadline    time.Time       `json:"deadline"`
}

// Approval outcomes, as stored and as tool-call statuses in a result.
const (
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
	ApprovalTimedOut = "timed_out"
	ApprovalCanceled = "canceled" // the turn was cancelled while the call waited
)

// CancelRequest is the payload of a turn's "cancel_turn" signal.
type CancelRequest struct {
	Reason      string `json:"reason,omitempty"`
	RequestedBy string `json:"requested_by,omitempty"`
	// Discard: what the model had written is not kept as a partial
	// answer, and the turn's exchange stays out of its session's
	// transcript (a conversation's OnBusyRollback).
	Discard bool `json:"discard,omitempty"`
	// AtBoundary: the model call and the tool calls in flight finish
	// first; the turn stops at its next step boundary — before it runs
	// the tool calls of a reply, or calls the model again. Otherwise they
	// are stopped at once.
	AtBoundary bool `json:"at_boundary,omitempty"`
}

// Validate bounds the request's fields.
func (c CancelRequest) Validate() error {
	switch {
	case len(c.Reason) > 4096:
		return Errorf(CodeInvalid, "reason is longer than 4096 bytes")
	case len(c.RequestedBy) > MaxKeyLength:
		return Errorf(CodeInvalid, "requested_by is longer than %d bytes", MaxKeyLength)
	}
	return nil
}

// Message says who cancelled the turn and why, for its result.
func (c CancelRequest) Message() string {
	msg := "the turn was cancelled"
	if c.RequestedBy != "" {
		msg += " by " + c.RequestedBy
	}
	if c.Reason != "" {
		msg += ": " + c.Reason
	}
	return msg
}

// ApprovalRecord is a decided approval, as stored.
type ApprovalRecord struct {
	TenantID    string          `json:"tenant_id"`
	JobID       string          `json:"job_id"`
	CallID      string          `json:"call_id"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args,omitempty"`
	Outcome     string          `json:"outcome"` // approved | rejected | timed_out | canceled
	Reason      string          `json:"reason,omitempty"`
	Approver    string          `json:"approver,omitempty"`
	Via         string          `json:"via,omitempty"` // signal | update | timeout | cancel
	RequestedAt time.Time       `json:"requested_at"`
	DecidedAt   time.Time       `json:"decided_at"`
}
