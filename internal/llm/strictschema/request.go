package strictschema

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// For is the strict dialect of a model named "provider:model": OpenAI's
// for the OpenAI API and the servers that speak it (openai, ollama),
// Anthropic's for the Claude models that take strict tools; "" for a
// model that takes none (older Claude models, a name that is not
// "provider:model").
func For(model string) Dialect {
	provider, name, ok := strings.Cut(model, ":")
	if !ok || name == "" {
		return ""
	}
	switch provider {
	case "openai", "ollama":
		return OpenAI
	case "anthropic":
		if anthropicStrict(name) {
			return Anthropic
		}
	}
	return ""
}

// anthropicStrict reports whether a Claude model takes strict tools:
// Anthropic's structured outputs came with the 4.5 generation (and Opus
// 4.1), and a model before it refuses a strict tool. Names are
// claude-<family>-<major>[-<minor>][-<date>]; the older
// claude-<major>-<minor>-<family> naming is before it.
func anthropicStrict(name string) bool {
	parts := strings.Split(strings.TrimPrefix(name, "claude-"), "-")
	if len(parts) < 2 || parts[0] == "" || (parts[0][0] >= '0' && parts[0][0] <= '9') {
		return false
	}
	major, err := strconv.Atoi(parts[1])
	if err != nil {
		return false
	}
	minor := 0
	if len(parts) > 2 && len(parts[2]) <= 2 {
		minor, _ = strconv.Atoi(parts[2])
	}
	return major > 4 || major == 4 && (minor >= 5 || parts[0] == "opus" && minor == 1)
}

// NoDialect is the reason of every tool of a model that takes no strict
// tools.
const NoDialect = "the model's provider takes no strict tools"

// Schemas makes one request's tool schemas for model, in order: each
// made strict (Make) while the request's strict tools stay within the
// dialect's limits (Budget), else as written with the reason. An empty
// schema is a tool without parameters.
func Schemas(model string, schemas []json.RawMessage) []Result {
	d := For(model)
	b := NewBudget(d)
	out := make([]Result, len(schemas))
	for i, s := range schemas {
		if len(s) == 0 {
			s = emptyObject
		}
		if d == "" {
			out[i] = Result{Schema: s, Reason: NoDialect}
			continue
		}
		r := Make(d, s)
		if ok, why := b.Take(r); !ok {
			r = Result{Schema: s, Reason: why}
		}
		out[i] = r
	}
	return out
}

// Budget keeps one request's strict tools within its dialect's limits
// (Anthropic's; OpenAI's strict tools have none together).
type Budget struct {
	d                       Dialect
	tools, optional, unions int
}

// NewBudget is an empty request's budget.
func NewBudget(d Dialect) *Budget { return &Budget{d: d} }

// Take reports whether a tool made strict as r goes strict in the request
// beside those taken before, and counts it when it does; why says why
// not.
func (b *Budget) Take(r Result) (ok bool, why string) {
	switch {
	case !r.Strict:
		return false, r.Reason
	case b.d != Anthropic:
		return true, ""
	case b.tools+1 > AnthropicMaxStrictTools:
		return false, fmt.Sprintf("a request takes at most %d strict tools", AnthropicMaxStrictTools)
	case b.optional+r.Optional > AnthropicMaxOptional:
		return false, fmt.Sprintf("a request's strict tools take at most %d optional properties together", AnthropicMaxOptional)
	case b.unions+r.Unions > AnthropicMaxUnions:
		return false, fmt.Sprintf("a request's strict tools take at most %d properties with anyOf or several types together", AnthropicMaxUnions)
	}
	b.tools++
	b.optional += r.Optional
	b.unions += r.Unions
	return true, ""
}
