package tools

import (
	"encoding/json"
	"slices"

	"github.com/agentflow/agentflow/internal/secrets"
)

// SecretRefs returns the secret references a tool's config names: the
// string value of every "secret" field, at any depth, that is a reference
// (a document pinned in a config may have fields of that name holding
// anything else; the kind's Build checks its own), sorted and without
// repeats. Every kind names its secrets in fields of that name
// (credentials, auth, headers, env), so that the catalog can check them
// all against what the tenant may name, whatever the kind; a new kind
// keeps to it.
func SecretRefs(config json.RawMessage) []string {
	var v any
	if len(config) == 0 || json.Unmarshal(config, &v) != nil {
		return nil
	}
	var refs []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				if s, ok := e.(string); ok && k == "secret" {
					if secrets.ValidateRef(s) == nil {
						refs = append(refs, s)
					}
					continue
				}
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	slices.Sort(refs)
	return slices.Compact(refs)
}
