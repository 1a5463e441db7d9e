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
	// Injection screens what tools return for text that reads as
	// instructions to the model.
	Injection *InjectionGuard `json:"injection,omitempty"`
}

// InjectionGuard screens tool outputs (fetched pages, API answers, files)
// for prompt injection. Every tool output of the agent is then given to
// the model delimited as data; one that reads as instructions is, by
// Action, flagged (a note in the block says so), stripped of the lines
// that do, or blocked (withheld, and the model told why).
type InjectionGuard struct {
	Action string `json:"action,omitempty"` // flag (default) | strip | block
	// Patterns are more RE2 expressions that read as instructions, beside
	// the built-in ones.
	Patterns []string `json:"patterns,omitempty"`
}

// Injection actions.
const (
	InjectionFlag  = "flag"
	InjectionStrip = "strip"
	InjectionBlock = "block"
)

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
	injections := 0
	for i, g := range chain {
		switch {
		case (g.Output == nil) == (g.Injection == nil):
			return Errorf(CodeInvalid, "guardrails[%d]: give one guardrail: output or injection", i)
		case g.Injection != nil:
			injections++
			if injections > 1 {
				return Errorf(CodeInvalid, "guardrails[%d]: an agent has one injection guard", i)
			}
			if err := g.Injection.validate(); err != nil {
				return Errorf(CodeInvalid, "guardrails[%d].injection: %s", i, err.Error())
			}
			continue
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

func (g *InjectionGuard) validate() error {
	switch g.Action {
	case "", InjectionFlag, InjectionStrip, InjectionBlock:
	default:
		return fmt.Errorf("action %q: want %s, %s or %s", g.Action, InjectionFlag, InjectionStrip, InjectionBlock)
	}
	if len(g.Patterns) > maxGuardRules {
		return fmt.Errorf("%d patterns; the limit is %d", len(g.Patterns), maxGuardRules)
	}
	for i, p := range g.Patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return fmt.Errorf("patterns[%d]: %v", i, err)
		}
		if re.MatchString("") {
			return fmt.Errorf("patterns[%d] %q matches the empty text, so every output", i, p)
		}
	}
	return nil
}

// InjectionGuard returns the agent's injection guard, if its chain has one.
func (a Agent) InjectionGuard() *InjectionGuard {
	for _, g := range a.Guardrails {
		if g.Injection != nil {
			return g.Injection
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
