// Package redact applies a tenant's PII redaction (internal/guard) where
// text enters its turns, against the tenant's vault in the store: the
// gateway on every text a request carries (agent.TurnRequest.Texts) and
// on answers, before a turn or a conversation hears of them, the tool
// runtime on what tools return, and on the arguments of the tools the
// tenant lets see the real values (Reveal). One home, so that every
// channel and tool kind follows the same rule.
//
// It imports only the domain and internal/guard: it must not import the
// store, the gateway or the tools, which call it.
package redact

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/guard"
)

// Store keeps the vault's sealed values (store.Store).
type Store interface {
	Vault(ctx context.Context, tenantID, scope string) (map[string][]byte, error)
	PutVault(ctx context.Context, tenantID, scope string, sealed map[string][]byte) error
}

// Vault reads and writes a tenant's placeholders.
type Vault struct {
	store  Store
	sealer *guard.Sealer // nil: no vault key, so no placeholder mode
}

// New returns a vault over st, sealed with the operator's key (nil: the
// deployment has none, and placeholder redaction is refused).
func New(st Store, sealer *guard.Sealer) *Vault { return &Vault{store: st, sealer: sealer} }

// Scope is where a turn's placeholders live: its session's, so that a
// later turn of the session can use them, else its own.
func Scope(sessionID, jobID string) string {
	if sessionID != "" {
		return "session:" + sessionID
	}
	return "job:" + jobID
}

// Policy is a tenant's redaction: its redactor and settings.
type Policy struct {
	Redactor *guard.Redactor
	Config   guard.Config
}

// maxTries bounds the redactions of one call that lose a placeholder to
// another writer of the same scope.
const maxTries = 3

// Texts redacts texts in place by the tenant's policy (none: nothing) and
// returns how many values it replaced. In placeholder mode the values
// are kept in the scope's vault; a placeholder another writer took first
// makes it redact again with the vault as it is then.
func (v *Vault) Texts(ctx context.Context, p Policy, tenantID, scope string, texts ...*string) (int, error) {
	if p.Redactor == nil {
		return 0, nil
	}
	if p.Config.Mode != guard.ModePlaceholder {
		n := 0
		for _, t := range texts {
			var found []guard.Finding
			*t, found = p.Redactor.Redact(*t, nil)
			n += len(found)
		}
		return n, nil
	}
	if v == nil || v.sealer == nil {
		return 0, agent.Errorf(agent.CodeUnavailable,
			"the tenant redacts PII into placeholders, which needs the operator's vault key (AGENTFLOW_VAULT_KEY); nothing was sent")
	}
	for range maxTries {
		vault, err := v.open(ctx, tenantID, scope)
		if err != nil {
			return 0, err
		}
		before := vault.Entries()
		out := make([]string, len(texts))
		n := 0
		for i, t := range texts {
			var found []guard.Finding
			out[i], found = p.Redactor.Redact(*t, vault)
			n += len(found)
		}
		added := map[string][]byte{}
		for ph, val := range vault.Entries() {
			if _, ok := before[ph]; !ok {
				added[ph] = v.sealer.Seal(place(tenantID, scope, ph), val)
			}
		}
		if len(added) == 0 {
			for i, t := range texts {
				*t = out[i]
			}
			return n, nil
		}
		if err := v.store.PutVault(ctx, tenantID, scope, added); err != nil {
			return 0, err
		}
		// Another writer of the scope may have taken a placeholder first.
		stored, err := v.open(ctx, tenantID, scope)
		if err != nil {
			return 0, err
		}
		mine := vault.Entries()
		if maps.Equal(pick(stored.Entries(), added), pick(mine, added)) {
			for i, t := range texts {
				*t = out[i]
			}
			return n, nil
		}
	}
	return 0, agent.Errorf(agent.CodeUnavailable, "the PII vault of %s is busy; try again", scope)
}

// Reveal returns text with the scope's placeholders replaced by their
// values.
func (v *Vault) Reveal(ctx context.Context, tenantID, scope, text string) (string, error) {
	if v == nil || v.sealer == nil {
		return text, nil
	}
	vault, err := v.open(ctx, tenantID, scope)
	if err != nil {
		return "", err
	}
	return vault.Reveal(text), nil
}

func (v *Vault) open(ctx context.Context, tenantID, scope string) (*guard.Vault, error) {
	sealed, err := v.store.Vault(ctx, tenantID, scope)
	if err != nil {
		return nil, err
	}
	out := guard.NewVault()
	for ph, s := range sealed {
		val, err := v.sealer.Open(place(tenantID, scope, ph), s)
		if err != nil {
			return nil, agent.Errorf(agent.CodeInternal, "pii vault %s: %s: %v (was the vault key changed?)", scope, ph, err)
		}
		out.Put(ph, val)
	}
	return out, nil
}

func place(tenantID, scope, placeholder string) string {
	return fmt.Sprintf("%s\x00%s\x00%s", tenantID, scope, placeholder)
}

func pick(m map[string]string, keys map[string][]byte) map[string]string {
	out := map[string]string{}
	for k := range keys {
		out[k] = m[k]
	}
	return out
}

// JSON redacts the string values of a JSON document in place (object
// keys, numbers and the rest are kept, so it stays the same shape), by
// Texts, and returns it; a document that does not decode is returned as
// it is.
func (v *Vault) JSON(ctx context.Context, p Policy, tenantID, scope string, raw json.RawMessage) (json.RawMessage, int, error) {
	if p.Redactor == nil || len(raw) == 0 {
		return raw, 0, nil
	}
	doc, err := agent.UnmarshalNumbers(raw)
	if err != nil {
		return raw, 0, nil
	}
	var texts []*string
	var walk func(x any) any
	walk = func(x any) any {
		switch t := x.(type) {
		case string:
			s := t
			texts = append(texts, &s)
			return &s
		case map[string]any:
			for k, e := range t {
				t[k] = walk(e)
			}
		case []any:
			for i, e := range t {
				t[i] = walk(e)
			}
		}
		return x
	}
	doc = walk(doc)
	n, err := v.Texts(ctx, p, tenantID, scope, texts...)
	if err != nil || n == 0 {
		return raw, 0, err
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, 0, fmt.Errorf("redact json: %w", err)
	}
	return out, n, nil
}
