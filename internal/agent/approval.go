package agent

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/words"
)

// ApprovalDecision is a person's answer to a tool call waiting for
// approval: the payload of a turn's "approve" signal and update.
type ApprovalDecision struct {
	CallID   string `json:"call_id"`
	Approved bool   `json:"approved"`
	Reason   string `json:"reason,omitempty"`
	Approver string `json:"approver,omitempty"`
	// ApprovalID, when set, names the waiting call the decision is for
	// (PendingApproval.ApprovalID): a decision whose approval id is not
	// the call's is refused, so a decision made for one call cannot
	// decide another with the same call id. The gateway's doors always
	// send it; an operator's signal or update may leave it out and name
	// the call that waits now by its call id.
	ApprovalID string `json:"approval_id,omitempty"`
	// ApproverIssuer and ApproverSubject say where the approver's
	// identity comes from (Caller.Issuer, Caller.Subject): set by the
	// gateway from the credential; empty for an operator's decision.
	ApproverIssuer  string `json:"approver_issuer,omitempty"`
	ApproverSubject string `json:"approver_subject,omitempty"`
	// Scope is what the approval decides besides the call: ScopeCall
	// (the default, "") nothing; ScopeTurn and ScopeSession remember it
	// as a Grant for the rest of the turn or of the session, for the
	// calls of the same tool whose arguments satisfy Match (all of them
	// when it is empty), until ExpiresInSec (0: while the scope lasts)
	// or a revocation. Only an approval can be remembered.
	Scope        string    `json:"scope,omitempty"`
	Match        ArgsMatch `json:"match,omitempty"`
	ExpiresInSec int       `json:"expires_in_sec,omitempty"`

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

// Validate checks the decision's shape, with what it asks to remember
// (whether the call waits is the turn's business).
func (d ApprovalDecision) Validate() error {
	if err := d.ValidateCall(); err != nil {
		return err
	}
	switch {
	case len(d.ApprovalID) > MaxKeyLength:
		return Errorf(CodeInvalid, "approval_id is longer than %d bytes", MaxKeyLength)
	case len(d.ApproverIssuer) > MaxIssuerLength || len(d.ApproverSubject) > MaxSubjectLength:
		return Errorf(CodeInvalid, "approver_issuer or approver_subject is too long")
	}
	return d.validateScope()
}

// ValidateCall checks the fields a decision had before approvals were
// bound to their call and remembered: what runs from before then check.
func (d ApprovalDecision) ValidateCall() error {
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

// validateScope checks what the decision asks to remember.
func (d ApprovalDecision) validateScope() error {
	switch d.Scope {
	case "", ScopeCall:
		if len(d.Match) > 0 || d.ExpiresInSec != 0 {
			return Errorf(CodeInvalid, "match and expires_in_sec belong to an approval remembered for the turn or the session (scope turn or session)")
		}
		return nil
	case ScopeTurn, ScopeSession:
	default:
		return Errorf(CodeInvalid, "scope %q: want call (the default), turn or session", words.Clip(d.Scope, 32))
	}
	switch {
	case !d.Approved:
		return Errorf(CodeInvalid, "scope %s: only an approval is remembered; a rejection decides its call alone", d.Scope)
	case d.ExpiresInSec < 0 || d.ExpiresInSec > MaxGrantExpiresSec:
		return Errorf(CodeInvalid, "expires_in_sec %d: want 0 (while the %s lasts) to %d", d.ExpiresInSec, d.Scope, MaxGrantExpiresSec)
	}
	return d.Match.Validate()
}

// Remembers reports whether the decision makes a grant.
func (d ApprovalDecision) Remembers() bool {
	return d.Approved && (d.Scope == ScopeTurn || d.Scope == ScopeSession)
}

// PendingApproval is a tool call waiting for a decision.
type PendingApproval struct {
	CallID string `json:"call_id"`
	// ApprovalID binds a decision to this call (ApprovalIDOf); empty on
	// calls of runs from before approvals were bound.
	ApprovalID  string          `json:"approval_id,omitempty"`
	Tool        string          `json:"tool"`
	Args        json.RawMessage `json:"args,omitempty"`
	RequestedAt time.Time       `json:"requested_at"`
	Deadline    time.Time       `json:"deadline"`
	// Resend says the call ran and its outcome is unknown (ToolUnknown):
	// the decision is whether to send it again. An approval sends it a
	// second time; a rejection leaves it, and the model reads the
	// unknown outcome with the reason. A decision on it names its
	// approval id, and remembers nothing.
	Resend bool `json:"resend,omitempty"`
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
	Via         string          `json:"via,omitempty"` // signal | update | timeout | cancel | grant
	RequestedAt time.Time       `json:"requested_at"`
	DecidedAt   time.Time       `json:"decided_at"`
	// ApprovalID is the waiting call's (PendingApproval.ApprovalID);
	// empty for runs from before approvals were bound.
	ApprovalID string `json:"approval_id,omitempty"`
	// ApproverIssuer and ApproverSubject say where the approver's (or
	// answerer's) identity comes from; empty for an operator's decision.
	ApproverIssuer  string `json:"approver_issuer,omitempty"`
	ApproverSubject string `json:"approver_subject,omitempty"`
	// GrantID names the grant that decided the call (Via grant), or the
	// one the decision made (Grant).
	GrantID string `json:"grant_id,omitempty"`
	// Grant is the grant the decision makes (ApprovalDecision.Scope turn
	// or session), stored with the record.
	Grant *Grant `json:"grant,omitempty"`
	// Resend says the decision was whether to send again a call whose
	// outcome was unknown (PendingApproval.Resend).
	Resend bool `json:"resend,omitempty"`
}
