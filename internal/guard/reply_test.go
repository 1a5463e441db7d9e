package guard

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestReply: every channel of a reply — reasoning, text, each call's
// arguments — is held back and checked as the text is; channels are
// released in the order the model wrote them; a rule broken on any
// channel stops them all; the final reply is checked where it is not what
// was released, and a reply that did not stream is checked whole.
func TestReply(t *testing.T) {
	reasoning := Channel{Kind: ChannelReasoning}
	text := Channel{Kind: ChannelText}
	call := Channel{Kind: ChannelArgs, CallID: "c1", Tool: "lookup"}
	call2 := Channel{Kind: ChannelArgs, CallID: "c2", Tool: "lookup"}
	type piece struct {
		c    Channel
		text string
	}
	tests := []struct {
		name    string
		guard   agent.OutputGuard
		pieces  []piece
		final   []Release // nil: what was added, joined
		release []Release
		tripped string
		on      Channel
	}{
		{"clean, in order", agent.OutputGuard{Deny: []string{"launch code"}},
			[]piece{{reasoning, "I think. So"}, {reasoning, " I am"}, {text, "Yes. "}, {text, "Bye"}, {call, `{"q": `}, {call, `"x"}`}},
			nil,
			[]Release{{reasoning, "I think."}, {reasoning, " So I am"}, {text, "Yes."}, {text, " Bye"}, {call, ""}, {call, `{"q": "x"}`}},
			"", Channel{}},
		{"deny in reasoning", agent.OutputGuard{Deny: []string{"launch code"}},
			[]piece{{reasoning, "Let me think. The launch "}, {reasoning, "code is 7. "}, {text, "It is 7."}},
			nil,
			[]Release{{reasoning, "Let me think."}},
			`deny "launch code"`, reasoning},
		{"deny in arguments", agent.OutputGuard{Deny: []string{"launch code"}},
			[]piece{{text, "Looking. "}, {call, `{"q": "the launch`}, {call, ` code"}`}},
			nil,
			[]Release{{text, "Looking."}, {text, " "}, {call, ""}},
			`deny "launch code"`, call},
		{"deny in the second call stops the first's", agent.OutputGuard{Deny: []string{"launch code"}},
			[]piece{{call, `{"q": "fine"}`}, {call2, `{"q": "launch code"}`}},
			nil,
			[]Release{{call, ""}, {call, `{"q": "fine"}`}, {call2, ""}},
			`deny "launch code"`, call2},
		{"an escape hides no phrase", agent.OutputGuard{Deny: []string{"launch code"}},
			[]piece{{call, `{"q": "launch\u0020code"}`}},
			nil,
			[]Release{{call, ""}},
			`deny "launch code"`, call},
		{"regex in reasoning", agent.OutputGuard{Regex: []string{`\b\d{3}-\d{2}-\d{4}\b`}},
			[]piece{{reasoning, "It is 123-45-6789."}, {text, "No."}},
			nil, nil, "regex[0]", reasoning},
		{"the schema is the answer's only", agent.OutputGuard{Schema: []byte(`{"type": "object"}`)},
			[]piece{{reasoning, "Thinking. Done."}, {text, `{"a": `}, {call, `{"q": 1}`}, {text, `1}`}},
			nil,
			[]Release{{reasoning, "Thinking."}, {reasoning, " Done."}, {call, ""}, {call, `{"q": 1}`}, {text, `{"a": 1}`}},
			"", Channel{}},
		{"the final reply where it differs", agent.OutputGuard{Deny: []string{"launch code"}},
			[]piece{{text, "Fine."}},
			[]Release{{text, "Fine."}, {call, `{"q": "launch code"}`}},
			[]Release{{text, "Fine."}},
			`deny "launch code"`, call},
		{"not streamed: checked whole", agent.OutputGuard{Deny: []string{"launch code"}},
			nil,
			[]Release{{reasoning, "The launch code. Is secret."}, {text, "No."}},
			nil,
			`deny "launch code"`, reasoning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := NewOutput(tt.guard)
			require.NoError(t, err)
			r := o.Reply()
			var got []Release
			final := tt.final
			joined := map[Channel]string{}
			for _, p := range tt.pieces {
				out, _ := r.Add(p.c, p.text)
				got = append(got, out...)
				if _, ok := joined[p.c]; !ok && tt.final == nil {
					final = append(final, Release{Channel: p.c})
				}
				joined[p.c] += p.text
			}
			for i := range final {
				if tt.final == nil {
					final[i].Text = joined[final[i].Channel]
				}
			}
			out, tripped := r.End(final)
			got = append(got, out...)
			require.Equal(t, tt.release, got)
			require.Equal(t, tt.tripped, tripped)
			rule, on := r.Tripped()
			require.Equal(t, tt.tripped, rule)
			require.Equal(t, tt.on, on)
			for _, c := range []Channel{reasoning, text, call, call2} {
				want := ""
				for _, rel := range tt.release {
					if rel.Channel == c {
						want += rel.Text
					}
				}
				require.Equal(t, want, r.Released(c), "released on %s", c)
			}
			more, again := r.Add(text, "More.")
			require.Empty(t, more, "nothing is released after a broken rule")
			require.Equal(t, tt.tripped, again)
		})
	}
}

// FuzzReply: however a reply is split over its channels, what a channel
// releases is a beginning of what the model wrote on it, and all of it
// once the reply ends without a broken rule; no release holds a denied
// phrase, whatever its case or the chunks it was split into.
func FuzzReply(f *testing.F) {
	f.Add("Let me think. The launch", " code is 7.", `{"q": "x"}`, "Fine. Bye.", uint8(3))
	f.Add("", "", `{"q": "launch\u0020code"}`, "", uint8(0))
	f.Add("a", "b", "c", "d", uint8(255))
	f.Fuzz(func(t *testing.T, r1, r2, args, text string, split uint8) {
		o, err := NewOutput(agent.OutputGuard{Deny: []string{"launch code"}})
		require.NoError(t, err)
		reply := o.Reply()
		reasoning, answer := Channel{Kind: ChannelReasoning}, Channel{Kind: ChannelText}
		call := Channel{Kind: ChannelArgs, CallID: "c1", Tool: "t"}
		cut := func(s string) []string {
			n := int(split)%4 + 1
			var out []string
			for len(s) > n {
				out = append(out, s[:n])
				s = s[n:]
			}
			return append(out, s)
		}
		written := map[Channel]string{}
		released := map[Channel]string{}
		var pieces []Release
		for _, c := range []struct {
			ch   Channel
			text string
		}{{reasoning, r1 + r2}, {answer, text}, {call, args}} {
			for _, p := range cut(c.text) {
				pieces = append(pieces, Release{c.ch, p})
			}
		}
		var out []Release
		for _, p := range pieces {
			written[p.Channel] += p.Text
			rel, _ := reply.Add(p.Channel, p.Text)
			out = append(out, rel...)
		}
		final := []Release{{reasoning, written[reasoning]}, {answer, written[answer]}, {call, written[call]}}
		rel, tripped := reply.End(final)
		out = append(out, rel...)
		for _, r := range out {
			released[r.Channel] += r.Text
			require.NotContains(t, strings.ToLower(r.Text), "launch code")
		}
		for _, ch := range []Channel{reasoning, answer, call} {
			require.True(t, strings.HasPrefix(written[ch], released[ch]), "%s: %q is not a beginning of %q", ch, released[ch], written[ch])
			require.Equal(t, released[ch], reply.Released(ch))
			if tripped == "" {
				require.Equal(t, written[ch], released[ch], "%s: all of it, once nothing broke a rule", ch)
			}
		}
		if tripped == "" {
			require.NotContains(t, strings.ToLower(written[reasoning]+"\n"+written[answer]+"\n"+argsText(written[call])), "launch code")
		}
	})
}
