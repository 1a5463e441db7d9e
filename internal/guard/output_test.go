package guard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestOutputStream: text is released a sentence at a time once the
// answer so far breaks no rule; a rule broken mid-way drops what was held
// and releases nothing more, even a phrase split across chunks.
func TestOutputStream(t *testing.T) {
	o, err := NewOutput(agent.OutputGuard{Deny: []string{"launch code"}, Regex: []string{`\b\d{3}-\d{2}-\d{4}\b`}})
	require.NoError(t, err)
	tests := []struct {
		name    string
		chunks  []string
		release []string
		tripped string
	}{
		{"clean", []string{"Hello ", "there. How ", "are you?"}, []string{"Hello there.", " How are you?"}, ""},
		{"deny across chunks", []string{"Fine. The launch ", "code is 1234. Bye."}, []string{"Fine."}, `deny "launch code"`},
		{"regex", []string{"Your number is 123-45-", "6789. Ok."}, nil, "regex[0]"},
		{"line breaks end windows", []string{"one\ntwo", "\nthree"}, []string{"one\n", "two\n", "three"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := o.Stream()
			var got []string
			tripped := ""
			for _, c := range tt.chunks {
				r, tr := s.Add(c)
				if r != "" {
					got = append(got, r)
				}
				if tr != "" {
					tripped = tr
				}
			}
			r, tr := s.Flush()
			if r != "" {
				got = append(got, r)
			}
			if tr != "" {
				tripped = tr
			}
			require.Equal(t, tt.release, got)
			require.Equal(t, tt.tripped, tripped)
			require.Equal(t, strings.Join(tt.release, ""), s.Released())
		})
	}
}

// TestOutputWindowTokens: a window of tokens releases at the last space
// once it is full.
func TestOutputWindowTokens(t *testing.T) {
	o, err := NewOutput(agent.OutputGuard{WindowTokens: 2, Deny: []string{"x-ray"}})
	require.NoError(t, err)
	s := o.Stream()
	r, _ := s.Add("abc def")
	require.Empty(t, r, "7 bytes: under a window of 8")
	r, _ = s.Add(" ghi")
	require.Equal(t, "abc def ", r)
	r, _ = s.Flush()
	require.Equal(t, "ghi", r)
}

func TestValidateGuardrails(t *testing.T) {
	tests := []struct {
		name  string
		chain []agent.Guardrail
		want  string
	}{
		{"empty link", []agent.Guardrail{{}}, "guardrails[0]: give one guardrail"},
		{"no rules", []agent.Guardrail{{Output: &agent.OutputGuard{}}}, "give deny, regex, schema or judge"},
		{"bad regex", []agent.Guardrail{{Output: &agent.OutputGuard{Regex: []string{"("}}}}, "regex[0]: error parsing regexp"},
		{"empty match", []agent.Guardrail{{Output: &agent.OutputGuard{Regex: []string{"a?"}}}}, "matches the empty text"},
		{"two output guards", []agent.Guardrail{{Output: &agent.OutputGuard{Deny: []string{"a"}}}, {Output: &agent.OutputGuard{Deny: []string{"b"}}}},
			"one output guard"},
		{"window", []agent.Guardrail{{Output: &agent.OutputGuard{WindowTokens: -1, Deny: []string{"a"}}}}, "window_tokens is -1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorContains(t, agent.ValidateGuardrails(tt.chain), tt.want)
		})
	}
}
