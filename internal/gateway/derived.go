package gateway

import (
	"context"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// The gateway's side of derived ids (agent.DerivedID): one check for
// every door. A job id or session id a client names is refused when it
// is reserved for the ids doors derive (clientIDs, in Prepare,
// SendMessageTo, CheckSession and ForkSession, which every door's starts
// and messages go through), unless the door handling the request derived
// it itself (WithDerived). And a person's sessions and turns — those a
// door derived for someone it speaks for, a Telegram chat's sender — are
// read only by the tenant's staff (ownPerson, OwnStream).

type derivedKey struct{}

// WithDerived returns ctx in which the ids are the request's door's own
// derivations (agent.DerivedID, agent.KeyedID), which its starts and
// messages may use; every other reserved id a request names is refused.
// Only a door calls it, for ids it made, never for one a client sent.
func WithDerived(ctx context.Context, ids ...string) context.Context {
	prev, _ := ctx.Value(derivedKey{}).([]string)
	return context.WithValue(ctx, derivedKey{}, append(slices.Clip(prev), ids...))
}

// clientIDs checks the ids a request names, given as field, id pairs: a
// reserved id the door did not derive is agent.CodeInvalid.
func clientIDs(ctx context.Context, fieldIDs ...string) error {
	own, _ := ctx.Value(derivedKey{}).([]string)
	for i := 0; i+1 < len(fieldIDs); i += 2 {
		if id := fieldIDs[i+1]; !slices.Contains(own, id) {
			if err := agent.CheckClientID(fieldIDs[i], id); err != nil {
				return err
			}
		}
	}
	return nil
}

// notifyID is the id part of a notify workflow id, <kind>/<tenant>/<id>:
// a client's turn sends its token batches to no workflow a door keeps
// under a derived id (a person's Conversation, say).
func notifyID(notify string) string {
	parts := strings.SplitN(notify, "/", 3)
	if len(parts) < 3 {
		return ""
	}
	return parts[2]
}

// Staff reports whether the token's holder is one of its tenant's staff
// (the admin or approver role), who read and act on the sessions and
// turns a door keeps for a person; a token with the user role alone does
// not.
func (t Token) Staff() bool { return t.Has(RoleAdmin) || t.Has(RoleApprover) }

// ownPerson refuses a person's session or turn (agent.OfPerson: what
// names a session id or job id) to a caller who is not staff, as if it
// did not exist.
func ownPerson(ctx context.Context, what, id string) error {
	if agent.OfPerson(id) && !CallerOf(ctx).Staff() {
		return agent.Errorf(agent.CodeNotFound, "%s %s not found", what, Clip(id))
	}
	return nil
}

// OwnStream refuses stream ids of other tenants, and a person's turns
// (turn/<tenant>/<job> whose job agent.OfPerson names) to a caller who
// is not staff, as if they did not exist: every door's read of a turn by
// its id comes through here.
func OwnStream(ctx context.Context, streamID string) error {
	tenant, err := agent.StreamTenant(streamID)
	if err != nil {
		return err
	}
	job := strings.TrimPrefix(streamID, contract.TurnWorkflowID(tenant, ""))
	if tenant != TenantOf(ctx) || agent.OfPerson(job) && !CallerOf(ctx).Staff() {
		return agent.Errorf(agent.CodeNotFound, "stream %q not found", streamID)
	}
	return nil
}
