package server

import (
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/deploy"
	"github.com/agentflow/agentflow/internal/evals"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/reach"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/tools/mcptool"
	"github.com/agentflow/agentflow/internal/tools/openapitool"
)

// EnvVaultKey names the operator's vault key (Config.VaultKey).
const EnvVaultKey = "AGENTFLOW_VAULT_KEY"

// ScriptedModel serves the script name names ("demo" or a file) on a
// loopback port: the server to close and its base URL.
type ScriptedModel func(name string) (io.Closer, string, error)

// Config of a worker process. ConfigFromEnv reads it from the environment.
type Config struct {
	// TemporalAddress is the frontend's host:port. Env TEMPORAL_ADDRESS; default 127.0.0.1:7233.
	TemporalAddress string
	// TemporalHTTPAddr is the frontend's HTTP API, host:port, which
	// serves every tenant's workflows to whoever reaches it: tools never
	// may (egress). Env AGENTFLOW_TEMPORAL_HTTP_ADDR; default
	// TemporalAddress's host at port 7243, the server's default.
	TemporalHTTPAddr string
	// Namespace. Env TEMPORAL_NAMESPACE; default "default".
	Namespace string
	// TemporalConnection is the rest of how the process reaches the
	// frontend: TLS, mutual TLS, an API key, gRPC metadata (Env
	// TEMPORAL_TLS_*, TEMPORAL_API_KEY, TEMPORAL_GRPC_META_*, a profile
	// of TEMPORAL_CONFIG_FILE: TemporalConnection). Default: plaintext,
	// no credentials.
	TemporalConnection client.Options
	// TaskQueue. Env AGENTFLOW_TASK_QUEUE; default "agentflow".
	TaskQueue string
	// DatabaseURL of Postgres. Env DATABASE_URL; required.
	DatabaseURL string
	// HTTPAddr serves /healthz (and its alias /health), /livez and
	// /metrics: the admin port. Env AGENTFLOW_HTTP_ADDR; default
	// 127.0.0.1:9090; "off" disables it.
	HTTPAddr string
	// HTTPAPIAddr serves the HTTP/JSON API (gateway role only), beside
	// the gRPC API. Env AGENTFLOW_HTTP_API_ADDR; default 127.0.0.1:8080;
	// "off" (or empty) disables it.
	HTTPAPIAddr string
	// CORSOrigins are the browser origins whose pages may call the HTTP
	// API (gateway.ParseCORSOrigins: scheme://host[:port], each named).
	// Env AGENTFLOW_CORS_ORIGINS, comma-separated; default none: browsers
	// refuse every cross-origin call.
	CORSOrigins []string
	// ChatDevToken is a token of Tokens that the chat page signs in with
	// when its tab holds none (gateway.HTTPOptions.ChatDevToken): anyone
	// who opens the page gets it, so it is for a local stack only, which
	// sets it (`go tool task up`, `go tool task demo`), and is refused
	// unless the HTTP API listens on a loopback address. Env
	// AGENTFLOW_CHAT_DEV_TOKEN; default none.
	ChatDevToken string
	// WebUIURL is the Temporal Web UI's base URL (http or https): a
	// turn's timeline links each of its runs to its history there. Env
	// AGENTFLOW_WEB_UI_URL; default none (`go tool task up` and `demo`
	// set the dev server's, http://127.0.0.1:8233). TraceURL is a trace
	// viewer's link with {workflow_id} and {run_id} in it, which a
	// timeline fills in (URL-escaped). Env AGENTFLOW_TRACE_URL; default
	// none.
	WebUIURL, TraceURL string
	// MaxStreamsPerTenant bounds each tenant's open streams on this
	// gateway process — gRPC Stream and Resume calls, SSE answers and
	// WebSockets together — beyond which a new one is refused (HTTP 429,
	// gRPC ResourceExhausted). Env AGENTFLOW_MAX_STREAMS_PER_TENANT, 1 to
	// 1,000,000; default 0: gateway.DefaultMaxStreamsPerTenant (1000).
	MaxStreamsPerTenant int
	// MaxUploadBytes is the largest file the HTTP API's POST /v1/files
	// takes; a larger one is refused with 413 and nothing is stored. Env
	// AGENTFLOW_MAX_UPLOAD_BYTES, 1 to gateway.MaxUploadBytesLimit
	// (256 MiB); default 0: gateway.DefaultMaxUploadBytes (20 MiB).
	MaxUploadBytes int64
	// HTTPHeaderTimeout is how long a client of the HTTP API may take to
	// send a request's headers. Env AGENTFLOW_HTTP_HEADER_TIMEOUT, a
	// duration, 1s to 5m; default 0: DefaultHTTPHeaderTimeout (5s).
	HTTPHeaderTimeout time.Duration
	// HTTPBodyTimeout is how long a request's body, or a WebSocket
	// message, may take to arrive after its headers (its first frame);
	// a client that stalls is cut off with 408 (a socket is closed).
	// Env AGENTFLOW_HTTP_BODY_TIMEOUT, a duration, 1s to 1h; default 0:
	// gateway.DefaultBodyTimeout (30s).
	HTTPBodyTimeout time.Duration
	// HTTPClientInflightBytes bounds the bytes of one credential's
	// request bodies and WebSocket messages being received at once on
	// the HTTP API, at least the largest body or upload; HTTPInflightBytes
	// bounds every client's together, at least HTTPClientInflightBytes.
	// A body over either is refused with 429 before it is read. Bodies of
	// requests without a valid credential are never read. Env
	// AGENTFLOW_HTTP_CLIENT_INFLIGHT_BYTES and AGENTFLOW_HTTP_INFLIGHT_BYTES,
	// 1 to gateway.MaxInflightBytes (16 GiB); default 0:
	// gateway.DefaultClientInflightBytes (64 MiB, or the largest upload
	// when more) and gateway.DefaultInflightBytes (256 MiB, or the
	// per-client bound when more).
	HTTPClientInflightBytes, HTTPInflightBytes int64
	// OpenAPIMaxSpecBytes is the largest API document an openapi_action
	// entry may name by spec_url (read when a catalog is applied) or its
	// calls by openapi_url; a larger one is refused, naming this setting.
	// The document is narrowed to the operations granted as it is read,
	// so memory grows with its number of components, not with its size.
	// Env AGENTFLOW_OPENAPI_MAX_SPEC_BYTES, 1 to openapitool.MaxSpecBytes
	// (1 GiB); default 0: openapitool.DefaultMaxSpecBytes (64 MiB), which
	// admits GitHub's and Stripe's descriptions.
	OpenAPIMaxSpecBytes int64
	// MemoryEmbeddingModel embeds long-term memories ("provider:model"):
	// a tenant's memory takes it with its first memory and keeps it. Env
	// AGENTFLOW_MEMORY_EMBEDDING_MODEL; default DefaultMemoryEmbeddingModel.
	MemoryEmbeddingModel string
	// Model providers. Env OPENAI_API_KEY, OPENAI_BASE_URL, ANTHROPIC_API_KEY, OLLAMA_HOST.
	Model llm.Config
	// Script, when set, serves the scripted OpenAI-compatible model
	// in-process and points the openai provider at it: "demo" for the
	// built-in demo script, "auto" for the demo script only when no provider
	// is configured, else a script file. Env AGENTFLOW_SCRIPT. It needs
	// ScriptedModel: a worker without one refuses "demo" and a file, and
	// takes "auto" as no script.
	Script string
	// ScriptedModel serves a script (internal/scripted.Serve): set by the
	// binaries that link the scripted model — the starter, and workers
	// built with -tags scripted — and by no production worker.
	ScriptedModel ScriptedModel
	// ResultInlineLimit: results larger than this many bytes are stored as
	// blobs. Env AGENTFLOW_RESULT_INLINE_LIMIT; default 10 MiB.
	ResultInlineLimit int
	// ToolDataInline: a tool's structured output larger than this many
	// bytes is kept as a tenant blob, and the model sees its ref and a
	// preview. Env AGENTFLOW_TOOL_DATA_INLINE; default 64 KiB.
	ToolDataInline int
	// ObjectStore keeps blobs larger than its MinBlobBytes in an
	// S3-compatible object store (internal/objstore;
	// docs/operations/storage.md). Env AGENTFLOW_S3_* (objstore.ConfigFromEnv); default
	// none: every blob in PostgreSQL. The process does not start when
	// the bucket cannot be reached.
	ObjectStore objstore.Config
	// Roles this process plays: RoleWorker (the Temporal worker) and
	// RoleGateway (the gRPC and HTTP APIs). Env AGENTFLOW_ROLES, comma-separated;
	// default both. Empty means worker only.
	Roles []string
	// GRPCAddr is where the gateway listens. Env AGENTFLOW_GRPC_ADDR;
	// default 127.0.0.1:50051.
	GRPCAddr string
	// Tokens are the gateway's bearer tokens, each with its tenant, roles
	// and name. Env AGENTFLOW_TOKENS (see gateway.ParseTokens:
	// "<token>=<tenant>[:<roles>[:<name>]],…", the token in plain or as
	// sha256:<hex>); required with the gateway role.
	Tokens []gateway.Token
	// OIDC, when set, makes the gateway accept the JWTs of an OIDC
	// issuer beside Tokens, their claims mapped to a tenant, roles and a
	// name (internal/oidcauth). The gateway discovers the issuer and
	// fetches its keys at start, and does not start when it cannot, as
	// when PostgreSQL or Temporal cannot be reached. Env
	// AGENTFLOW_OIDC_ISSUER (which turns it on), AGENTFLOW_OIDC_AUDIENCE,
	// AGENTFLOW_OIDC_CLAIMS, AGENTFLOW_OIDC_TENANT and
	// AGENTFLOW_OIDC_ROLES; default off.
	OIDC *oidcauth.Config
	// GRPCTLS serves the gRPC API over TLS, and with a client CA over
	// mutual TLS. Env AGENTFLOW_GRPC_TLS_CERT, AGENTFLOW_GRPC_TLS_KEY and
	// AGENTFLOW_GRPC_CLIENT_CA; default: plaintext.
	GRPCTLS gateway.TLSConfig
	// StreamInterval is the time between token batches, 100ms to 250ms.
	// Env AGENTFLOW_STREAM_INTERVAL_MS; default 200.
	StreamInterval time.Duration
	// WorkflowPollers and ActivityPollers are the worker's concurrent long
	// polls per task queue kind. Env AGENTFLOW_WORKFLOW_POLLERS and
	// AGENTFLOW_ACTIVITY_POLLERS; default 4 each. Workflow pollers are
	// that many on the task queue and as many again on the worker's sticky
	// queue, scaled down to 2 each when the server says they are idle. A
	// task queue with partitions needs at least one poller per partition,
	// or tasks written to an unpolled partition wait for forwarding
	// (deploy/temporal-dynamicconfig.yaml).
	WorkflowPollers, ActivityPollers int
	// DeadlockDetectionTimeout is how long a workflow task may run before
	// the SDK takes it for a deadlock (TMPRL1101) and fails the task. A
	// worker on a CPU-starved machine, or built with the race detector,
	// needs more than the SDK's second. Env
	// AGENTFLOW_DEADLOCK_DETECTION_TIMEOUT, a duration, 1s to 1m; default
	// the SDK's 1s.
	DeadlockDetectionTimeout time.Duration
	// WorkflowCacheSize bounds how many workflows the worker process keeps
	// in memory between their tasks (the SDK's sticky cache, one setting
	// per process: the worker program applies it at start). A cached copy
	// of a turn that finished on another worker stays until the cache
	// evicts it, so under sustained load memory grows up to this bound.
	// Env AGENTFLOW_WORKFLOW_CACHE_SIZE, 100 to 1,000,000; default 0, the
	// SDK's 10,000.
	WorkflowCacheSize int
	// MCPCommands are the commands stdio MCP servers may run on this
	// worker: executable names (looked up in PATH) or absolute paths; a
	// catalog's mcp entry can only name one of them. Env
	// AGENTFLOW_MCP_COMMANDS, comma-separated; default none, and stdio
	// servers are refused.
	MCPCommands []string
	// EgressAllow is what the operator opens to tools beyond the public
	// internet, which every tenant's egress allowlist can only narrow:
	// CIDRs and IP literals (every port), IP:port and host:port entries
	// (egress.ParseAllow). A metadata address is opened only by an exact
	// entry. Env AGENTFLOW_EGRESS_ALLOW, comma-separated; default none: no
	// loopback, private, link-local or metadata address, whatever a
	// catalog says.
	EgressAllow []string
	// TemporalAllow is what each tenant's activity tools may name: task
	// queues and activity types of the teams' own workers
	// (AGENTFLOW_TEMPORAL_ALLOW, internal/reach). Nil: none, and catalogs
	// naming one are refused.
	TemporalAllow *reach.Policy
	// NexusBindings bind Nexus endpoints' task queues to a tenant and
	// roles: the worker serves agentflow.v1.Agents on each, its turns the
	// binding's (AGENTFLOW_NEXUS_BINDINGS, internal/nexusdoor). Default
	// none.
	NexusBindings []nexusdoor.Binding
	// JQMemory is each jq_transform program's memory budget, in bytes,
	// enforced by the kernel on the child process that runs it; JQPrograms
	// is the most programs a process runs at once. Env
	// AGENTFLOW_JQ_MEMORY_MB (16–4096, default 256) and
	// AGENTFLOW_JQ_PROGRAMS (1–64, default 4).
	JQMemory   int64
	JQPrograms int
	// ProgramMemory is each code-mode program's memory budget, in bytes,
	// enforced by the kernel on the child process that runs it; Programs
	// is the most programs a process runs at once (internal/program). Env
	// AGENTFLOW_PROGRAM_MEMORY_MB (16–4096, default 256) and
	// AGENTFLOW_PROGRAMS (1–64, default 4).
	ProgramMemory int64
	Programs      int
	// SecretGrants are the secret references each tenant's catalog may
	// name (secrets.ParseGrants): the worker's environment and mounted
	// files hold every tenant's secrets and the platform's, so the
	// operator says whose are whose. The platform's own variables, and
	// the files under /proc, /sys and /dev, are no tenant's whatever they
	// say. Env AGENTFLOW_SECRETS, `<tenant>=<ref>[+<ref>…],…` with * for
	// every tenant and refs ending in * as prefixes (env:ACME_*,
	// file:/var/run/secrets/acme/*); default none: no tenant may name a
	// secret.
	SecretGrants secrets.Grants
	// VaultKey seals the values behind tenants' PII placeholders and keys
	// their PII hashes (internal/guard). Env AGENTFLOW_VAULT_KEY: 32 bytes
	// in base64; default none, and a tenant whose catalog redacts into
	// placeholders has its prompts refused until the operator sets one.
	VaultKey []byte
	// PlatformAddrs are more of the platform's own listening addresses
	// (host:port), closed to tools whatever EgressAllow opens, beside
	// those the process knows from its own configuration (platformAddrs).
	// A loopback or unspecified host closes the port on every address of
	// the machine; a host name is resolved at start. Env
	// AGENTFLOW_PLATFORM_ADDRS, comma-separated; default none.
	PlatformAddrs []string
	// TracerProvider records the process's spans. Not from the
	// environment: nil means the provider the standard OTEL_* variables
	// describe (telemetry.FromEnv), which is none unless an OTLP endpoint
	// is set. Tests set one with an in-memory exporter.
	TracerProvider trace.TracerProvider
	// TraceContent records prompts, replies, tool arguments and tool
	// output on the model and tool calls' spans, cut to 16 KiB each. They
	// may hold personal data: only for an operator who means it. Env
	// AGENTFLOW_TRACE_CONTENT=true; default off.
	TraceContent bool
	// TelegramAPI is the Bot API's base URL Telegram answers are sent to
	// (activities.Deps.TelegramAPI). Env AGENTFLOW_TELEGRAM_API; default
	// https://api.telegram.org.
	TelegramAPI string
	// TemporalCompression is how requests to Temporal are compressed:
	// "gzip", "none", or "" (the default) for none when TemporalAddress
	// is a loopback address and gzip otherwise. gzip costs CPU on the
	// client and the server for every request, and saves bandwidth only
	// where there is a network to save it on. Env
	// AGENTFLOW_TEMPORAL_COMPRESSION.
	TemporalCompression string
	// Profiling serves Go's profiles (net/http/pprof) under /debug/pprof/
	// on the health and metrics listener (HTTPAddr), for an operator
	// finding where a process's time goes. They show code paths and
	// timings, not data, but a CPU profile costs CPU while it runs: keep
	// the listener private. Env AGENTFLOW_PPROF=true; default off.
	Profiling bool
	// ToolKinds are tool kinds the worker offers beside the built-in
	// ones (tools.Builtin), for a program that embeds the server with
	// kinds of its own, and for tests. Not from the environment; default
	// none.
	ToolKinds []tools.Kind
	// Hooks run around every model and tool call, after tracing
	// (internal/hooks), for a program that embeds the server with
	// concerns of its own: a guard, an audit log. Not from the
	// environment; default none.
	Hooks []hooks.Handler
	// Scorers are the worker's own checks on every evaluation case it
	// scores (evals.Scorer).
	Scorers []evals.Scorer
	// StopTimeout is how long a worker told to stop (SIGTERM) lets the
	// activities in flight finish — model calls stream to their end — once
	// it has stopped polling; what is still running then is cancelled and
	// retried on another worker. The process's other parts (the store, the
	// live path, the Temporal client) stay up until the worker has
	// stopped. A gateway ends its streams at once (their clients resume
	// elsewhere) and waits as long for its other calls in flight, such as
	// an Invoke of a turn. Give the orchestrator's grace period
	// (Kubernetes' terminationGracePeriodSeconds, compose's
	// stop_grace_period) a few seconds more. Env AGENTFLOW_STOP_TIMEOUT, a
	// duration (30s, 2m), 1s to 1h; default 0: DefaultStopTimeout.
	StopTimeout time.Duration
	// MaxModelTimeout is the operator's limit on one attempt of a model
	// call: an agent's limits.model_timeout_sec above it, or none, is
	// lowered to it for the turns this worker starts. Env
	// AGENTFLOW_MAX_MODEL_TIMEOUT, a duration, 1s to 1h; default 0: the
	// agent's, or its turn's timeout.
	MaxModelTimeout time.Duration
	// MaxToolTimeout is the operator's limit on one attempt of a tool
	// call: a tool's timeout_sec above it, or the default above it, is
	// lowered to it for the turns this worker starts. Env
	// AGENTFLOW_MAX_TOOL_TIMEOUT, a duration, 1s to 1h; default 0: the
	// tool's, at most agent.MaxToolTimeoutSec.
	MaxToolTimeout time.Duration
	// Deployment is the Temporal worker deployment and build this worker
	// process belongs to (Worker Deployment Versioning): a turn runs to
	// its end on the build that started it, and new turns go to the
	// deployment's current build. Env AGENTFLOW_DEPLOYMENT_NAME and
	// AGENTFLOW_BUILD_ID, both or neither; default none: an unversioned
	// worker, which takes any task of its task queue.
	Deployment deploy.Version
	// ModelLimits are the providers' limits the fleet's model calls are
	// held to (internal/governor), counted in Postgres across every
	// worker process. Env AGENTFLOW_MODEL_LIMITS (governor.ParseLimits:
	// `openai=requests:500/1m,input_tokens:200000/1m,concurrent:20;…`);
	// default none: calls are sent at once.
	ModelLimits governor.Limits
	// Retention is the operator's TTLs of blobs, results and transcripts
	// (store.Options.Retention), which a tenant's catalog may only narrow.
	// Env AGENTFLOW_RETENTION_BLOBS, _RESULTS, _TRANSCRIPTS (30d, 36h);
	// default none: keep forever. RetentionInterval is how often the
	// sweep runs (retention.go); env AGENTFLOW_RETENTION_INTERVAL, 1m to
	// 24h; default DefaultRetentionInterval.
	Retention         agent.Retention
	RetentionInterval time.Duration
}

// Validate reports missing settings before anything is started.
func (c Config) Validate() error {
	if _, err := Compression(c.TemporalAddress, c.TemporalCompression); err != nil {
		return err
	}
	if c.Script != "" && c.Script != "auto" && c.ScriptedModel == nil {
		return fmt.Errorf("AGENTFLOW_SCRIPT=%s: this worker links no scripted model (build it with -tags scripted, or run `go tool task up`)", c.Script)
	}
	switch {
	case c.DatabaseURL == "":
		return fmt.Errorf("DATABASE_URL is not set: point it at PostgreSQL, or run `go tool task up` for a local stack")
	case c.TemporalAddress == "":
		return fmt.Errorf("TEMPORAL_ADDRESS is empty")
	case c.TaskQueue == "":
		return fmt.Errorf("AGENTFLOW_TASK_QUEUE is empty")
	case c.Has(RoleGateway) && len(c.Tokens) == 0 && c.OIDC == nil:
		return fmt.Errorf("AGENTFLOW_TOKENS is empty: the gateway needs at least one <token>=<tenant>[:<roles>] entry, or an OIDC issuer (AGENTFLOW_OIDC_ISSUER) (or set AGENTFLOW_ROLES=worker to run without it)")
	case c.Has(RoleGateway) && c.GRPCAddr == "":
		return fmt.Errorf("AGENTFLOW_GRPC_ADDR is empty")
	case c.StreamInterval != 0 && (c.StreamInterval < 100*time.Millisecond || c.StreamInterval > 250*time.Millisecond):
		return fmt.Errorf("stream interval %s: want 100ms to 250ms (AGENTFLOW_STREAM_INTERVAL_MS)", c.StreamInterval)
	case c.WorkflowPollers != 0 && (c.WorkflowPollers < minPollers || c.WorkflowPollers > maxPollers):
		return fmt.Errorf("%d workflow pollers: want %d to %d (AGENTFLOW_WORKFLOW_POLLERS)", c.WorkflowPollers, minPollers, maxPollers)
	case c.ActivityPollers != 0 && (c.ActivityPollers < minPollers || c.ActivityPollers > maxPollers):
		return fmt.Errorf("%d activity pollers: want %d to %d (AGENTFLOW_ACTIVITY_POLLERS)", c.ActivityPollers, minPollers, maxPollers)
	case c.MaxStreamsPerTenant < 0 || c.MaxStreamsPerTenant > maxStreamsPerTenant:
		return fmt.Errorf("%d streams per tenant: want 1 to %d (AGENTFLOW_MAX_STREAMS_PER_TENANT)", c.MaxStreamsPerTenant, maxStreamsPerTenant)
	case c.MaxUploadBytes < 0 || c.MaxUploadBytes > gateway.MaxUploadBytesLimit:
		return fmt.Errorf("an upload limit of %d bytes: want 1 to %d (AGENTFLOW_MAX_UPLOAD_BYTES)", c.MaxUploadBytes, gateway.MaxUploadBytesLimit)
	case c.OpenAPIMaxSpecBytes < 0 || c.OpenAPIMaxSpecBytes > openapitool.MaxSpecBytes:
		return fmt.Errorf("an API document limit of %d bytes: want 1 to %d (%s)", c.OpenAPIMaxSpecBytes, openapitool.MaxSpecBytes, openapitool.EnvMaxSpecBytes)
	case c.MaxModelTimeout != 0 && (c.MaxModelTimeout < time.Second || c.MaxModelTimeout > time.Hour):
		return fmt.Errorf("a model timeout limit of %s: want 1s to 1h (AGENTFLOW_MAX_MODEL_TIMEOUT)", c.MaxModelTimeout)
	case c.MaxToolTimeout != 0 && (c.MaxToolTimeout < time.Second || c.MaxToolTimeout > time.Hour):
		return fmt.Errorf("a tool timeout limit of %s: want 1s to 1h (AGENTFLOW_MAX_TOOL_TIMEOUT)", c.MaxToolTimeout)
	case c.StopTimeout != 0 && (c.StopTimeout < minStopTimeout || c.StopTimeout > maxStopTimeout):
		return fmt.Errorf("stop timeout %s: want 1s to 1h (AGENTFLOW_STOP_TIMEOUT)", c.StopTimeout)
	case c.WorkflowCacheSize != 0 && (c.WorkflowCacheSize < minWorkflowCache || c.WorkflowCacheSize > maxWorkflowCache):
		return fmt.Errorf("workflow cache of %d: want %d to %d workflows (AGENTFLOW_WORKFLOW_CACHE_SIZE)", c.WorkflowCacheSize, minWorkflowCache, maxWorkflowCache)
	}
	if c.Has(RoleGateway) {
		if err := c.httpOptions().Check(); err != nil {
			return err
		}
	}
	if err := c.checkLinks(); err != nil {
		return err
	}
	if c.ChatDevToken != "" && !Loopback(c.HTTPAPIAddr) {
		return fmt.Errorf("%s hands its token to anyone who opens the chat page: it is for a local stack, whose HTTP API listens on a loopback address, not on %q (AGENTFLOW_HTTP_API_ADDR)", EnvChatDevToken, c.HTTPAPIAddr)
	}
	if c.Has(RoleGateway) && c.OIDC != nil {
		if err := c.OIDC.Validate(); err != nil {
			return err
		}
	}
	if err := c.Deployment.Validate(); err != nil {
		return err
	}
	for _, r := range c.Roles {
		if r != RoleWorker && r != RoleGateway {
			return fmt.Errorf("AGENTFLOW_ROLES: unknown role %q (roles: %s, %s)", r, RoleWorker, RoleGateway)
		}
	}
	for _, cmd := range c.MCPCommands {
		if err := mcptool.CheckExecutable(cmd); err != nil {
			return fmt.Errorf("AGENTFLOW_MCP_COMMANDS: %w", err)
		}
	}
	return nil
}

// Env names Config.WebUIURL's and Config.TraceURL's variables.
const (
	EnvWebUIURL = "AGENTFLOW_WEB_UI_URL"
	EnvTraceURL = "AGENTFLOW_TRACE_URL"
)

// checkLinks refuses a Web UI or trace link that is not an absolute
// http(s) URL, and a trace link that names neither the workflow nor the
// run.
func (c Config) checkLinks() error {
	for _, l := range []struct{ env, v string }{{EnvWebUIURL, c.WebUIURL}, {EnvTraceURL, c.TraceURL}} {
		if l.v == "" {
			continue
		}
		u, err := url.Parse(l.v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s=%q: want an absolute http or https URL", l.env, l.v)
		}
	}
	if c.TraceURL != "" && !strings.Contains(c.TraceURL, "{workflow_id}") && !strings.Contains(c.TraceURL, "{run_id}") {
		return fmt.Errorf("%s=%q: name the turn with {workflow_id} or {run_id} in it", EnvTraceURL, c.TraceURL)
	}
	return nil
}

// EnvChatDevToken names Config.ChatDevToken's variable.
const EnvChatDevToken = "AGENTFLOW_CHAT_DEV_TOKEN"

// envHTTPHeaderTimeout names Config.HTTPHeaderTimeout's variable.
const envHTTPHeaderTimeout = "AGENTFLOW_HTTP_HEADER_TIMEOUT"

// DefaultHTTPHeaderTimeout is Config.HTTPHeaderTimeout's default.
const DefaultHTTPHeaderTimeout = 5 * time.Second

// httpOptions are the HTTP API's limits of c; the server adds the doors,
// which need its store (doors.All).
func (c Config) httpOptions() gateway.HTTPOptions {
	return gateway.HTTPOptions{CORSOrigins: c.CORSOrigins, MaxUploadBytes: c.MaxUploadBytes, BodyTimeout: c.HTTPBodyTimeout,
		ClientInflightBytes: c.HTTPClientInflightBytes, InflightBytes: c.HTTPInflightBytes, ChatDevToken: c.ChatDevToken,
		Version: c.Deployment.BuildID}
}

// DefaultMemoryEmbeddingModel is Config.MemoryEmbeddingModel's default.
const DefaultMemoryEmbeddingModel = "openai:text-embedding-3-small"

// DefaultStopTimeout is Config.StopTimeout's default: what seed 004
// gives the jobs in flight when a worker is told to stop.
const DefaultStopTimeout = 30 * time.Second

// Bounds of StopTimeout.
const (
	minStopTimeout = time.Second
	maxStopTimeout = time.Hour
)

// maxStreamsPerTenant bounds MaxStreamsPerTenant.
const maxStreamsPerTenant = 1_000_000

// maxPollers bounds the poller settings; each poller holds a long poll
// open on the server.
const maxPollers = 64

// defaultPollers is the poller count per task kind when none is set.
const defaultPollers = 4

// minPollers is the fewest pollers allowed, and the floor workflow
// pollers scale down to.
const minPollers = 2

// Roles of a process.
const (
	RoleWorker  = "worker"
	RoleGateway = "gateway"
)

// Has reports whether the process plays role; no roles means the worker.
func (c Config) Has(role string) bool {
	if len(c.Roles) == 0 {
		return role == RoleWorker
	}
	return slices.Contains(c.Roles, role)
}

// Bounds of WorkflowCacheSize: below a hundred workflows, every task of a
// busy worker replays its workflow from the start.
const (
	minWorkflowCache = 100
	maxWorkflowCache = 1_000_000
)
