package scripted

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"bad regexp names the rule", `rules: [{name: calc, when: {user: '(unclosed'}, reply: {text: x}}]`, `rule "calc": when.user`},
		{"unnamed rule is named by index", `rules: [{reply: {text: a}}, {when: {tool: '['}, reply: {text: x}}]`, `rule "rules[1]": when.tool`},
		{"unknown field", `rules: [{when: {usr: 'x'}, reply: {text: x}}]`, `field usr not found`},
		{"no rules", `pacing: {chunk_words: 2}`, `script has no rules`},
		{"no reply", `rules: [{name: r, when: {user: x}}]`, `rule "r": reply needs text or tool_calls`},
		{"fault needs a reply unless always", `rules: [{name: r, fault: {status: 500, times: 2}}]`, `reply is required unless fault.times is -1`},
		{"fault needs a kind", `rules: [{name: r, fault: {times: 1}, reply: {text: x}}]`, `fault needs status, cut_after_chunks or stall`},
		{"fault status must be an error", `rules: [{name: r, fault: {status: 200}, reply: {text: x}}]`, `fault.status 200 is not an HTTP error status`},
		{"tool call needs a name", `rules: [{name: r, reply: {tool_calls: [{arguments: '{}'}]}}]`, `reply.tool_calls[0].name is required`},
		{"duplicate names", `rules: [{name: r, reply: {text: a}}, {name: r, reply: {text: b}}]`, `rule "r": duplicate name`},
		{"negative pacing", `{pacing: {delay_ms: -1}, rules: [{reply: {text: a}}]}`, `must not be negative`},
		{"unknown reasoning field", `{reasoning_field: thinking, rules: [{reply: {text: a}}]}`, `reasoning_field "thinking": want "reasoning_content" or "reasoning"`},
		{"reasoning is no reply", `rules: [{name: r, reply: {reasoning: 'hmm'}}]`, `rule "r": reply needs text or tool_calls`},
		{"not yaml", `rules: [`, `parse script`},
		{"fault headers need a status", `rules: [{name: r, fault: {cut_after_chunks: 1, headers: {X-A: b}}, reply: {text: x}}]`, `rule "r": fault.headers needs a status`},
		{"a bad header name", `rules: [{name: r, fault: {status: 429, headers: {"X A": b}}, reply: {text: x}}]`, `rule "r": fault.headers: "X A"`},
		{"cache tokens beyond the prompt", `rules: [{name: r, reply: {text: x, usage: {prompt_tokens: 10, cached_tokens: 6, cache_write_tokens: 5}}}]`,
			`rule "r": reply.usage.cached_tokens and cache_write_tokens (11) exceed prompt_tokens (10)`},
		{"has_image is a boolean", `rules: [{name: r, when: {has_image: maybe}, reply: {text: x}}]`, `parse script`},
		{"a bad header value", `rules: [{name: r, fault: {status: 429, headers: {X-A: "a\nb"}}, reply: {text: x}}]`, `is not a valid header`},
		{"below names a group", `rules: [{name: r, when: {tool: '(?P<n>[0-9]+)', below: {m: 3}}, reply: {text: x}}]`,
			`rule "r": when.below.m: no regular expression of the rule has a group (?P<m>…)`},
		{"below needs a regexp", `rules: [{name: r, when: {below: {n: 3}}, reply: {text: x}}]`, `rule "r": when.below.n`},
		{"below is a number", `rules: [{name: r, when: {tool: '(?P<n>[0-9]+)', below: {n: many}}, reply: {text: x}}]`, `parse script`},
		{"a negative prompt cache", `{prompt_cache: {block_tokens: -1}, rules: [{reply: {text: a}}]}`, `prompt_cache: min_tokens, block_tokens and max_blocks must not be negative`},
		{"a prompt cache beyond bounds", `{prompt_cache: {block_tokens: 4611686018427387904}, rules: [{reply: {text: a}}]}`, `prompt_cache: min_tokens and block_tokens must be at most`},
		{"an unknown prompt cache field", `{prompt_cache: {ttl: 5}, rules: [{reply: {text: a}}]}`, `field ttl not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			require.Error(t, err)
			require.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestParseValid(t *testing.T) {
	s, err := Parse([]byte(`
pacing: {chunk_words: 3, delay_ms: 5}
rules:
  - name: always-broken
    when: {user: bad}
    fault: {status: 400, times: -1}
  - when: {}
    reply:
      text: hi
      usage: {prompt_tokens: 7, completion_tokens: 2}
`))
	require.NoError(t, err)
	require.Equal(t, Pacing{ChunkWords: 3, DelayMS: 5}, s.Pacing)
	require.Len(t, s.Rules, 2)
	require.Equal(t, -1, s.Rules[0].Fault.Times)
	require.Equal(t, &Usage{PromptTokens: 7, CompletionTokens: 2}, s.Rules[1].Reply.Usage)
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	require.NoError(t, os.WriteFile(good, DemoYAML(), 0o600))
	s, err := LoadFile(good)
	require.NoError(t, err)
	require.Equal(t, Demo(), s)

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(`rules: [{name: x, when: {user: '('}, reply: {text: a}}]`), 0o600))
	_, err = LoadFile(bad)
	require.ErrorContains(t, err, bad)
	require.ErrorContains(t, err, `rule "x"`)

	_, err = LoadFile(filepath.Join(dir, "missing.yaml"))
	require.ErrorContains(t, err, "read script")
}

func TestMatch(t *testing.T) {
	s, err := Parse([]byte(`
rules:
  - name: model
    when: {model: '^special$', user: '.'}
    reply: {text: m}
  - name: system
    when: {system: 'pirate', user: '.'}
    reply: {text: s}
  - name: after-tool
    when: {user: 'sum (?P<a>\d+)', tool: '(\d+)'}
    reply: {text: t}
  - name: image
    when: {has_image: true, user: 'look'}
    reply: {text: i}
  - name: no-image
    when: {has_image: false, user: 'look'}
    reply: {text: n}
  - name: image-then-tool
    when: {has_image: true, tool: '.'}
    reply: {text: it}
  - name: count-on
    when: {tool: '^(?P<n>-?[0-9.]+)$', below: {n: 3}}
    reply: {text: c}
  - name: user
    when: {user: '^hello'}
    reply: {text: u}
`))
	require.NoError(t, err)
	rules, err := s.compile()
	require.NoError(t, err)
	srv := &Server{rules: rules}

	tests := []struct {
		name string
		conv conversation
		want string // "" = no match
	}{
		{"model", conversation{model: "special", lastRole: "user", last: "x", lastUser: "x", hasUser: true}, "model"},
		{"system", conversation{model: "m", system: "talk like a pirate", lastRole: "user", last: "x", lastUser: "x", hasUser: true}, "system"},
		{"user must be last for a user-only rule", conversation{lastRole: "tool", last: "one", lastUser: "hello", hasUser: true}, ""},
		{"user", conversation{lastRole: "user", last: "hello there", lastUser: "hello there", hasUser: true}, "user"},
		{"tool with the earlier user question", conversation{lastRole: "tool", last: "42", lastUser: "sum 40 2", hasUser: true}, "after-tool"},
		{"tool regexp must match", conversation{lastRole: "tool", last: "n/a", lastUser: "sum 40 2", hasUser: true}, ""},
		{"nothing", conversation{lastRole: "user", last: "bye", lastUser: "bye", hasUser: true}, ""},
		{"image", conversation{lastRole: "user", last: "look", lastUser: "look", hasUser: true, userImage: true}, "image"},
		{"no image", conversation{lastRole: "user", last: "look", lastUser: "look", hasUser: true}, "no-image"},
		{"image, then a tool result", conversation{lastRole: "tool", last: "x", lastUser: "look", hasUser: true, userImage: true}, "image-then-tool"},
		{"no image, then a tool result", conversation{lastRole: "tool", last: "x", lastUser: "look", hasUser: true}, ""},
		{"a number below the bound", conversation{lastRole: "tool", last: "2"}, "count-on"},
		{"a negative number below the bound", conversation{lastRole: "tool", last: "-2.5"}, "count-on"},
		{"the bound is not below itself", conversation{lastRole: "tool", last: "3"}, ""},
		{"a number above the bound", conversation{lastRole: "tool", last: "40"}, ""},
		{"not a number", conversation{lastRole: "tool", last: "."}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _, ok := srv.match(tt.conv)
			if tt.want == "" {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.Equal(t, tt.want, r.name)
		})
	}
}

func TestExpand(t *testing.T) {
	v := vars{groups: []string{"all", "one", "two"}, named: map[string]string{"expr": "1+1", "x_1": "y"}}
	tests := []struct{ tmpl, want string }{
		{"plain", "plain"},
		{"$1 and $2", "one and two"},
		{"${1}x", "onex"},
		{"$1x", ""}, // as regexp.Expand: the name is as long as possible
		{"${expr} = ${result}", "1+1 = "},
		{"$expr!", "1+1!"},
		{"$x_1", "y"},
		{"cost: $$5", "cost: $5"},
		{"$9", ""},
		{"${unclosed", "${unclosed"},
		{"${bad-name}", "${bad-name}"},
		{"trailing $", "trailing $"},
		{`{"expression": "$1"}`, `{"expression": "one"}`},
	}
	for _, tt := range tests {
		t.Run(tt.tmpl, func(t *testing.T) {
			require.Equal(t, tt.want, v.expand(tt.tmpl))
		})
	}
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		text string
		n    int
		want []string
	}{
		{"", 1, nil},
		{"one", 1, []string{"one"}},
		{"The result is 50.", 1, []string{"The", " result", " is", " 50."}},
		{"The result is 50.", 2, []string{"The result", " is 50."}},
		{"  lead and trail  ", 1, []string{"  lead", " and", " trail", "  "}},
		{"line\nbreak", 1, []string{"line", "\nbreak"}},
	}
	for _, tt := range tests {
		got := splitWords(tt.text, tt.n)
		require.Equal(t, tt.want, got, "%q by %d", tt.text, tt.n)
	}
}

func TestSplitBytes(t *testing.T) {
	require.Equal(t, []string{`{"expres`, `sion": "`, `12.5 * 4`, `"}`}, splitBytes(`{"expression": "12.5 * 4"}`, 8))
	got := splitBytes("ééééé", 3) // 2-byte runes must not be split
	require.Equal(t, []string{"é", "é", "é", "é", "é"}, got)
	require.Nil(t, splitBytes("", 8))
}

// FuzzParse: a script either parses, and then a server can be built
// from it and answer with it, or is refused with an error; never a
// panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(loopScript))
	f.Add([]byte(testScript))
	f.Add([]byte(`{prompt_cache: {min_tokens: 0, block_tokens: 1, max_blocks: 1}, rules: [{when: {tool: '(?P<n>.*)', below: {n: -1e308}}, reply: {text: x}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		srv := New(s, Options{})
		if srv.cache != nil {
			srv.cache.use(openAIRequest("k", message("a")))
		}
		srv.match(conversation{lastRole: "tool", last: "1", lastUser: "x", hasUser: true})
	})
}
