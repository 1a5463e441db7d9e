package agent

import (
	"fmt"
	"regexp"
	"strings"
)

// Guardrail is one link of an agent's guardrail chain (the catalog's
// guardrails list, in order, versioned with the agent): exactly one kind
// is set.
type Guardrail struct {
	// Output checks the answer as it streams, before clients see it.
	Output *OutputGuard `json:"output,omitempty"`
}

// OutputGuard holds the streamed answer back a window at a time — a
// sentence, or WindowTokens tokens — and releases a window to clients
// only once the answer so far breaks none of its rules. An answer that
// breaks one is cut there: the held text is never sent, the refusal is
// sent in its place, and the turn ends GuardrailTripped.
type OutputGuard struct {
	// WindowTokens, when set, releases the answer every so many tokens
	// (estimated at four bytes each) instead of at each sentence's end.
	WindowTokens int `json:"window_tokens,omitempty"`
	// Deny are words and phrases the answer must not contain (case is
	// ignored).
	Deny []string `json:"deny,omitempty"`
	// Regex are RE2 expressions the answer must not match.
	Regex []string `json:"regex,omitempty"`
	// Refusal is what clients get instead of what was held; default
	// DefaultRefusal.
	Refusal string `json:"refusal,omitempty"`
}

// DefaultRefusal is an output guard's refusal when the agent gives none.
const DefaultRefusal = "I can't help with that."

// Output guard bounds.
const (
	maxGuardRules       = 100
	maxGuardWindow      = 2000
	maxGuardRefusal     = 1000
	maxGuardrails       = 20
	maxGuardPhraseBytes = 500
)

// ValidateGuardrails checks an agent's chain and names what is wrong.
func ValidateGuardrails(chain []Guardrail) error {
	if len(chain) > maxGuardrails {
		return Errorf(CodeInvalid, "guardrails: %d; the limit is %d", len(chain), maxGuardrails)
	}
	outputs := 0
	for i, g := range chain {
		if g.Output == nil {
			return Errorf(CodeInvalid, "guardrails[%d]: give one guardrail: output", i)
		}
		outputs++
		if outputs > 1 {
			return Errorf(CodeInvalid, "guardrails[%d]: an agent has one output guard; put its rules together", i)
		}
		if err := g.Output.validate(); err != nil {
			return Errorf(CodeInvalid, "guardrails[%d].output: %s", i, err.Error())
		}
	}
	return nil
}

func (o *OutputGuard) validate() error {
	switch {
	case o.WindowTokens < 0 || o.WindowTokens > maxGuardWindow:
		return fmt.Errorf("window_tokens is %d; want 1 to %d, or none for a sentence", o.WindowTokens, maxGuardWindow)
	case len(o.Deny)+len(o.Regex) == 0:
		return fmt.Errorf("give deny or regex: a guard with no rule holds the answer back for nothing")
	case len(o.Deny)+len(o.Regex) > maxGuardRules:
		return fmt.Errorf("%d rules; the limit is %d", len(o.Deny)+len(o.Regex), maxGuardRules)
	case len(o.Refusal) > maxGuardRefusal:
		return fmt.Errorf("refusal is longer than %d bytes", maxGuardRefusal)
	}
	for i, d := range o.Deny {
		if strings.TrimSpace(d) == "" || len(d) > maxGuardPhraseBytes {
			return fmt.Errorf("deny[%d]: want a word or phrase of 1 to %d bytes", i, maxGuardPhraseBytes)
		}
	}
	for i, r := range o.Regex {
		re, err := regexp.Compile(r)
		if err != nil {
			return fmt.Errorf("regex[%d]: %v", i, err)
		}
		if re.MatchString("") {
			return fmt.Errorf("regex[%d] %q matches the empty text, so every answer", i, r)
		}
	}
	return nil
}

// OutputGuard returns the agent's output guard, if its chain has one.
func (a Agent) OutputGuard() *OutputGuard {
	for _, g := range a.Guardrails {
		if g.Output != nil {
			return g.Output
		}
	}
	return nil
}
