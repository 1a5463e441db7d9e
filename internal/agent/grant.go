package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/words"
)

// Scopes of an approval (ApprovalDecision.Scope): what else than the call
// it decides the approval decides.
const (
	// ScopeCall decides the call alone (the default).
	ScopeCall = "call"
	// ScopeTurn also decides the turn's later calls of the same tool
	// whose arguments match (Grant).
	ScopeTurn = "turn"
	// ScopeSession also decides the later calls of the same tool, by the
	// same agent, in the turns of the same session.
	ScopeSession = "session"
)

// Bounds of a grant.
const (
	MaxGrantConditions = 16
	MaxGrantPathBytes  = 256
	MaxGrantValueBytes = 1024
	MaxGrantExpiresSec = 366 * 24 * 3600
)

// ApprovalIDOf is the approval id of a call that waits for a decision:
// it names the run of the turn (runID, which Temporal makes unique), the
// call's step (seq, unique in the turn) and the model's call id, so a
// decision that names it decides that call and no other — not another
// turn's call with the same model-made id, not an earlier step's, not an
// earlier run's. It binds; it is no secret: whoever may decide the call
// may read it.
func ApprovalIDOf(runID string, seq int, callID string) string {
	sum := sha256.Sum256([]byte(runID + "\x00" + strconv.Itoa(seq) + "\x00" + callID))
	return "apr_" + hex.EncodeToString(sum[:12])
}

// ResendApprovalIDOf is the approval id of the decision whether to send
// again the call ApprovalIDOf names (PendingApproval.Resend): another id,
// so that a decision made for the call's first approval never decides
// its second delivery.
func ResendApprovalIDOf(runID string, seq int, callID string) string {
	sum := sha256.Sum256([]byte(runID + "\x00" + strconv.Itoa(seq) + "\x00" + callID + "\x00resend"))
	return "apr_" + hex.EncodeToString(sum[:12])
}

// GrantIDOf is the id of the grant the approval approvalID makes: one
// approval makes at most one grant, so a retried record makes no second.
func GrantIDOf(approvalID string) string {
	return "grant_" + strings.TrimPrefix(approvalID, "apr_")
}

// ArgCondition holds when the call's arguments have Equals at Path, a
// JSON Pointer (RFC 6901: "/region", "/items/0/sku"; "" is the whole
// arguments object). Numbers compare by value (1 equals 1.0), objects
// and arrays member by member.
type ArgCondition struct {
	Path   string          `json:"path"`
	Equals json.RawMessage `json:"equals"`
}

// ArgsMatch is an approval's argument pattern: every condition holds. An
// empty match holds for any arguments.
type ArgsMatch []ArgCondition

// Validate bounds the match and checks its paths and values.
func (m ArgsMatch) Validate() error {
	if len(m) > MaxGrantConditions {
		return Errorf(CodeInvalid, "match has %d conditions; the limit is %d", len(m), MaxGrantConditions)
	}
	for i, c := range m {
		switch {
		case len(c.Path) > MaxGrantPathBytes:
			return Errorf(CodeInvalid, "match[%d].path is longer than %d bytes", i, MaxGrantPathBytes)
		case c.Path != "" && !strings.HasPrefix(c.Path, "/"):
			return Errorf(CodeInvalid, "match[%d].path %q: want a JSON Pointer, such as /region or /items/0/sku", i, words.Clip(c.Path, 64))
		case len(bytes.TrimSpace(c.Equals)) == 0:
			return Errorf(CodeInvalid, "match[%d].equals is required: the JSON value the argument must have", i)
		case len(c.Equals) > MaxGrantValueBytes:
			return Errorf(CodeInvalid, "match[%d].equals is longer than %d bytes", i, MaxGrantValueBytes)
		case !json.Valid(c.Equals):
			return Errorf(CodeInvalid, "match[%d].equals is not JSON", i)
		}
		if _, err := pointer(c.Path); err != nil {
			return Errorf(CodeInvalid, "match[%d].path %q: %v", i, words.Clip(c.Path, 64), err)
		}
	}
	return nil
}

// Matches reports whether args (the call's JSON arguments, an object)
// satisfy every condition. Arguments that are not a JSON object match
// only the empty match.
func (m ArgsMatch) Matches(args json.RawMessage) bool {
	if len(m) == 0 {
		return true
	}
	doc, err := decodeNumbers(args)
	if err != nil {
		return false
	}
	if _, ok := doc.(map[string]any); !ok {
		return false
	}
	for _, c := range m {
		want, err := decodeNumbers(c.Equals)
		if err != nil {
			return false
		}
		got, ok := resolve(doc, c.Path)
		if !ok || !sameJSON(got, want) {
			return false
		}
	}
	return true
}

func decodeNumbers(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	// One value, and nothing after it: arguments a grant matches are
	// exactly one JSON object, as the tool reads them.
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("more after the JSON value")
	}
	return v, nil
}

// pointer splits a JSON Pointer into its reference tokens.
func pointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, fmt.Errorf("'~' must be followed by 0 or 1")
			}
		}
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func resolve(doc any, path string) (any, bool) {
	tokens, err := pointer(path)
	if err != nil {
		return nil, false
	}
	cur := doc
	for _, tok := range tokens {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// sameJSON compares two decoded JSON values, numbers by value.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, okx := new(big.Rat).SetString(a.String())
		y, oky := new(big.Rat).SetString(b.String())
		return okx && oky && x.Cmp(y) == 0
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		// The answer does not depend on the order the keys are visited in.
		for k, av := range a {
			bv, ok := b[k]
			if !ok || !sameJSON(av, bv) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	default: // string, bool, nil
		return a == b
	}
}

// Grant is an approval remembered beyond the call it decided (scope turn
// or session): it decides the later calls of the same tool, by the same
// agent, of the same tenant and session (scope session) or turn (scope
// turn), whose arguments match — calls whose tool's policy asks for a
// person, and only those. It never widens the policy: a call the policy
// lets run needs no grant, and a call refused for another reason (a tool
// limit, an unknown tool) is refused still. Revoked or expired, it
// decides nothing more; a call already waiting still waits for a person.
type Grant struct {
	ID       string `json:"id"`
	TenantID string `json:"tenant_id"`
	Scope    string `json:"scope"` // turn | session
	// SessionID is the session a session grant decides calls in; a turn
	// grant's is the turn's, for the record.
	SessionID string `json:"session_id,omitempty"`
	// JobID is the turn whose approval made the grant: the only turn a
	// turn grant decides calls in.
	JobID   string    `json:"job_id"`
	AgentID string    `json:"agent_id"`
	Tool    string    `json:"tool"`
	Match   ArgsMatch `json:"match,omitempty"`
	// CallID and ApprovalID name the approval that made the grant.
	CallID     string `json:"call_id"`
	ApprovalID string `json:"approval_id"`
	// Approver is who made it, and where that identity comes from.
	Approver        string     `json:"approver"`
	ApproverIssuer  string     `json:"approver_issuer,omitempty"`
	ApproverSubject string     `json:"approver_subject,omitempty"`
	Reason          string     `json:"reason,omitempty"`
	CreatedAt       time.Time  `json:"created_at"`
	ExpiresAt       *time.Time `json:"expires_at,omitempty"`
	// RevokedAt is when the grant was revoked, and RevokedBy by whom.
	RevokedAt        *time.Time `json:"revoked_at,omitempty"`
	RevokedBy        string     `json:"revoked_by,omitempty"`
	RevokedByIssuer  string     `json:"revoked_by_issuer,omitempty"`
	RevokedBySubject string     `json:"revoked_by_subject,omitempty"`
}

// GrantedCall is what a grant is checked against: a call whose tool's
// policy asks for a person.
type GrantedCall struct {
	TenantID, SessionID, JobID, AgentID, Tool string
	Args                                      json.RawMessage
}

// Active reports whether the grant decides calls at now: not revoked,
// not expired.
func (g Grant) Active(now time.Time) bool {
	return g.RevokedAt == nil && (g.ExpiresAt == nil || now.Before(*g.ExpiresAt))
}

// Covers reports whether the grant decides call at now: the same tenant,
// agent and tool, the session (scope session) or turn (scope turn), the
// arguments matching, and the grant active.
func (g Grant) Covers(c GrantedCall, now time.Time) bool {
	if !g.Active(now) || g.TenantID != c.TenantID || g.AgentID != c.AgentID || g.Tool != c.Tool {
		return false
	}
	switch g.Scope {
	case ScopeSession:
		if g.SessionID == "" || g.SessionID != c.SessionID {
			return false
		}
	case ScopeTurn:
		if g.JobID != c.JobID {
			return false
		}
	default:
		return false
	}
	return g.Match.Matches(c.Args)
}

// GrantQuery names the calls whose grants the store finds
// (store.Store.ActiveGrants): calls of one of Tools by AgentID in turn
// JobID of session SessionID.
type GrantQuery struct {
	TenantID, AgentID, SessionID, JobID string
	Tools                               []string
}
