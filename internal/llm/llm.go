package llm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	anthropicsdk "github.com/anthropics/anthropic-sdk-go"
	openaisdk "github.com/openai/openai-go/v3"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"

	"github.com/agentflow/agentflow/internal/agent"
)

// Model is what activities need from a language model.
type Model interface {
	// Generate sends the conversation and returns the assistant's reply. When
	// req.OnText or req.OnChunk is set the reply is streamed: OnText
	// receives the text fragments in order — never reasoning or tool-call
	// JSON —, OnChunk every chunk (text, reasoning, tool-call deltas), and
	// an error from either aborts the call (Generate returns an error that
	// wraps it).
	//
	// Provider failures are returned as *Error (see its Retryable and
	// RetryAfter); requests that cannot be valid (unknown provider, missing
	// credentials, malformed tools) as an agent.CodeInvalid error; a done ctx
	// as an error wrapping ctx.Err().
	Generate(ctx context.Context, req Request) (*Response, error)
}

// Request is one model call.
type Request struct {
	Model    string          // "provider:model", e.g. "openai:gpt-4o-mini" (agent.ParseModel)
	Messages []agent.Message // system, user, assistant (with tool calls), tool results
	Tools    []agent.Tool    // name, description, parameters (JSON Schema)
	// Specs, when set, are the tools as compiled for the call's model
	// (CompileTools, agent.Compiled.Tools: made strict for its
	// provider's dialect, StrictDialect): sent as they are, in place of
	// Tools, which are otherwise compiled for the call.
	Specs       []agent.CompiledTool
	MaxTokens   int      // 0 = the provider's default
	Temperature *float64 // nil = the provider's default
	// Output, when set, asks for an answer that is a JSON object matching
	// its schema (see OutputFormat for how each provider is asked).
	Output *OutputFormat
	// CacheKey, when set, asks the provider to cache the request's stable
	// prefix — its tools, then its first message when that is a system
	// message — for the calls that send the same key and prefix: OpenAI
	// gets it as prompt_cache_key (which routes the calls to the same
	// cache), Anthropic gets cache_control breakpoints after the last
	// tool and after the first system message. Ollama and other
	// OpenAI-compatible servers get nothing: they cache, or not, on their
	// own.
	CacheKey string
	// ReasoningBudget, when positive, asks a model that can think before
	// it answers to do so with at most that many tokens: Anthropic's
	// extended thinking (budget_tokens, at least 1024). ReasoningEffort
	// ("low", "medium", "high") is OpenAI's reasoning_effort for its
	// reasoning models. Models that reason on their own (DeepSeek's,
	// Ollama's) need neither: their reasoning is streamed and stored
	// whenever they send it.
	ReasoningBudget int
	ReasoningEffort string
	// Media returns the bytes and media type behind a part's cas:// ref,
	// for a message's images and files: the provider is sent the bytes
	// (history keeps only the ref). Nil: parts cannot be sent, and a
	// request with one is refused.
	Media func(ctx context.Context, ref string) (data []byte, mimeType string, err error)
	// OnText, when set, streams the reply's text (see Model.Generate).
	OnText func(ctx context.Context, text string) error
	// OnChunk, when set, streams every chunk of the reply as the provider
	// sends it: text, reasoning and tool-call argument deltas. With both
	// set, a text chunk goes to OnChunk, then to OnText.
	OnChunk func(ctx context.Context, c Chunk) error
}

// Response is the assistant's reply.
type Response struct {
	Message agent.Message // role assistant: content and/or tool calls (ids, names, JSON arguments)
	// Reasoning is the model's reasoning before its answer, when the
	// provider returns it (reasoning_content, thinking blocks); never part
	// of Message.Content.
	Reasoning    string
	Usage        agent.Usage
	Model        string // "provider:model" actually used
	FinishReason string // agent.FinishStop, FinishToolCalls, FinishLength, FinishContentFilter (others passed through)
}

// ChunkKind says what a streamed Chunk carries.
type ChunkKind string

const (
	// ChunkText: a fragment of the answer's text (Chunk.Text).
	ChunkText ChunkKind = "text"
	// ChunkReasoning: a fragment of the model's reasoning (Chunk.Text).
	ChunkReasoning ChunkKind = "reasoning"
	// ChunkToolCall: a fragment of a tool call (Chunk.ToolCall).
	ChunkToolCall ChunkKind = "tool_call"
)

// Chunk is one piece of a streamed reply, in the order the provider sent
// it.
type Chunk struct {
	Kind ChunkKind
	// Text is the fragment of a text or reasoning chunk.
	Text string
	// ToolCall is the fragment of a tool_call chunk.
	ToolCall ToolCallDelta
}

// ToolCallDelta is a fragment of a tool call as the model streams it. Each
// delta names its call completely; the Args of a call's deltas, joined in
// order, are the call's arguments in the Response.
type ToolCallDelta struct {
	// Index is the call's position among the reply's tool calls, from 0.
	Index int
	// ID and Name are the call's id (as in Response.Message.ToolCalls) and
	// tool, on every delta of the call.
	ID   string
	Name string
	// Args is the next fragment of the call's JSON arguments; empty on a
	// delta that only announces the call.
	Args string
}

// Config says how to reach the providers. ConfigFromEnv fills it from the
// environment variables named on each field; a provider without its
// settings is unavailable and calls naming it fail with a message that
// names the variable to set.
type Config struct {
	// OpenAIAPIKey authenticates the openai provider (OPENAI_API_KEY). It
	// may be empty when OpenAIBaseURL points at a server that needs no key.
	OpenAIAPIKey string
	// OpenAIBaseURL points the openai provider at an OpenAI-compatible
	// server, including its /v1 (OPENAI_BASE_URL). Empty means
	// https://api.openai.com/v1.
	OpenAIBaseURL string
	// AnthropicAPIKey authenticates the anthropic provider (ANTHROPIC_API_KEY).
	AnthropicAPIKey string
	// AnthropicBaseURL overrides https://api.anthropic.com/v1 (ANTHROPIC_BASE_URL).
	AnthropicBaseURL string
	// OllamaHost is the Ollama server, "host:port" or a URL (OLLAMA_HOST);
	// its OpenAI-compatible API under /v1 is used.
	OllamaHost string
	// Providers are model providers of the program's own beside the
	// built-in ones, by the name agents use ("name:model"): any
	// langchaingo model (its many providers, or one you write). Their
	// calls go through the same Router (retries, parts, output schemas
	// by instruction). Not from the environment.
	Providers map[string]llms.Model
	// HTTPClient carries all provider traffic. Nil means a client without an
	// overall timeout (the caller's context bounds each call, which suits
	// long streams) on ProviderTransport. Its Transport is wrapped, never
	// modified.
	HTTPClient *http.Client
}

// ConfigFromEnv reads OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY,
// ANTHROPIC_BASE_URL and OLLAMA_HOST.
func ConfigFromEnv() Config {
	return Config{
		OpenAIAPIKey:     os.Getenv("OPENAI_API_KEY"),
		OpenAIBaseURL:    os.Getenv("OPENAI_BASE_URL"),
		AnthropicAPIKey:  os.Getenv("ANTHROPIC_API_KEY"),
		AnthropicBaseURL: os.Getenv("ANTHROPIC_BASE_URL"),
		OllamaHost:       os.Getenv("OLLAMA_HOST"),
	}
}

// placeholderKey is sent to OpenAI-compatible servers that need no key:
// langchaingo refuses to build a client without one.
const placeholderKey = "unused"

const defaultAnthropicBaseURL = "https://api.anthropic.com/v1"

// Router is a Model that picks the provider from the "provider:" prefix of
// Request.Model. Provider clients are built once, in New, and shared by
// all calls; a Router is safe for concurrent use.
type Router struct {
	providers   map[string]*provider
	unavailable map[string]string // provider → how to configure it
	secrets     []string          // redacted from error messages
}

var _ Model = (*Router)(nil)

// provider is one langchaingo client and what Router must know about it.
type provider struct {
	name  string
	model llms.Model
	// openAIWire: the provider speaks OpenAI's SSE, whose streams end with
	// "data: [DONE]".
	openAIWire bool
	// legacyMaxTokens sends max_tokens instead of max_completion_tokens,
	// which OpenAI-compatible servers such as Ollama understand.
	legacyMaxTokens bool
	// anthropic, when set, is the Messages API client the provider
	// calls instead of model (anthropic.go).
	anthropic *anthropicsdk.Client
	// moderation is the provider's moderation endpoint (moderation.go),
	// when it speaks OpenAI's API.
	moderation *openaisdk.Client
	// embeddings is the provider's embedding endpoint (embed.go), when it
	// speaks OpenAI's API.
	embeddings *openaisdk.Client
}

// MaxIdleConnsPerProvider is how many idle connections to one provider
// the default transport keeps for the next calls: as many as the model
// calls a worker runs at once, within reason. Go's default keeps two, so
// that under load all but two of the connections that finished a stream
// were closed and the next calls opened new ones — a TCP and TLS
// handshake in front of each call's first token, which to a distant
// provider costs more than the rest of the turn's own overhead.
const MaxIdleConnsPerProvider = 256

// ProviderTransport is the transport provider calls use unless
// Config.HTTPClient gives another: Go's default (proxy from the
// environment, HTTP/2, its timeouts), keeping MaxIdleConnsPerProvider
// idle connections per provider.
func ProviderTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * MaxIdleConnsPerProvider
	t.MaxIdleConnsPerHost = MaxIdleConnsPerProvider
	return t
}

// New builds the clients of the providers cfg configures. It fails with a
// CodeInvalid error on malformed settings (a base URL that is not an
// http(s) URL); a provider left unconfigured is not an error until a
// request names it.
func New(cfg Config) (*Router, error) {
	var hc http.Client
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
	}
	base := hc.Transport
	if base == nil {
		base = ProviderTransport()
	}
	hc.Transport = &transport{base: base, now: time.Now}

	r := &Router{providers: map[string]*provider{}, unavailable: map[string]string{}}
	for _, s := range []string{cfg.OpenAIAPIKey, cfg.AnthropicAPIKey} {
		if s != "" {
			r.secrets = append(r.secrets, s)
		}
	}

	// openai
	if cfg.OpenAIAPIKey == "" && cfg.OpenAIBaseURL == "" {
		r.unavailable[agent.ProviderOpenAI] = "set OPENAI_API_KEY (or OPENAI_BASE_URL for an OpenAI-compatible server)"
	} else {
		baseURL := cfg.OpenAIBaseURL
		if baseURL != "" {
			if err := checkURL("OPENAI_BASE_URL", baseURL); err != nil {
				return nil, err
			}
		}
		key := cmp.Or(cfg.OpenAIAPIKey, placeholderKey)
		// WithBaseURL is always given, even empty, so langchaingo never
		// falls back to its own reading of the environment.
		m, err := openai.New(openai.WithToken(key), openai.WithBaseURL(baseURL), openai.WithHTTPClient(&hc))
		if err != nil {
			return nil, fmt.Errorf("create openai client: %w", err)
		}
		r.providers[agent.ProviderOpenAI] = &provider{name: agent.ProviderOpenAI, model: m, openAIWire: true,
			moderation: moderationClient(key, baseURL, &hc), embeddings: embeddingClient(key, baseURL, &hc)}
	}

	// ollama, through its OpenAI-compatible API
	if cfg.OllamaHost == "" {
		r.unavailable[agent.ProviderOllama] = "set OLLAMA_HOST (e.g. 127.0.0.1:11434)"
	} else {
		baseURL, err := ollamaBaseURL(cfg.OllamaHost)
		if err != nil {
			return nil, err
		}
		m, err := openai.New(openai.WithToken("ollama"), openai.WithBaseURL(baseURL), openai.WithHTTPClient(&hc))
		if err != nil {
			return nil, fmt.Errorf("create ollama client: %w", err)
		}
		r.providers[agent.ProviderOllama] = &provider{name: agent.ProviderOllama, model: m, openAIWire: true, legacyMaxTokens: true,
			embeddings: embeddingClient("ollama", baseURL, &hc)}
	}

	// anthropic
	if cfg.AnthropicAPIKey == "" {
		r.unavailable[agent.ProviderAnthropic] = "set ANTHROPIC_API_KEY"
	} else {
		baseURL := cfg.AnthropicBaseURL
		if baseURL == "" {
			baseURL = defaultAnthropicBaseURL
		} else if err := checkURL("ANTHROPIC_BASE_URL", baseURL); err != nil {
			return nil, err
		}
		c := anthropicClient(cfg.AnthropicAPIKey, baseURL, &hc)
		r.providers[agent.ProviderAnthropic] = &provider{name: agent.ProviderAnthropic, anthropic: &c}
	}
	if err := r.addOwn(cfg.Providers); err != nil {
		return nil, err
	}
	return r, nil
}

// addOwn adds the program's own providers (Config.Providers).
func (r *Router) addOwn(own map[string]llms.Model) error {
	for name, m := range own {
		if err := CheckProviderName(name); err != nil {
			return err
		}
		if m == nil {
			return agent.Errorf(agent.CodeInvalid, "model provider %q: no model", name)
		}
		r.providers[name] = &provider{name: name, model: m}
	}
	return nil
}

// providerName is what a provider of the program's own may be named.
var providerName = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// CheckProviderName says whether name may name a provider of the
// program's own: lowercase, not a built-in one's.
func CheckProviderName(name string) error {
	if !providerName.MatchString(name) {
		return agent.Errorf(agent.CodeInvalid, "model provider %q: want lowercase letters, digits, - and _, starting with a letter", name)
	}
	if slices.Contains(agent.Providers(), name) {
		return agent.Errorf(agent.CodeInvalid, "model provider %q is built in: name yours otherwise", name)
	}
	return nil
}

// Known names the providers calls may name: the built-in ones and the
// program's own.
func (r *Router) Known() []string {
	out := agent.Providers()
	for name := range r.providers {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func checkURL(env, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return agent.Errorf(agent.CodeInvalid, "%s %q: want an http(s) URL such as https://api.example.com/v1", env, raw)
	}
	return nil
}

// ollamaBaseURL turns OLLAMA_HOST ("host", "host:port" or a URL) into the
// base URL of Ollama's OpenAI-compatible API.
func ollamaBaseURL(host string) (string, error) {
	h := strings.TrimSpace(host)
	bare := !strings.Contains(h, "://")
	if bare {
		h = "http://" + h
	}
	u, err := url.Parse(h)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", agent.Errorf(agent.CodeInvalid, "OLLAMA_HOST %q: want host:port or an http(s) URL", host)
	}
	if bare && u.Port() == "" {
		u.Host += ":11434" // Ollama's default port
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, "/v1") {
		u.Path += "/v1"
	}
	return u.String(), nil
}

// Check reports whether model ("provider:model") can be called, so that a
// worker can reject a catalog naming an unconfigured provider at start.
func (r *Router) Check(model string) error {
	_, _, err := r.resolve(model)
	return err
}

func (r *Router) resolve(model string) (*provider, string, error) {
	name, modelName, err := agent.ParseModel(model)
	if err != nil {
		return nil, "", err
	}
	if p, ok := r.providers[name]; ok {
		return p, modelName, nil
	}
	if how, ok := r.unavailable[name]; ok {
		return nil, "", agent.Errorf(agent.CodeInvalid, "model %q: provider %s is not configured: %s", model, name, how)
	}
	return nil, "", agent.Errorf(agent.CodeInvalid, "model %q: unknown provider %q (known: %s)", model, name, strings.Join(r.Known(), ", "))
}

// callOptions are langchaingo's options of a call through an
// OpenAI-wire provider, streaming aside.
func callOptions(p *provider, modelName string, req Request, format json.RawMessage, tools []llms.Tool) []llms.CallOption {
	opts := []llms.CallOption{llms.WithModel(modelName)}
	if format != nil {
		// The transport puts the schema in place of JSON mode's bare
		// json_object (OutputFormat).
		opts = append(opts, llms.WithJSONMode())
	}
	if len(tools) > 0 {
		opts = append(opts, llms.WithTools(tools))
	}
	if req.MaxTokens > 0 {
		opts = append(opts, llms.WithMaxTokens(req.MaxTokens))
	}
	if req.Temperature != nil {
		opts = append(opts, llms.WithTemperature(*req.Temperature))
	}
	if p.legacyMaxTokens {
		opts = append(opts, llms.WithMetadata(map[string]any{"openai:use_legacy_max_tokens": true}))
	}
	return opts
}

// Generate implements Model.
func (r *Router) Generate(ctx context.Context, req Request) (*Response, error) {
	p, modelName, err := r.resolve(req.Model)
	if err != nil {
		return nil, err
	}
	fullName := p.name + ":" + modelName
	if len(req.Messages) == 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "call %s: no messages", fullName)
	}
	if err := checkParts(p.name, req); err != nil {
		return nil, err
	}
	var format json.RawMessage
	messages := req.Messages
	if req.Output != nil {
		if p.openAIWire {
			if format, err = responseFormat(*req.Output); err != nil {
				return nil, err
			}
		} else {
			messages = withSchemaInstruction(messages, *req.Output)
		}
	}
	if p.anthropic != nil {
		return r.generateAnthropic(ctx, p, modelName, fullName, req, messages)
	}
	msgs, err := toMessages(ctx, req, messages)
	if err != nil {
		return nil, err
	}
	tools, err := toTools(req.specs())
	if err != nil {
		return nil, err
	}

	streaming := req.OnText != nil || req.OnChunk != nil
	st := &callState{omitTemperature: req.Temperature == nil, watchDone: streaming && p.openAIWire, aliasReasoning: p.openAIWire,
		responseFormat: format}
	if req.CacheKey != "" && p.name == agent.ProviderOpenAI {
		st.promptCacheKey = req.CacheKey
	}
	if req.ReasoningEffort != "" && p.name == agent.ProviderOpenAI {
		st.reasoningEffort = req.ReasoningEffort
	}
	ctx = withCallState(ctx, st)
	opts := callOptions(p, modelName, req, format, tools)
	if streaming {
		opts = append(opts, streamOptions(&chunker{req: req, st: st})...)
	}

	resp, genErr := p.model.GenerateContent(ctx, msgs, opts...)
	if genErr != nil {
		return nil, r.failure(ctx, fullName, st, genErr)
	}
	snap := st.snapshot()
	if snap.watchDone && !snap.sawDone {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("call %s: %w", fullName, ctx.Err())
		}
		return nil, &Error{Model: fullName, Status: snap.status, Retryable: true,
			Message: "the response stream ended before [DONE]: the reply is incomplete"}
	}
	out, err := toResponse(resp)
	if err != nil {
		return nil, &Error{Model: fullName, Status: snap.status, Retryable: true, Message: r.redact(err.Error())}
	}
	out.Model = fullName
	return out, nil
}
