package governor

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// EnvLimits is the variable that declares the limits (ParseLimits).
const EnvLimits = "AGENTFLOW_MODEL_LIMITS"

// Names of the limits in EnvLimits.
const (
	LimitRequests     = agent.LimitRequests
	LimitInputTokens  = agent.LimitInputTokens
	LimitOutputTokens = agent.LimitOutputTokens
	LimitConcurrent   = agent.LimitConcurrent
)

// Limits are the governed keys and their limits. The zero value governs
// nothing.
type Limits struct {
	keys map[string]store.GovernorLimits
}

// ParseLimits reads EnvLimits: entries separated by ";", each a key, "=",
// and its limits separated by ",":
//
//	openai=requests:500/1m,input_tokens:200000/1m,output_tokens:50000/1m,concurrent:20;anthropic:claude-sonnet-4-5=requests:50
//
// A key is a provider (every model of it) or provider:model (that model,
// which then answers to its own entry only); its limits are read by
// agent.ParseModelLimits, which says what each may be. An empty string
// governs nothing.
func ParseLimits(s string) (Limits, error) {
	out := Limits{keys: map[string]store.GovernorLimits{}}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for entry := range strings.SplitSeq(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		key, list, ok := strings.Cut(entry, "=")
		key = strings.TrimSpace(key)
		if !ok || strings.TrimSpace(list) == "" {
			return Limits{}, fmt.Errorf("%s: entry %q: want <provider>[:<model>]=<limit>[,<limit>…]", EnvLimits, entry)
		}
		if err := agent.CheckModelKey(key); err != nil {
			return Limits{}, fmt.Errorf("%s: %w", EnvLimits, err)
		}
		if _, dup := out.keys[key]; dup {
			return Limits{}, fmt.Errorf("%s: key %q is declared twice", EnvLimits, key)
		}
		lim, err := agent.ParseModelLimits(list)
		if err != nil {
			return Limits{}, fmt.Errorf("%s: key %q: %w", EnvLimits, key, err)
		}
		out.keys[key] = lim
	}
	return out, nil
}

// For is the key that governs calls of model ("provider:model") and its
// limits: the model's own entry, else its provider's; ok is false when
// neither is declared.
func (l Limits) For(model string) (key string, lim store.GovernorLimits, ok bool) {
	return agent.ModelLimitsFor(l.keys, model)
}

// Map is the governed keys and their limits: the operator's, which a
// tenant's catalog may only narrow (store.Options.ModelLimits).
func (l Limits) Map() map[string]agent.ModelLimits { return maps.Clone(l.keys) }

// Empty reports whether l governs nothing.
func (l Limits) Empty() bool { return len(l.keys) == 0 }

// Keys are the governed keys, sorted.
func (l Limits) Keys() []string { return slices.Sorted(maps.Keys(l.keys)) }
