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
}

// Request is a chat request as the server saw and answered it.
type Request struct {
	Rule     string // the matching rule; "" when none matched
	Model    string
	Stream   bool
	Messages []Message
	Tools    []string // names of the offered tools
	// ToolsJSON is the request's "tools" member as it was sent, byte for
	// byte, so that a test can tell whether two requests share a prefix.
	ToolsJSON string
	// PromptCacheKey is OpenAI's prompt_cache_key, "" when not sent.
	PromptCacheKey string
	Temperature    *float64 // nil when the client did not send one
	MaxTokens      int      // max_completion_tokens, else max_tokens
	// ResponseFormat is the request's response_format as the client sent
	// it (structured output); nil when it sent none.
	ResponseFormat json.RawMessage
	Status         int       // HTTP status answered (200 for a cut stream)
	Faulted        bool      // a fault of the rule was served instead of its reply
	At             time.Time // when the request arrived
}

// Message is one message of a recorded request.
type Message struct {
	Role       string
	Content    string
	ToolCalls  []ToolCall
	ToolCallID string
}

// ToolCall is a tool call of a recorded assistant message.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Server is an http.Handler serving the OpenAI chat-completions API from a
// Script (routes /v1/chat/completions, /chat/completions, /v1/models). It
// is safe for concurrent use.
type Server struct {
	rules       []compiledRule
	pacing      Pacing
	reasoningAs string // Script.ReasoningField
	log         *zap.Logger
	maxRecorded int
	onChunk     func(string, time.Time)

	completionIDs atomic.Int64
	callIDs       atomic.Int64
	inFlight      atomic.Int64

	mu       sync.Mutex
	closed   bool
	handlers sync.WaitGroup
	faults   map[string]int // faults served per rule
	served   map[string]int // requests matched per rule
	recorded []Request

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
	s := &Server{
		rules:       rules,
		pacing:      script.Pacing,
		reasoningAs: script.ReasoningField,
		log:         opts.Logger,
		maxRecorded: opts.MaxRecorded,
		onChunk:     opts.OnChunk,
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
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	switch path {
	case "/chat/completions":
		if r.Method != http.MethodPost {
			writeError(w, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path, 0)
			return
		}
		if !s.enter() {
			writeError(w, http.StatusServiceUnavailable, "the scripted server is shutting down", 0)
			return
		}
		defer s.handlers.Done()
		s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		s.chat(w, r)
	case "/models":
		if r.Method != http.MethodGet {
			writeError(w, http.StatusMethodNotAllowed, "use GET for "+r.URL.Path, 0)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"object": "list",
			"data":   []map[string]any{{"id": "scripted", "object": "model", "created": 0, "owned_by": "agentflow-scripted"}},
		})
	default:
		writeError(w, http.StatusNotFound, "unknown path "+r.URL.Path, 0)
	}
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

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid request body: "+err.Error(), 0)
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, http.StatusBadRequest, "messages must not be empty", 0)
		return
	}
	rec := record(req)
	rec.At = time.Now()
	var raw struct {
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &raw) == nil {
		rec.ToolsJSON = string(raw.Tools)
	}
	conv := toConversation(req)

	rule, v, ok := s.match(conv)
	if !ok {
		rec.Status = http.StatusBadRequest
		s.remember(rec, nil)
		writeError(w, http.StatusBadRequest, fmt.Sprintf("no script rule matches the last message: %s %q",
			conv.lastRole, truncate(conv.last, 200)), 0)
		return
	}
	rec.Rule = rule.name
	fault := s.remember(rec, rule)
	s.log.Debug("scripted request", zap.String("rule", rule.name), zap.Bool("stream", req.Stream),
		zap.Bool("fault", fault != nil))

	if fault != nil && fault.Status != 0 {
		msg := fault.Message
		if msg == "" {
			msg = fmt.Sprintf("scripted fault of rule %q", rule.name)
		}
		for k, v := range fault.Headers {
			w.Header().Set(k, v)
		}
		writeFault(w, fault.Status, msg, fault.Code, fault.RetryAfterSec)
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
	rep := s.render(rule, v, req)
	if req.Stream {
		s.stream(w, r, req, rep, cut)
		return
	}
	s.respond(w, req, rep, cut)
}

func (s *Server) match(conv conversation) (*compiledRule, vars, bool) {
	for i := range s.rules {
		if v, ok := s.rules[i].match(conv); ok {
			return &s.rules[i], v, true
		}
	}
	return nil, vars{}, false
}

// remember counts and records the request and decides, under the lock,
// whether the rule's fault applies to it.
func (s *Server) remember(rec Request, rule *compiledRule) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	var fault *Fault
	if rule != nil {
		s.served[rule.name]++
		if f := rule.fault; f != nil {
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
	s.recorded = append(s.recorded, rec)
	return fault
}

func record(req chatRequest) Request {
	rec := Request{
		Model:          req.Model,
		Stream:         req.Stream,
		Temperature:    req.Temperature,
		MaxTokens:      req.MaxCompletionTokens,
		PromptCacheKey: req.PromptCacheKey,
	}
	if f := req.ResponseFormat; len(f) > 0 && string(f) != "null" {
		rec.ResponseFormat = f
	}
	if rec.MaxTokens == 0 {
		rec.MaxTokens = req.MaxTokens
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	for _, m := range req.Messages {
		msg := Message{Role: m.Role, Content: m.text(), ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		rec.Messages = append(rec.Messages, msg)
	}
	return rec
}

func toConversation(req chatRequest) conversation {
	conv := conversation{model: req.Model}
	var system []string
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			system = append(system, m.text())
		case "user":
			conv.lastUser, conv.hasUser = m.text(), true
		}
	}
	last := req.Messages[len(req.Messages)-1]
	conv.system = strings.Join(system, "\n")
	conv.lastRole, conv.last = last.Role, last.text()
	return conv
}

// reply is a rendered answer.
type reply struct {
	id        string
	model     string
	created   int64
	reasoning string
	text      string
	toolCalls []wireToolCall
	finish    string
	usage     wireUsage
}

func (s *Server) render(rule *compiledRule, v vars, req chatRequest) reply {
	rep := reply{
		id:        fmt.Sprintf("chatcmpl-scripted-%d", s.completionIDs.Add(1)),
		model:     req.Model,
		created:   time.Now().Unix(),
		reasoning: v.expand(rule.reply.Reasoning),
		text:      v.expand(rule.reply.Text),
		finish:    rule.reply.FinishReason,
	}
	if rep.model == "" {
		rep.model = "scripted"
	}
	for _, tc := range rule.reply.ToolCalls {
		rep.toolCalls = append(rep.toolCalls, wireToolCall{
			ID:       fmt.Sprintf("call_%d", s.callIDs.Add(1)),
			Type:     "function",
			Function: wireFunction{Name: tc.Name, Arguments: v.expand(tc.Arguments)},
		})
	}
	if rep.finish == "" {
		rep.finish = "stop"
		if len(rep.toolCalls) > 0 {
			rep.finish = "tool_calls"
		}
	}
	if u := rule.reply.Usage; u != nil {
		rep.usage = wireUsage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens}
		if u.CachedTokens > 0 {
			rep.usage.PromptTokensDetails = &promptDetails{CachedTokens: u.CachedTokens}
		}
		if u.ReasoningTokens > 0 {
			rep.usage.CompletionTokensDetails = &completionDetails{ReasoningTokens: u.ReasoningTokens}
		}
	} else {
		rep.usage = estimateUsage(req, rep)
	}
	rep.usage.TotalTokens = rep.usage.PromptTokens + rep.usage.CompletionTokens
	return rep
}

// estimateUsage counts words, plus a few tokens of overhead per message as
// real tokenizers have.
func estimateUsage(req chatRequest, rep reply) wireUsage {
	var u wireUsage
	for _, m := range req.Messages {
		u.PromptTokens += 3 + len(strings.Fields(m.text()))
		for _, tc := range m.ToolCalls {
			u.PromptTokens += 1 + len(strings.Fields(tc.Function.Arguments))
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

func (s *Server) respond(w http.ResponseWriter, req chatRequest, rep reply, cut int) {
	msg := completionMessage{Role: "assistant", ToolCalls: rep.toolCalls}
	if rep.text != "" || len(rep.toolCalls) == 0 {
		msg.Content = &rep.text
	}
	if rep.reasoning != "" {
		msg.ReasoningContent, msg.Reasoning = s.withReasoning(rep.reasoning)
	}
	body, err := json.Marshal(completion{
		ID:                rep.id,
		Object:            "chat.completion",
		Created:           rep.created,
		Model:             rep.model,
		Choices:           []completionChoice{{Message: msg, FinishReason: rep.finish}},
		Usage:             rep.usage,
		SystemFingerprint: "fp_scripted",
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode response: "+err.Error(), 0)
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

func (s *Server) stream(w http.ResponseWriter, r *http.Request, req chatRequest, rep reply, cut int) {
	ctx := r.Context()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)

	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	events := s.chunks(rep, includeUsage)
	delay := time.Duration(s.pacing.DelayMS) * time.Millisecond
	var timer *time.Timer
	if delay > 0 {
		timer = time.NewTimer(delay)
		timer.Stop() // armed by Reset before each paced chunk
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
		data, err := json.Marshal(ev.chunk)
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "data: %s\n\n", data); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		if s.onChunk != nil {
			if text := ev.chunk.text(); text != "" {
				s.onChunk(text, time.Now())
			}
		}
	}
	if cut > 0 {
		// The stream had fewer events than the cut point: cut before [DONE],
		// so it never completes.
		panic(http.ErrAbortHandler)
	}
	if _, err := io.WriteString(w, "data: [DONE]\n\n"); err == nil && flusher != nil {
		flusher.Flush()
	}
}

// event is one SSE chunk; paced chunks wait Pacing.DelayMS before they go.
type event struct {
	chunk chunk
	paced bool
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
	events := []event{{chunk: one(chunkDelta{Role: "assistant", Content: &empty}, nil)}}
	for _, piece := range splitWords(rep.reasoning, s.pacing.ChunkWords) {
		d := chunkDelta{}
		d.ReasoningContent, d.Reasoning = s.withReasoning(piece)
		events = append(events, event{chunk: one(d, nil), paced: true})
	}
	for _, piece := range splitWords(rep.text, s.pacing.ChunkWords) {
		events = append(events, event{chunk: one(chunkDelta{Content: &piece}, nil), paced: true})
	}
	for i, tc := range rep.toolCalls {
		head := tc
		head.Index = &i
		head.Function.Arguments = ""
		events = append(events, event{chunk: one(chunkDelta{ToolCalls: []wireToolCall{head}}, nil), paced: true})
		for _, frag := range splitBytes(tc.Function.Arguments, argFragmentBytes) {
			d := wireToolCall{Index: &i, Function: wireFunction{Arguments: frag}}
			events = append(events, event{chunk: one(chunkDelta{ToolCalls: []wireToolCall{d}}, nil), paced: true})
		}
	}
	finish := rep.finish
	events = append(events, event{chunk: one(chunkDelta{}, &finish)})
	if includeUsage {
		u := rep.usage
		c := base
		c.Choices = []chunkChoice{}
		c.Usage = &u
		events = append(events, event{chunk: c})
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
