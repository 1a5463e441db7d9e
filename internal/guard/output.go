package guard

import (
	"cmp"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/words"
)

// Output checks an answer by an agent's output guard.
type Output struct {
	deny  []string // lower case
	regex []*regexp.Regexp
	// schema, when set, holds the whole answer, checked at its end.
	schema  *structured.Schema
	window  int // bytes; 0: a sentence
	Refusal string
	// Extra are more checks (the agent's HTTP guards), run after the
	// rules on what passed them: each returns the rule broken, or "".
	Extra []func(text string) string
}

// NewOutput compiles an output guard (which must validate).
func NewOutput(g agent.OutputGuard) (*Output, error) {
	o := &Output{window: 4 * g.WindowTokens, Refusal: g.Refusal}
	o.Refusal = cmp.Or(o.Refusal, agent.DefaultRefusal)
	for _, d := range g.Deny {
		o.deny = append(o.deny, strings.ToLower(d))
	}
	for i, r := range g.Regex {
		re, err := regexp.Compile(r)
		if err != nil {
			return nil, fmt.Errorf("regex[%d]: %w", i, err)
		}
		o.regex = append(o.regex, re)
	}
	if len(g.Schema) > 0 {
		s, err := structured.Compile(g.Schema)
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		o.schema = s
	}
	return o, nil
}

// Check returns the rule the answer's text breaks ("" for none): a deny
// phrase as `deny "phrase"`, a regex as `regex[i]`.
func (o *Output) Check(text string) string { return o.CheckChannel(ChannelText, text) }

// CheckChannel returns the rule a channel's text breaks ("" for none).
// Every channel is held to the same rules, phrases, expressions and
// extra checks; only the answer's text to the schema, which describes
// the answer. A tool call's arguments are read as the model wrote them
// and, once they are whole JSON, with their strings decoded, so that an
// escape (\u0020) hides no phrase.
func (o *Output) CheckChannel(kind ChannelKind, text string) string {
	if kind == ChannelArgs {
		text = argsText(text)
	}
	lower := strings.ToLower(text)
	for _, d := range o.deny {
		if strings.Contains(lower, d) {
			return fmt.Sprintf("deny %q", d)
		}
	}
	for i, re := range o.regex {
		if re.MatchString(text) {
			return fmt.Sprintf("regex[%d]", i)
		}
	}
	if o.schema != nil && kind == ChannelText {
		// Only the whole answer is checked: windows hold it all (cut).
		if _, problems := o.schema.Check(text); len(problems) > 0 {
			return "schema: " + words.Clip(problems.String(), 300)
		}
	}
	for _, check := range o.Extra {
		if rule := check(text); rule != "" {
			return rule
		}
	}
	return ""
}

// Stream holds an answer back as it streams, a window at a time, and
// releases each window once the answer so far breaks no rule. It is not
// safe for concurrent use.
type Stream struct {
	o        *Output
	kind     ChannelKind
	released strings.Builder
	held     strings.Builder
	tripped  string
}

// Stream starts holding an answer's text.
func (o *Output) Stream() *Stream { return o.stream(ChannelText) }

func (o *Output) stream(kind ChannelKind) *Stream { return &Stream{o: o, kind: kind} }

// Add takes the next text of the answer and returns the text to release
// now (it may be ""), or the rule the answer broke: then nothing more is
// released, and what was held is dropped.
func (s *Stream) Add(text string) (release, tripped string) {
	if s.tripped != "" {
		return "", s.tripped
	}
	s.held.WriteString(text)
	cut := s.cut()
	if cut == 0 {
		return "", ""
	}
	return s.release(cut)
}

// Flush checks and releases what is held at the end of the answer.
func (s *Stream) Flush() (release, tripped string) {
	if s.tripped != "" {
		return "", s.tripped
	}
	if s.held.Len() == 0 {
		return "", ""
	}
	return s.release(s.held.Len())
}

// Released is the text released so far.
func (s *Stream) Released() string { return s.released.String() }

// release checks the answer through the first n bytes held, and releases
// them when it breaks no rule. The whole answer so far is checked, so
// that a phrase across two windows is caught.
func (s *Stream) release(n int) (string, string) {
	held := s.held.String()
	window := held[:n]
	if rule := s.o.CheckChannel(s.kind, s.released.String()+window); rule != "" {
		s.tripped = rule
		s.held.Reset()
		return "", rule
	}
	s.released.WriteString(window)
	s.held.Reset()
	s.held.WriteString(held[n:])
	return window, ""
}

// cut is how much of what is held is a complete window: through the last
// sentence end (., ! or ? before a space, or a line break), or — with a
// window of tokens — through the last space once the window is full.
func (s *Stream) cut() int {
	if s.whole() {
		return 0 // a schema reads the whole answer
	}
	held := s.held.String()
	if s.o.window > 0 {
		if len(held) < s.o.window {
			return 0
		}
		if i := strings.LastIndexFunc(held, unicode.IsSpace); i > 0 {
			return i + 1
		}
		return len(held)
	}
	end := 0
	for i := 0; i < len(held); i++ {
		switch held[i] {
		case '\n':
			end = i + 1
		case '.', '!', '?':
			if i+1 < len(held) && (held[i+1] == ' ' || held[i+1] == '\n') {
				end = i + 1
			}
		}
	}
	return end
}

// whole reports whether the stream holds its text to the end: an answer
// a schema describes.
func (s *Stream) whole() bool { return s.o.schema != nil && s.kind == ChannelText }

// holds reports whether the stream holds text not yet released.
func (s *Stream) holds() bool { return s.held.Len() > 0 }
