package scripted

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
)

// Options configure a Server.
type Options struct {
	// Logger receives one debug entry per chat request (rule, status; never
	// message contents). Nil means no logging.
	Logger *zap.Logger
	// MaxRecorded bounds the requests kept for Requests, the most recent
	// first to go last. Zero means 256.
	MaxRecorded int
	// OnChunk, when set, is called with the text of each streamed content
	// chunk just after it was flushed to the client: benchmarks use it to
	// time the delivery of each token.
	OnChunk func(text string, at time.Time)
	// OnRequest, when set, is called with each chat request a rule
	// matched, as recorded, before it is answered: benchmarks use it to
	// see every request without keeping them (MaxRecorded).
	OnRequest func(Request)
}

// APIs a Server speaks (Request.API).
const (
	APIOpenAI    = "openai"    // chat completions
	APIAnthropic = "anthropic" // Messages
)

// Request is a chat request as the server saw and answered it.
type Request struct {
	Rule   string // the matching rule; "" when none matched
	API    string // APIOpenAI or APIAnthropic: the route the request came by
	Model  string
	Stream bool
	// System is the system prompt as rules see it: OpenAI's system and
	// developer messages (which stay in Messages too) or Anthropic's
	// top-level system member, joined by "\n".
	System   string
	Messages []Message
	Tools    []string // names of the offered tools
	// StrictTools names the tools sent with strict: true, each with a
	// schema the API's strict mode takes (strict.go).
	StrictTools []string
	// ToolsJSON is the request's "tools" member as it was sent, byte for
	// byte, so that a test can tell whether two requests share a prefix.
	ToolsJSON string
	// PromptCacheKey is OpenAI's prompt_cache_key, "" when not sent.
	PromptCacheKey string
	Temperature    *float64 // nil when the client did not send one
	MaxTokens      int      // max_completion_tokens, else max_tokens
	// ResponseFormat is the request's structured-output format as the
	// client sent it: OpenAI's response_format, Anthropic's
	// output_config.format; nil when it sent none.
	ResponseFormat json.RawMessage
	// Thinking is Anthropic's thinking member as sent ({"type":
	// "enabled", "budget_tokens": 1024}, {"type": "adaptive"}, …); nil
	// when absent.
	Thinking json.RawMessage
	// CacheControl counts the cache_control breakpoints of an Anthropic
	// request: on the request itself, its system blocks, tools, message
	// content blocks and the blocks inside tool results.
	CacheControl int
	// Bytes is the size of the request's body.
	Bytes int
	// PromptTokens and CachedTokens are the prompt's tokens and the part
	// of them read from the prompt cache, as the cache counted them (see
	// Script.PromptCache); 0 without one.
	PromptTokens, CachedTokens int
	Status                     int       // HTTP status answered (200 for a cut stream)
	Faulted                    bool      // a fault of the rule was served instead of its reply
	At                         time.Time // when the request arrived

	hints cacheHints
	// strictSchemas are the strict tools' schemas, by name.
	strictSchemas map[string]json.RawMessage
}

// Message is one message of a recorded request. An Anthropic user message
// is recorded as one "tool" message per tool_result block (in order) and
// one "user" message for the blocks between them, as OpenAI would have
// them, so that rules and tests see both APIs alike.
type Message struct {
	Role       string // "system", "developer", "user", "assistant" or "tool"
	Content    string // the text: a string, or the text parts joined
	ToolCalls  []ToolCall
	ToolCallID string // of a tool result
	// IsError marks an Anthropic tool_result sent with is_error.
	IsError bool
	// Parts are the parts of content sent as an array (text, images,
	// files), in order; nil when the content was a plain string.
	Parts []Part
	// Reasoning and Signature are the thinking block(s) of an Anthropic
	// assistant message sent back: their text (joined) and the signature
	// of the last one.
	Reasoning string
	Signature string
	// CacheControl marks an Anthropic message with a cache_control
	// breakpoint on one of its blocks: the prompt up to its end may be
	// cached.
	CacheControl bool
}

// Part is one part of a message's content as it arrived.
type Part struct {
	// Type is "text", "image", "file" (OpenAI's file parts and Anthropic's
	// document blocks) or, for other parts, the type as sent.
	Type string
	Text string // of a text part, or of a plain-text document
	// MIMEType is the media type sent with data (or in a data: URL).
	MIMEType string
	URL      string // when sent by URL (not a data: URL)
	FileID   string // when sent by file id
	Name     string // a file's filename, a document's title
	// DataLen and DataSHA256 (hex) describe the bytes sent inline, base64
	// or in a data: URL, after decoding.
	DataLen    int
	DataSHA256 string
}

// ToolCall is a tool call of a recorded assistant message.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON: OpenAI's arguments string, Anthropic's input object
}

// Server is an http.Handler serving, from a Script, OpenAI's
// chat-completions API (routes /v1/chat/completions, /chat/completions,
// /v1/models) and Anthropic's Messages API (/v1/messages, /messages). It is
// safe for concurrent use.
type Server struct {
	rules      []compiledRule
	moderation []moderationRule
	// moderated are the inputs /v1/moderations was asked about.
	moderated   []string
	pacing      Pacing
	reasoningAs string // Script.ReasoningField
	log         *zap.Logger
	maxRecorded int
	onChunk     func(string, time.Time)
	onRequest   func(Request)
	cache       *promptCache // nil: prompts are not cached
	embeds      embedState   // embeddings.go

	completionIDs atomic.Int64
	requestIDs    atomic.Int64
	callIDs       atomic.Int64
	inFlight      atomic.Int64

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
	faults   map[string]int // faults served per rule
	served   map[string]int // requests matched per rule
	recorded []Request
	// refused answers every matched request until refuseUntil (RefuseFor).
	refused     Fault
	refuseUntil time.Time

	// Set by Start.
	httpSrv   *http.Server
	url       string
	serveErr  chan error
	closeOnce sync.Once
	closeErr  error
}

// New returns a Server for the script. It panics if the script is invalid;
// scripts from Parse, LoadFile and Demo are valid, others can be checked
// with Validate.
func New(script *Script, opts Options) *Server {
	rules, err := script.compile()
	if err != nil {
		panic(fmt.Sprintf("scripted: invalid script: %v", err))
	}
	moderation, err := script.compileModeration()
	if err != nil {
		panic(fmt.Sprintf("scripted: invalid script: %v", err))
	}
	s := &Server{
		rules:       rules,
		moderation:  moderation,
		pacing:      script.Pacing,
		reasoningAs: script.ReasoningField,
		log:         opts.Logger,
		maxRecorded: opts.MaxRecorded,
		onChunk:     opts.OnChunk,
		onRequest:   opts.OnRequest,
		faults:      map[string]int{},
		served:      map[string]int{},
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.maxRecorded <= 0 {
		s.maxRecorded = 256
	}
	if s.pacing.ChunkWords <= 0 {
		s.pacing.ChunkWords = 1
	}
	if script.PromptCache != nil {
		s.cache = newPromptCache(*script.PromptCache)
	}
	return s
}

// Start serves the script on addr (e.g. "127.0.0.1:0" for a free loopback
// port) until Close.
func Start(addr string, script *Script, opts Options) (*Server, error) {
	if err := script.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	s := New(script, opts)
	s.httpSrv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String() + "/v1"
	s.serveErr = make(chan error, 1)
	go func() { s.serveErr <- s.httpSrv.Serve(ln) }()
	return s, nil
}

// URL is the base URL to give an OpenAI client (openai.WithBaseURL), e.g.
// "http://127.0.0.1:41234/v1". It is empty unless the server was started
// with Start.
func (s *Server) URL() string { return s.url }

// RootURL is URL without its /v1, e.g. "http://127.0.0.1:41234": the base
// URL to give Anthropic's SDK (option.WithBaseURL), which appends
// v1/messages to it. It is empty unless the server was started with
// Start.
func (s *Server) RootURL() string { return strings.TrimSuffix(s.url, "/v1") }

// Close stops a server started with Start: it closes the listener and all
// connections (cutting streams in flight) and waits for the handlers to
// return. It is safe to call more than once.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		if s.httpSrv != nil {
			s.closeErr = s.httpSrv.Close()
			if err := <-s.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) && s.closeErr == nil {
				s.closeErr = err
			}
		}
		s.handlers.Wait()
	})
	return s.closeErr
}

// Served returns how many requests matched the named rule, faulted ones
// included.
func (s *Server) Served(rule string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[rule]
}

// Requests returns the most recent requests (see Options.MaxRecorded), in
// arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.recorded...)
}

// InFlight is the number of chat requests being answered right now.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// ServeHTTP implements http.Handler. A cut fault aborts the handler with
// http.ErrAbortHandler, which net/http turns into a closed connection.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		s.serveChat(w, r, APIOpenAI)
	case "/v1/messages", "/messages":
		s.serveChat(w, r, APIAnthropic)
	case "/v1/moderations", "/moderations":
		s.moderate(w, r)
	case "/v1/embeddings", "/embeddings":
		s.embed(w, r)
	case "/v1/models", "/models":
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, "use GET for "+r.URL.Path, 0)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"object": "list",
			"data":   []map[string]any{{"id": "scripted", "object": "model", "created": 0, "owned_by": "agentflow-scripted"}},
		})
	default:
		if strings.HasSuffix(r.URL.Path, "/v1/messages") {
			// The Anthropic SDK appends v1/messages to its base URL, so a
			// base URL ending in /v1 asks for /v1/v1/messages, which the
			// real API does not serve either.
			writeAnthropicError(w, http.StatusNotFound, "unknown path "+r.URL.Path+
				": the Anthropic SDK appends v1/messages to its base URL, so give it the server's root URL", 0)
			return
		}
		writeError(w, http.StatusNotFound, "unknown path "+r.URL.Path, 0)
	}
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, api string) {
	if api == APIAnthropic {
		// As the API does; the SDK quotes it in its errors.
		w.Header().Set("Request-Id", fmt.Sprintf("req_scripted_%d", s.requestIDs.Add(1)))
	}
	if r.Method != http.MethodPost {
		apiError(w, api, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path, "", 0)
		return
	}
	if !s.enter() {
		apiError(w, api, http.StatusServiceUnavailable, "the scripted server is shutting down", "", 0)
		return
	}
	defer s.handlers.Done()
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	s.chat(w, r, api)
}

func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// maxBody bounds a request body; conversations in tests are far smaller.
const maxBody = 32 << 20

// incoming is a decoded request of either API.
type incoming struct {
	rec          Request
	includeUsage bool // OpenAI's stream_options.include_usage
}

// apiError writes an error in the shape of the API the request came by.
func apiError(w http.ResponseWriter, api string, status int, msg, code string, retryAfterSec int) {
	if api == APIAnthropic {
		writeAnthropicError(w, status, msg, retryAfterSec)
		return
	}
	writeFault(w, status, msg, code, retryAfterSec)
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request, api string) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		apiError(w, api, http.StatusBadRequest, "read request body: "+err.Error(), "", 0)
		return
	}
	var in incoming
	if api == APIAnthropic {
		in, err = decodeAnthropic(body)
	} else {
		in, err = decodeOpenAI(body)
	}
	if err != nil {
		apiError(w, api, http.StatusBadRequest, err.Error(), "", 0)
		return
	}
	rec := in.rec
	rec.API = api
	rec.At = time.Now()
	conv := toConversation(rec)

	rule, v, ok := s.match(conv)
	if !ok {
		rec.Status = http.StatusBadRequest
		s.remember(&rec, nil)
		apiError(w, api, http.StatusBadRequest, fmt.Sprintf("no script rule matches the last message: %s %q",
			conv.lastRole, truncate(conv.last, 200)), "", 0)
		return
	}
	rec.Rule = rule.name
	rec.Bytes = len(body)
	var cached cacheUse
	if s.cache != nil {
		cached = s.cache.use(rec)
		rec.PromptTokens, rec.CachedTokens = cached.prompt, cached.cached
	}
	fault := s.remember(&rec, rule)
	if s.onRequest != nil {
		s.onRequest(rec)
	}
	s.log.Debug("scripted request", zap.String("api", api), zap.String("rule", rule.name), zap.Bool("stream", rec.Stream),
		zap.Bool("fault", fault != nil))

	if fault != nil && fault.Stall {
		select {
		case <-r.Context().Done():
		case <-time.After(MaxStall):
		}
		return
	}
	if fault != nil && fault.Status != 0 {
		msg := fault.Message
		if msg == "" {
			msg = fmt.Sprintf("scripted fault of rule %q", rule.name)
		}
		for k, v := range fault.Headers {
			w.Header().Set(k, v)
		}
		apiError(w, api, fault.Status, msg, fault.Code, fault.RetryAfterSec)
		return
	}
	cut := 0
	if fault != nil {
		cut = fault.CutAfterChunks
	}
	if d := time.Duration(rule.reply.DelayMS) * time.Millisecond; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	rep := s.render(rule, v, rec, cached)
	if api == APIAnthropic {
		s.anthropicReply(w, r, rule, rec, rep, cut)
		return
	}
	if rec.Stream {
		s.send(w, r, s.chunks(rep, in.includeUsage), cut, "data: [DONE]\n\n")
		return
	}
	s.respond(w, rep, cut)
}

func (s *Server) match(conv conversation) (*compiledRule, vars, bool) {
	for i := range s.rules {
		if v, ok := s.rules[i].match(conv); ok {
			return &s.rules[i], v, true
		}
	}
	return nil, vars{}, false
}

// RefuseFor answers every request a rule matches with HTTP 429 and a
// Retry-After of retryAfterSec (none when 0) for d from now, whatever its
// rule says: a provider whose rate limit is used up for a stretch, as
// benchmarks of the governor need it. The requests are recorded, with
// status 429.
func (s *Server) RefuseFor(d time.Duration, retryAfterSec int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused = Fault{Status: http.StatusTooManyRequests, RetryAfterSec: retryAfterSec,
		Message: "scripted rate limit: the requests of this stretch are used up"}
	s.refuseUntil = time.Now().Add(d)
}

// remember counts and records the request and decides, under the lock,
// whether a fault applies to it — a RefuseFor stretch's, else the
// rule's — which it notes in rec.
func (s *Server) remember(rec *Request, rule *compiledRule) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fault *Fault
	if rule != nil {
		s.served[rule.name]++
		if rec.At.Before(s.refuseUntil) {
			fault = &s.refused
		} else if f := rule.fault; f != nil {
			times := f.Times
			if times == 0 {
				times = 1
			}
			if times < 0 || s.faults[rule.name] < times {
				s.faults[rule.name]++
				fault = f
			}
		}
	}
	if fault != nil {
		rec.Faulted = true
		rec.Status = fault.Status
	}
	if rec.Status == 0 {
		rec.Status = http.StatusOK
	}
	if len(s.recorded) >= s.maxRecorded {
		s.recorded = append(s.recorded[:0], s.recorded[1:]...)
	}
	s.recorded = append(s.recorded, *rec)
	return fault
}

// decodeOpenAI decodes and records a chat-completions request.
func decodeOpenAI(body []byte) (incoming, error) {
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return incoming{}, fmt.Errorf("invalid request body: %w", err)
	}
	if len(req.Messages) == 0 {
		return incoming{}, errors.New("messages must not be empty")
	}
	rec := Request{
		Model:          req.Model,
		Stream:         req.Stream,
		Temperature:    req.Temperature,
		MaxTokens:      req.MaxCompletionTokens,
		PromptCacheKey: req.PromptCacheKey,
		hints:          cacheHints{key: req.PromptCacheKey},
	}
	if rec.hints.key == "" {
		rec.hints.key = req.User
	}
	if f := req.ResponseFormat; len(f) > 0 && string(f) != "null" {
		rec.ResponseFormat = f
	}
	if rec.MaxTokens == 0 {
		rec.MaxTokens = req.MaxTokens
	}
	rec.ToolsJSON = string(req.Tools)
	if len(req.Tools) > 0 {
		var tools []struct {
			Function struct {
				Name       string          `json:"name"`
				Strict     bool            `json:"strict"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(req.Tools, &tools); err != nil {
			return incoming{}, fmt.Errorf("invalid request body: tools: %w", err)
		}
		strict := make([]strictTool, 0, len(tools))
		for _, t := range tools {
			rec.Tools = append(rec.Tools, t.Function.Name)
			strict = append(strict, strictTool{name: t.Function.Name, strict: t.Function.Strict, schema: t.Function.Parameters})
		}
		if err := takeStrict(APIOpenAI, &rec, strict); err != nil {
			return incoming{}, err
		}
	}
	var system []string
	for i, m := range req.Messages {
		parts, err := m.parts()
		if err != nil {
			return incoming{}, fmt.Errorf("messages[%d].content%w", i, err)
		}
		msg := Message{Role: m.Role, Content: m.text(), ToolCallID: m.ToolCallID, Parts: parts}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		if m.Role == "system" || m.Role == "developer" {
			system = append(system, msg.Content)
		}
		rec.Messages = append(rec.Messages, msg)
	}
	rec.System = strings.Join(system, "\n")
	return incoming{rec: rec, includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}, nil
}

func toConversation(rec Request) conversation {
	conv := conversation{model: rec.Model, system: rec.System}
	for _, m := range rec.Messages {
		if m.Role == "user" {
			conv.lastUser, conv.hasUser, conv.userImage = m.Content, true, hasImage(m.Parts)
		}
	}
	if n := len(rec.Messages); n > 0 {
		last := rec.Messages[n-1]
		conv.lastRole, conv.last = last.Role, last.Content
	}
	return conv
}

func hasImage(parts []Part) bool {
	for _, p := range parts {
		if p.Type == "image" {
			return true
		}
	}
	return false
}

// reply is a rendered answer.
type reply struct {
	id        string
	model     string
	created   int64
	reasoning string
	text      string
	toolCalls []wireToolCall
	finish    string // as the script gives it; "" for the default
	usage     wireUsage
	// cacheWrite is the prompt tokens written to the cache (Anthropic's
	// cache_creation_input_tokens).
	cacheWrite int
}

func (s *Server) render(rule *compiledRule, v vars, rec Request, cached cacheUse) reply {
	rep := reply{
		id:        fmt.Sprintf("chatcmpl-scripted-%d", s.completionIDs.Add(1)),
		model:     rec.Model,
		created:   time.Now().Unix(),
		reasoning: v.expand(rule.reply.Reasoning),
		text:      v.expand(rule.reply.Text),
		finish:    rule.reply.FinishReason,
	}
	if rep.model == "" {
		rep.model = "scripted"
	}
	for _, tc := range rule.reply.ToolCalls {
		id := fmt.Sprintf("call_%d", s.callIDs.Add(1))
		if tc.ID != "" {
			id = tc.ID
		}
		rep.toolCalls = append(rep.toolCalls, wireToolCall{
			ID:       id,
			Type:     "function",
			Function: wireFunction{Name: tc.Name, Arguments: s.arguments(rec, tc.Name, v.expand(tc.Arguments))},
		})
	}
	if u := rule.reply.Usage; u != nil {
		rep.usage = wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
		if u.CachedTokens > 0 {
			rep.usage.PromptTokensDetails = &promptDetails{CachedTokens: u.CachedTokens}
		}
		if u.ReasoningTokens > 0 {
			rep.usage.CompletionTokensDetails = &completionDetails{ReasoningTokens: u.ReasoningTokens}
		}
		rep.cacheWrite = u.CacheWriteTokens
	} else {
		rep.usage = estimateUsage(rec, rep)
		if s.cache != nil {
			rep.usage.PromptTokens, rep.cacheWrite = cached.prompt, cached.written
			if cached.cached > 0 {
				rep.usage.PromptTokensDetails = &promptDetails{CachedTokens: cached.cached}
			}
		}
	}
	rep.usage.TotalTokens = rep.usage.PromptTokens + rep.usage.CompletionTokens
	return rep
}

// arguments are a reply's call of tool with args as the script writes
// them, as the API sends them: a strict OpenAI tool's as a strict model
// writes them (strictArguments).
func (s *Server) arguments(rec Request, tool, args string) string {
	if schema, ok := rec.strictSchemas[tool]; ok && rec.API == APIOpenAI {
		return strictArguments(schema, args)
	}
	return args
}

// estimateUsage counts words, plus a few tokens of overhead per message as
// real tokenizers have, and a token per part that is not text.
func estimateUsage(rec Request, rep reply) wireUsage {
	var u wireUsage
	if rec.API == APIAnthropic && rec.System != "" {
		u.PromptTokens += 3 + len(strings.Fields(rec.System))
	}
	for _, m := range rec.Messages {
		u.PromptTokens += 3 + len(strings.Fields(m.Content)) + len(strings.Fields(m.Reasoning))
		for _, tc := range m.ToolCalls {
			u.PromptTokens += 1 + len(strings.Fields(tc.Arguments))
		}
		for _, p := range m.Parts {
			if p.Type != "text" {
				u.PromptTokens++
			}
		}
	}
	reasoning := len(strings.Fields(rep.reasoning))
	u.CompletionTokens = reasoning + len(strings.Fields(rep.text))
	for _, tc := range rep.toolCalls {
		u.CompletionTokens += 1 + len(strings.Fields(tc.Function.Arguments))
	}
	u.CompletionTokens = max(u.CompletionTokens, 1)
	if reasoning > 0 {
		u.CompletionTokensDetails = &completionDetails{ReasoningTokens: reasoning}
	}
	return u
}

// withReasoning sets text as the reasoning of a delta or message, under
// the member the script names.
func (s *Server) withReasoning(text string) (reasoningContent, reasoning *string) {
	if s.reasoningAs == ReasoningPlain {
		return nil, &text
	}
	return &text, nil
}

// openAIFinish is the finish_reason of a reply: the script's, else stop
// or tool_calls.
func openAIFinish(rep reply) string {
	switch {
	case rep.finish != "":
		return rep.finish
	case len(rep.toolCalls) > 0:
		return "tool_calls"
	default:
		return "stop"
	}
}

func (s *Server) respond(w http.ResponseWriter, rep reply, cut int) {
	msg := completionMessage{Role: "assistant", ToolCalls: rep.toolCalls}
	if rep.text != "" || len(rep.toolCalls) == 0 {
		msg.Content = &rep.text
	}
	if rep.reasoning != "" {
		msg.ReasoningContent, msg.Reasoning = s.withReasoning(rep.reasoning)
	}
	s.writeBody(w, completion{
		ID:                rep.id,
		Object:            "chat.completion",
		Created:           rep.created,
		Model:             rep.model,
		Choices:           []completionChoice{{Message: msg, FinishReason: openAIFinish(rep)}},
		Usage:             rep.usage,
		SystemFingerprint: "fp_scripted",
	}, cut, APIOpenAI)
}

// writeBody writes a plain reply, or half of it and cuts the connection.
func (s *Server) writeBody(w http.ResponseWriter, v any, cut int, api string) {
	body, err := json.Marshal(v)
	if err != nil {
		apiError(w, api, http.StatusInternalServerError, "encode response: "+err.Error(), "", 0)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if cut > 0 {
		_, _ = w.Write(body[:len(body)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	_, _ = w.Write(body)
}

// event is one SSE event; paced events wait Pacing.DelayMS before they go.
type event struct {
	name  string // the event: line; "" for none (OpenAI)
	data  any    // marshalled as the data: line
	text  string // the reply text it carries, for Options.OnChunk
	paced bool
}

// send streams events, then trailer, pacing them and cutting the stream
// after cut events when cut > 0.
func (s *Server) send(w http.ResponseWriter, r *http.Request, events []event, cut int, trailer string) {
	ctx := r.Context()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	delay := time.Duration(s.pacing.DelayMS) * time.Millisecond
	var timer *time.Timer
	if delay > 0 {
		timer = time.NewTimer(delay)
		timer.Stop() // armed by Reset before each paced event
		defer timer.Stop()
	}
	for i, ev := range events {
		if cut > 0 && i == cut {
			panic(http.ErrAbortHandler)
		}
		if ctx.Err() != nil {
			return // the client went away
		}
		if delay > 0 && ev.paced && i > 0 {
			timer.Reset(delay)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		data, err := json.Marshal(ev.data)
		if err != nil {
			return
		}
		if ev.name != "" {
			_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.name, data)
		} else {
			_, err = fmt.Fprintf(w, "data: %s\n\n", data)
		}
		if err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if s.onChunk != nil && ev.text != "" {
			s.onChunk(ev.text, time.Now())
		}
	}
	if cut > 0 {
		// The stream had fewer events than the cut point: cut before its
		// end, so it never completes.
		panic(http.ErrAbortHandler)
	}
	if trailer == "" {
		return
	}
	if _, err := io.WriteString(w, trailer); err == nil && flusher != nil {
		flusher.Flush()
	}
}

// argFragmentBytes is the size of the tool-call argument fragments of a
// stream; small, so clients must reassemble arguments as with OpenAI.
const argFragmentBytes = 8

func (s *Server) chunks(rep reply, includeUsage bool) []event {
	base := chunk{ID: rep.id, Object: "chat.completion.chunk", Created: rep.created, Model: rep.model,
		SystemFingerprint: "fp_scripted"}
	one := func(d chunkDelta, finish *string) chunk {
		c := base
		c.Choices = []chunkChoice{{Delta: d, FinishReason: finish}}
		return c
	}
	empty := ""
	events := []event{{data: one(chunkDelta{Role: "assistant", Content: &empty}, nil)}}
	for _, piece := range splitWords(rep.reasoning, s.pacing.ChunkWords) {
		d := chunkDelta{}
		d.ReasoningContent, d.Reasoning = s.withReasoning(piece)
		events = append(events, event{data: one(d, nil), paced: true})
	}
	for _, piece := range splitWords(rep.text, s.pacing.ChunkWords) {
		events = append(events, event{data: one(chunkDelta{Content: &piece}, nil), text: piece, paced: true})
	}
	for i, tc := range rep.toolCalls {
		head := tc
		head.Index = &i
		head.Function.Arguments = ""
		events = append(events, event{data: one(chunkDelta{ToolCalls: []wireToolCall{head}}, nil), paced: true})
		for _, frag := range splitBytes(tc.Function.Arguments, argFragmentBytes) {
			d := wireToolCall{Index: &i, Function: wireFunction{Arguments: frag}}
			events = append(events, event{data: one(chunkDelta{ToolCalls: []wireToolCall{d}}, nil), paced: true})
		}
	}
	finish := openAIFinish(rep)
	events = append(events, event{data: one(chunkDelta{}, &finish)})
	if includeUsage {
		u := rep.usage
		c := base
		c.Choices = []chunkChoice{}
		c.Usage = &u
		events = append(events, event{data: c})
	}
	return events
}

// splitWords cuts text into pieces of n words; each piece carries the
// whitespace before its words, so the pieces join to exactly text.
func splitWords(text string, n int) []string {
	var pieces []string
	start, words, inWord := 0, 0, false
	for i, c := range text {
		space := c == ' ' || c == '\n' || c == '\t' || c == '\r'
		if space && inWord {
			words++
			if words == n {
				pieces = append(pieces, text[start:i])
				start, words = i, 0
			}
		}
		inWord = !space
	}
	if start < len(text) {
		pieces = append(pieces, text[start:])
	}
	return pieces
}

// splitBytes cuts s into pieces of at most n bytes without splitting a
// UTF-8 sequence.
func splitBytes(s string, n int) []string {
	var pieces []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && end > 0 && !utf8.RuneStart(s[end]) {
			end--
		}
		if end == 0 {
			_, end = utf8.DecodeRuneInString(s)
		}
		pieces = append(pieces, s[:end])
		s = s[end:]
	}
	return pieces
}

func writeError(w http.ResponseWriter, status int, msg string, retryAfterSec int) {
	writeFault(w, status, msg, "", retryAfterSec)
}

// writeFault is writeError with the error's code member, when code is
// set.
func writeFault(w http.ResponseWriter, status int, msg, code string, retryAfterSec int) {
	if retryAfterSec > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSec))
	}
	b := newErrorBody(status, msg)
	if code != "" {
		b.Error.Code = &code
	}
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":{"message":"encode response","type":"server_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// moderate answers OpenAI's /v1/moderations: each input is flagged in
// the categories of the script's moderation rules it matches.
func (s *Server) moderate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if !decodePost(w, r, "a moderation", &body) {
		return
	}
	inputs, ok := decodeInputs(body.Input)
	if !ok {
		writeError(w, http.StatusBadRequest, "input: want a string or an array of strings", 0)
		return
	}
	s.mu.Lock()
	s.moderated = append(s.moderated, inputs...)
	s.mu.Unlock()
	results := make([]map[string]any, len(inputs))
	for i, in := range inputs {
		cats, scores := map[string]bool{}, map[string]float64{}
		flagged := false
		for _, m := range s.moderation {
			if m.re.MatchString(in) {
				cats[m.category], scores[m.category], flagged = true, 0.99, true
			}
		}
		results[i] = map[string]any{"flagged": flagged, "categories": cats, "category_scores": scores,
			"category_applied_input_types": map[string][]string{}}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": fmt.Sprintf("modr-scripted-%d", s.requestIDs.Add(1)), "model": body.Model, "results": results})
}

// Moderated returns the inputs the server was asked to moderate.
func (s *Server) Moderated() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.moderated...)
}
