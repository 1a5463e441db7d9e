package guard

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ChannelKind says what a channel of a reply carries.
type ChannelKind string

// The channels of a model's reply, as the turn's log streams them.
const (
	ChannelText      ChannelKind = "text"      // the answer's text
	ChannelReasoning ChannelKind = "reasoning" // what the model thought before it
	ChannelArgs      ChannelKind = "tool_args" // one tool call's JSON arguments
)

// Channel is one channel of a reply: its text, its reasoning, or the
// arguments of one of its tool calls.
type Channel struct {
	Kind ChannelKind
	// CallID and Tool name the call of a ChannelArgs channel.
	CallID string
	Tool   string
}

// String names the channel for a message: "answer", "reasoning",
// `arguments of call "c1" to "lookup"`.
func (c Channel) String() string {
	switch c.Kind {
	case ChannelReasoning:
		return "reasoning"
	case ChannelArgs:
		return fmt.Sprintf("arguments of call %q to %q", c.CallID, c.Tool)
	}
	return "answer"
}

// Release is text a Reply lets through on one of its channels. A
// ChannelArgs release with no text announces its call.
type Release struct {
	Channel
	Text string
}

// Reply holds back every channel of a streamed reply — its text, its
// reasoning and each tool call's arguments — a window at a time, as
// Stream holds back an answer, each window checked with the whole of its
// channel so far (Output.CheckChannel). Channels are released in the
// order the model wrote them: a piece on another channel than the piece
// before closes that channel's window, which is checked and released
// first. A rule broken on any channel stops them all: what was held is
// dropped, and nothing more is released on any. It is not safe for
// concurrent use.
type Reply struct {
	o       *Output
	streams map[Channel]*Stream
	order   []Channel // as the model opened them
	last    Channel   // of the last piece; zero before the first
	tripped string
	on      Channel // the channel that broke the rule
}

// Reply starts holding a reply.
func (o *Output) Reply() *Reply { return &Reply{o: o, streams: map[Channel]*Stream{}} }

// Add takes the next piece of the reply, on channel c, and returns what
// to release now, in order (the first piece of a call's arguments
// announces the call, even with no text), and the rule the reply broke
// ("" for none): then what it returns passed before the rule was broken,
// and nothing more is released.
func (r *Reply) Add(c Channel, text string) ([]Release, string) {
	if r.tripped != "" {
		return nil, r.tripped
	}
	var out []Release
	if r.last != c && r.last != (Channel{}) {
		// The model moved on: the last channel's window is complete.
		if s := r.streams[r.last]; s.holds() && !s.whole() {
			if out = r.release(out, r.last, s.Flush); r.tripped != "" {
				return out, r.tripped
			}
		}
	}
	r.last = c
	s, ok := r.streams[c]
	if !ok {
		s = r.o.stream(c.Kind)
		r.streams[c] = s
		r.order = append(r.order, c)
		if c.Kind == ChannelArgs {
			out = append(out, Release{Channel: c})
		}
	}
	out = r.release(out, c, func() (string, string) { return s.Add(text) })
	return out, r.tripped
}

// End ends the reply: what is still held is checked and released, then
// each channel's final text — what is stored, and run — is checked where
// it is not what was released: a provider may assemble a reply otherwise
// than it streamed it, and a reply that was not streamed is checked here
// whole, one channel after the other. It returns what to release now,
// and the rule the reply broke, as Add does.
func (r *Reply) End(final []Release) ([]Release, string) {
	if r.tripped != "" {
		return nil, r.tripped
	}
	var out []Release
	for _, c := range r.order {
		if out = r.release(out, c, r.streams[c].Flush); r.tripped != "" {
			return out, r.tripped
		}
	}
	for _, f := range final {
		if f.Text == r.Released(f.Channel) {
			continue
		}
		if rule := r.o.CheckChannel(f.Kind, f.Text); rule != "" {
			r.tripped, r.on = rule, f.Channel
			return out, rule
		}
	}
	return out, ""
}

// Released is the text released so far on channel c.
func (r *Reply) Released(c Channel) string {
	if s, ok := r.streams[c]; ok {
		return s.Released()
	}
	return ""
}

// Tripped is the rule the reply broke and the channel it broke it on (""
// for none).
func (r *Reply) Tripped() (string, Channel) { return r.tripped, r.on }

// release runs a step of channel c's stream and adds what it releases
// to out; a broken rule trips the reply.
func (r *Reply) release(out []Release, c Channel, step func() (string, string)) []Release {
	text, rule := step()
	if rule != "" {
		r.tripped, r.on = rule, c
		return out
	}
	if text != "" {
		out = append(out, Release{Channel: c, Text: text})
	}
	return out
}

// argsText is what a call's arguments say: as the model wrote them, then,
// when they are whole JSON, every key and string in them decoded, one a
// line (keys in order, so that the text is the same for the same
// arguments).
func argsText(raw string) string {
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return raw
	}
	var b strings.Builder
	b.WriteString(raw)
	var walk func(any)
	walk = func(v any) {
		switch t := v.(type) {
		case string:
			b.WriteString("\n")
			b.WriteString(t)
		case []any:
			for _, e := range t {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(k)
				walk(t[k])
			}
		}
	}
	walk(v)
	return b.String()
}
