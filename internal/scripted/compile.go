package scripted

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
)

// ruleName is the name a rule is counted and reported under.
func ruleName(r Rule, i int) string {
	if r.Name != "" {
		return r.Name
	}
	return fmt.Sprintf("rules[%d]", i)
}

// compiledRule is a validated rule with its regular expressions.
type compiledRule struct {
	name                      string
	user, tool, system, model *regexp.Regexp
	hasImage                  *bool
	below                     map[string]float64
	reply                     Reply
	fault                     *Fault
}

func (s *Script) compile() ([]compiledRule, error) {
	if s.Pacing.ChunkWords < 0 || s.Pacing.DelayMS < 0 {
		return nil, errors.New("pacing: chunk_words and delay_ms must not be negative")
	}
	switch s.ReasoningField {
	case "", ReasoningContent, ReasoningPlain:
	default:
		return nil, fmt.Errorf("reasoning_field %q: want %q or %q", s.ReasoningField, ReasoningContent, ReasoningPlain)
	}
	if len(s.Rules) == 0 {
		return nil, errors.New("script has no rules")
	}
	if err := s.PromptCache.validate(); err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(s.Rules))
	out := make([]compiledRule, 0, len(s.Rules))
	for i, r := range s.Rules {
		name := ruleName(r, i)
		if seen[name] {
			return nil, fmt.Errorf("rule %q: duplicate name", name)
		}
		seen[name] = true
		c, err := compileRule(name, r)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// compileRule compiles the regular expressions of the rule named name and
// checks its reply and fault, so that a bad script fails when it is
// loaded, not at the first request that reaches the rule.
func compileRule(name string, r Rule) (compiledRule, error) {
	c := compiledRule{name: name, reply: r.Reply, fault: r.Fault, hasImage: r.When.HasImage, below: r.When.Below}
	for _, f := range []struct {
		field, expr string
		dst         **regexp.Regexp
	}{
		{"user", r.When.User, &c.user},
		{"tool", r.When.Tool, &c.tool},
		{"system", r.When.System, &c.system},
		{"model", r.When.Model, &c.model},
	} {
		if f.expr == "" {
			continue
		}
		re, err := regexp.Compile(f.expr)
		if err != nil {
			return compiledRule{}, fmt.Errorf("rule %q: when.%s: %w", name, f.field, err)
		}
		*f.dst = re
	}
	if err := c.checkBelow(); err != nil {
		return compiledRule{}, fmt.Errorf("rule %q: %w", name, err)
	}
	if err := checkReply(name, r.Reply); err != nil {
		return compiledRule{}, err
	}
	hasReply := r.Reply.Text != "" || len(r.Reply.ToolCalls) > 0
	if f := r.Fault; f != nil {
		if err := checkFault(name, f, hasReply); err != nil {
			return compiledRule{}, err
		}
	} else if !hasReply {
		return compiledRule{}, fmt.Errorf("rule %q: reply needs text or tool_calls", name)
	}
	return c, nil
}

// checkReply checks the reply of the rule named name: named tool calls,
// no negative delay, and a usage whose parts add up.
func checkReply(name string, rep Reply) error {
	for j, tc := range rep.ToolCalls {
		if strings.TrimSpace(tc.Name) == "" {
			return fmt.Errorf("rule %q: reply.tool_calls[%d].name is required", name, j)
		}
	}
	if rep.DelayMS < 0 {
		return fmt.Errorf("rule %q: reply.delay_ms must not be negative", name)
	}
	if u := rep.Usage; u != nil {
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || u.CachedTokens < 0 || u.ReasoningTokens < 0 || u.CacheWriteTokens < 0 {
			return fmt.Errorf("rule %q: reply.usage must not be negative", name)
		}
		if u.CachedTokens+u.CacheWriteTokens > u.PromptTokens {
			return fmt.Errorf("rule %q: reply.usage.cached_tokens and cache_write_tokens (%d) exceed prompt_tokens (%d)",
				name, u.CachedTokens+u.CacheWriteTokens, u.PromptTokens)
		}
		if u.ReasoningTokens > u.CompletionTokens {
			return fmt.Errorf("rule %q: reply.usage.reasoning_tokens (%d) exceeds completion_tokens (%d)", name, u.ReasoningTokens, u.CompletionTokens)
		}
	}
	return nil
}

// checkFault checks the fault of the rule named name: one kind of fault
// (status, cut or stall), values in range, and a reply wherever the fault
// needs one to cut or to give once its times are used up.
func checkFault(name string, f *Fault, hasReply bool) error {
	if f.Status == 0 && f.CutAfterChunks == 0 && !f.Stall {
		return fmt.Errorf("rule %q: fault needs status, cut_after_chunks or stall", name)
	}
	if f.Stall && (f.Status != 0 || f.CutAfterChunks != 0) {
		return fmt.Errorf("rule %q: fault.stall is exclusive with status and cut_after_chunks", name)
	}
	if f.Status != 0 && (f.Status < 400 || f.Status > 599) {
		return fmt.Errorf("rule %q: fault.status %d is not an HTTP error status", name, f.Status)
	}
	if len(f.Headers) > 0 && f.Status == 0 {
		return fmt.Errorf("rule %q: fault.headers needs a status to answer with", name)
	}
	for k, v := range f.Headers {
		if !validHeader(k, v) {
			return fmt.Errorf("rule %q: fault.headers: %q: %q is not a valid header", name, k, v)
		}
	}
	if f.Code != "" && f.Status == 0 {
		return fmt.Errorf("rule %q: fault.code needs a status to answer with", name)
	}
	if f.Status != 0 && f.CutAfterChunks != 0 {
		return fmt.Errorf("rule %q: fault.status and fault.cut_after_chunks are exclusive", name)
	}
	if f.CutAfterChunks < 0 || f.RetryAfterSec < 0 || f.Times < -1 {
		return fmt.Errorf("rule %q: fault values must not be negative (times may be -1)", name)
	}
	if f.CutAfterChunks > 0 && !hasReply {
		return fmt.Errorf("rule %q: fault.cut_after_chunks needs a reply to cut", name)
	}
	if f.Times != -1 && !hasReply {
		return fmt.Errorf("rule %q: reply is required unless fault.times is -1", name)
	}
	return nil
}

// checkBelow reports a when.below that names no group of the rule's
// regular expressions, or whose bound is not a number.
func (c *compiledRule) checkBelow() error {
	for _, name := range slices.Sorted(maps.Keys(c.below)) {
		if math.IsNaN(c.below[name]) {
			return fmt.Errorf("when.below.%s: the bound is not a number", name)
		}
		named := false
		for _, re := range []*regexp.Regexp{c.user, c.tool, c.system, c.model} {
			if re != nil && re.SubexpIndex(name) >= 0 {
				named = true
			}
		}
		if !named {
			return fmt.Errorf("when.below.%s: no regular expression of the rule has a group (?P<%s>…)", name, name)
		}
	}
	return nil
}

// validHeader reports whether name and value can be sent as an HTTP
// header: a token of a name, and a value without control characters.
func validHeader(name, value string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune("()<>@,;:\\\"/[]?={}", r) {
			return false
		}
	}
	for _, r := range value {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return false
		}
	}
	return true
}
