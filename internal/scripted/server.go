package scripted

import (
	"cmp"
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
	in, err := decodeChat(api, body)
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

	if serveFault(w, r, api, rule, fault) {
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

// decodeChat decodes a request body in the shape of the API it came by.
func decodeChat(api string, body []byte) (incoming, error) {
	if api == APIAnthropic {
		return decodeAnthropic(body)
	}
	return decodeOpenAI(body)
}

// serveFault answers the request with its fault when the fault takes the
// reply's place — a stall, or an error status — and reports whether it
// did; a cut fault (or none) leaves the reply to be rendered.
func serveFault(w http.ResponseWriter, r *http.Request, api string, rule *compiledRule, fault *Fault) bool {
	if fault != nil && fault.Stall {
		select {
		case <-r.Context().Done():
		case <-time.After(MaxStall):
		}
		return true
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
		return true
	}
	return false
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
			times := cmp.Or(f.Times, 1)
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
	rec.Status = cmp.Or(rec.Status, http.StatusOK)
	if len(s.recorded) >= s.maxRecorded {
		s.recorded = append(s.recorded[:0], s.recorded[1:]...)
	}
	s.recorded = append(s.recorded, *rec)
	return fault
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
