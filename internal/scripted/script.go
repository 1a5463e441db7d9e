package scripted

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Script is what a Server answers with. Build it with Parse or LoadFile, or
// in Go (then check it with Validate before passing it to New).
type Script struct {
	Pacing Pacing `yaml:"pacing"`
	// ReasoningField names the member of a delta (and of a plain reply's
	// message) that carries a reply's reasoning: "reasoning_content" (the
	// default, as DeepSeek and vLLM send it) or "reasoning" (as OpenRouter,
	// newer vLLM and Ollama do).
	ReasoningField string `yaml:"reasoning_field"`
	Rules          []Rule `yaml:"rules"`
	// PromptCache, when set, has the server cache prompts as providers
	// do and report the cached part of each prompt in its usage.
	PromptCache *PromptCache `yaml:"prompt_cache"`
	// Moderation is how the server answers /v1/moderations: an input is
	// flagged in each category whose expression it matches.
	Moderation []ModerationRule `yaml:"moderation"`
}

// ModerationRule flags inputs that match Regex in Category.
type ModerationRule struct {
	Category string `yaml:"category"`
	Regex    string `yaml:"regex"`
}

// Reasoning fields (Script.ReasoningField).
const (
	ReasoningContent = "reasoning_content"
	ReasoningPlain   = "reasoning"
)

// Pacing shapes streamed replies.
type Pacing struct {
	// ChunkWords is the number of words per streamed chunk; 0 means 1.
	ChunkWords int `yaml:"chunk_words"`
	// DelayMS is the pause between streamed chunks; 0 means none.
	DelayMS int `yaml:"delay_ms"`
}

// Rule answers the requests its conditions match.
type Rule struct {
	// Name identifies the rule in Served counts and error messages; empty
	// names become "rules[i]".
	Name  string `yaml:"name"`
	When  When   `yaml:"when"`
	Reply Reply  `yaml:"reply"`
	Fault *Fault `yaml:"fault"`
}

// When holds a rule's conditions, regular expressions in Go syntax. Empty
// conditions always hold.
type When struct {
	User   string `yaml:"user"`
	Tool   string `yaml:"tool"`
	System string `yaml:"system"`
	Model  string `yaml:"model"`
	// HasImage, when set, says whether the latest user message carries an
	// image part (true) or none (false); like User, without Tool the user
	// message must be the last message.
	HasImage *bool `yaml:"has_image"`
	// Below bounds named groups read as numbers: the rule matches only
	// when each group named here, captured by one of its regular
	// expressions, is a number below its bound. With the number in the
	// conversation (a tool's result) and a template that counts on from
	// it, a script loops a given number of times.
	Below map[string]float64 `yaml:"below"`
}

// Reply is the assistant message a rule answers with.
type Reply struct {
	// Reasoning is what the model thinks before it answers: streamed as
	// reasoning deltas before the text (Script.ReasoningField names them),
	// and the message's reasoning in a plain reply. A template, like Text.
	Reasoning string         `yaml:"reasoning"`
	Text      string         `yaml:"text"`
	ToolCalls []ToolCallSpec `yaml:"tool_calls"`
	// FinishReason overrides "stop" (text) or "tool_calls" (tool calls).
	FinishReason string `yaml:"finish_reason"`
	// Usage overrides the estimated token counts.
	Usage *Usage `yaml:"usage"`
	// DelayMS is how long the model thinks before it answers, streamed or
	// not: a slow model.
	DelayMS int `yaml:"delay_ms"`
}

// ToolCallSpec is one tool call of a reply; Arguments is a JSON object
// template.
type ToolCallSpec struct {
	Name      string `yaml:"name"`
	Arguments string `yaml:"arguments"`
	// ID fixes the call's id, as models that number the calls of each
	// reply from 0 do, so that one id comes back in every step and turn;
	// default call_<n>, n counting the server's calls.
	ID string `yaml:"id"`
}

// Usage is the token usage a reply reports.
type Usage struct {
	PromptTokens     int `yaml:"prompt_tokens"`
	CompletionTokens int `yaml:"completion_tokens"`
	// CachedTokens (of the prompt) and ReasoningTokens (of the
	// completion) are reported in prompt_tokens_details and
	// completion_tokens_details, as OpenAI does.
	CachedTokens    int `yaml:"cached_tokens"`
	ReasoningTokens int `yaml:"reasoning_tokens"`
	// CacheWriteTokens (of the prompt) are the tokens written to the
	// prompt cache, Anthropic's cache_creation_input_tokens; OpenAI does
	// not report them. Anthropic's input_tokens is PromptTokens less
	// CachedTokens and CacheWriteTokens, as its prompt is reported in
	// three parts.
	CacheWriteTokens int `yaml:"cache_write_tokens"`
}

// Fault makes a rule fail before (or instead of) answering.
type Fault struct {
	// Status is the HTTP status of the failure (4xx or 5xx).
	Status int `yaml:"status"`
	// RetryAfterSec sets the Retry-After header.
	RetryAfterSec int `yaml:"retry_after_sec"`
	// Headers are more headers of the failure, such as the rate-limit
	// headers providers send with a 429 (x-ratelimit-reset-requests, …).
	Headers map[string]string `yaml:"headers"`
	// Message is the error message; a default names the rule.
	Message string `yaml:"message"`
	// Code is the error body's code member, as OpenAI names its errors:
	// "context_length_exceeded" for a prompt longer than the model's
	// context window (with status 400). Default: the status's own
	// (rate_limit_exceeded for 429, …), or none.
	Code string `yaml:"code"`
	// CutAfterChunks closes the connection after that many SSE events (a
	// non-streamed reply is cut half-way through its body).
	CutAfterChunks int `yaml:"cut_after_chunks"`
	// Stall holds the request without an answer until the client gives
	// up (or MaxStall has passed): a provider that hangs.
	Stall bool `yaml:"stall"`
	// Times is how many matching requests fail: 0 means 1, -1 means all.
	Times int `yaml:"times"`
}

// MaxStall bounds how long a stalled request is held, so that a client
// that never gives up does not hold the server's close forever.
const MaxStall = 5 * time.Minute

//go:embed demo.yaml
var demoYAML []byte

// Demo returns the script of the offline demo: arithmetic questions ("What
// is 12.5 * 4?") call the calculator tool and the answer quotes its result
// ("12.5 * 4 = 50"); greetings are answered; anything else gets a fallback.
func Demo() *Script {
	s, err := Parse(demoYAML)
	if err != nil {
		// The demo script is embedded and covered by tests.
		panic(fmt.Sprintf("scripted: embedded demo script: %v", err))
	}
	return s
}

// DemoYAML returns the source of the demo script, a starting point for
// custom scripts.
func DemoYAML() []byte { return bytes.Clone(demoYAML) }

// LoadFile reads and parses a script file.
func LoadFile(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read script: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("script %s: %w", path, err)
	}
	return s, nil
}

// Parse parses and validates a YAML script. Unknown fields are errors, so a
// misspelt condition cannot silently match everything.
func Parse(data []byte) (*Script, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var s Script
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("parse script: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate reports the first problem of the script, naming the rule.
func (s *Script) Validate() error {
	if _, err := s.compile(); err != nil {
		return err
	}
	_, err := s.compileModeration()
	return err
}

// conversation is the part of a request rules look at.
type conversation struct {
	model    string
	system   string
	lastRole string
	last     string // content of the last message
	lastUser string // content of the latest user message
	hasUser  bool
	// userImage: the latest user message carries an image part.
	userImage bool
}

// match reports whether the rule matches and, if so, the variables its
// reply expands.
func (c *compiledRule) match(conv conversation) (vars, bool) {
	v := vars{named: map[string]string{}}
	// Named groups: later assignments win, so the last-message regexp is
	// applied last.
	try := func(re *regexp.Regexp, s string, primary bool) bool {
		if re == nil {
			return true
		}
		m := re.FindStringSubmatch(s)
		if m == nil {
			return false
		}
		for i, n := range re.SubexpNames() {
			if n != "" {
				v.named[n] = m[i]
			}
		}
		if primary {
			v.groups = m
		}
		return true
	}
	if !try(c.model, conv.model, false) || !try(c.system, conv.system, false) {
		return vars{}, false
	}
	if c.user != nil {
		if !conv.hasUser || (c.tool == nil && conv.lastRole != "user") {
			return vars{}, false
		}
		if !try(c.user, conv.lastUser, c.tool == nil) {
			return vars{}, false
		}
	}
	if c.hasImage != nil {
		if !conv.hasUser || (c.tool == nil && conv.lastRole != "user") || conv.userImage != *c.hasImage {
			return vars{}, false
		}
	}
	if c.tool != nil {
		if conv.lastRole != "tool" || !try(c.tool, conv.last, true) {
			return vars{}, false
		}
	}
	for name, bound := range c.below {
		n, err := strconv.ParseFloat(strings.TrimSpace(v.named[name]), 64)
		if err != nil || !(n < bound) {
			return vars{}, false
		}
	}
	return v, true
}

// vars are the values a reply template may refer to.
type vars struct {
	groups []string          // $0, $1, ... of the last-message regexp
	named  map[string]string // ${name} of any matched regexp
}

func (v vars) lookup(name string) string {
	if n, err := strconv.Atoi(name); err == nil {
		if n >= 0 && n < len(v.groups) {
			return v.groups[n]
		}
		return ""
	}
	return v.named[name]
}

// expand replaces $name, ${name} and $$ in tmpl with the semantics of
// regexp.Expand, over groups that may come from several regexps.
func (v vars) expand(tmpl string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(tmpl, '$')
		if i < 0 {
			b.WriteString(tmpl)
			return b.String()
		}
		b.WriteString(tmpl[:i])
		tmpl = tmpl[i+1:]
		switch {
		case strings.HasPrefix(tmpl, "$"):
			b.WriteByte('$')
			tmpl = tmpl[1:]
		case strings.HasPrefix(tmpl, "{"):
			end := strings.IndexByte(tmpl, '}')
			name := ""
			if end > 0 {
				name = tmpl[1:end]
			}
			if !validName(name) {
				b.WriteByte('$') // malformed: kept literally, as regexp.Expand does
				continue
			}
			b.WriteString(v.lookup(name))
			tmpl = tmpl[end+1:]
		default:
			n := 0
			for n < len(tmpl) && isNameByte(tmpl[n]) {
				n++
			}
			if n == 0 {
				b.WriteByte('$')
				continue
			}
			b.WriteString(v.lookup(tmpl[:n]))
			tmpl = tmpl[n:]
		}
	}
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isNameByte(s[i]) {
			return false
		}
	}
	return true
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
