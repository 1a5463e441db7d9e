package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/evals"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/hooks"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/program"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/tools"
)

// Deps are what the activities need. New checks them, so that a worker
// with a missing dependency fails at start, not at its first turn.
type Deps struct {
	Store   *store.Store    // required
	Model   llm.Model       // required
	Tools   *tools.Registry // required
	Tenants *tenant.Cache   // required: the tenants' runtime settings
	Logger  *zap.Logger     // required
	// Temporal sends token batches to turns and reads a turn's event log
	// head when a streaming call is retried. Required.
	Temporal client.Client
	// Events is the live path of stream events to gateways
	// (pglive.Publisher); nil means none (gateways then read the turn's
	// log).
	Events eventlog.Publisher
	// Interrupts stops a model call in flight when its turn is
	// interrupted on the live path (pglive.Interrupts); nil: a call stops
	// only when Temporal cancels it.
	Interrupts Interrupts
	// Interrupt sends an interruption of a stream's model call on the
	// live path (pglive.Interrupt), for InterruptModel; nil: a steer is
	// taken in after the call in flight.
	Interrupt func(ctx context.Context, streamID string) error
	// Policy applies tools' approval policies; nil: New makes one.
	Policy *approval.Checker
	// Vault applies the tenants' PII redaction to what tools return, and
	// gives the tools a tenant allows the values behind placeholders
	// (nil: none).
	Vault *redact.Vault
	// Governor holds model calls to the providers' limits, shared by the
	// fleet (AGENTFLOW_MODEL_LIMITS); nil: calls are sent at once.
	Governor *governor.Governor
	// Memories keeps the long-term memories ExtractMemories writes
	// (nil: it stores none).
	Memories Memories

	// StreamInterval is the time between token batches; default 200ms.
	StreamInterval time.Duration
	// StreamMaxBytes sends a batch early when its text reaches that size;
	// default 2048.
	StreamMaxBytes int
	// PreviewBytes bounds the tool output copied into workflow history;
	// longer outputs are stored as blobs and passed by cas:// reference.
	// Default 2048.
	PreviewBytes int
	// SessionWindow is the most messages after a session's summary that
	// CallModel reads when a turn loads history; of them, the model gets
	// the latest that fit the agent's memory window (agent.Memory).
	// Default 200.
	SessionWindow int
	// DataInlineBytes is the size up to which a tool's data is shown to
	// the model whole; larger data is shown as a preview. Default 64 KiB.
	DataInlineBytes int
	// MaxResultBytes is the budget of one activity result, checked before
	// the result is returned (see DefaultMaxResultBytes for why 1 MiB);
	// lower it with the server's limit.blobSize.error. Default 1 MiB.
	MaxResultBytes int
	// Hooks run around every model and tool call (internal/hooks):
	// tracing and the concerns a worker adds, inside the activities' own
	// input guards, PII reveal and tool rate limit, and outside their
	// budgets, output guard, provider governor and PII redaction
	// (concerns). Default: none.
	Hooks *hooks.Registry
	// Scorers are the worker's own checks on every case an evaluation
	// scores (evals.Scorer), after the dataset's and a judge's.
	Scorers []evals.Scorer
	// TelegramAPI is the Bot API's base URL the Deliver activity sends
	// Telegram answers to (AGENTFLOW_TELEGRAM_API). Default
	// DefaultTelegramAPI.
	TelegramAPI string
	// MaxModelTimeout is the operator's limit on one attempt of a model
	// call (AGENTFLOW_MAX_MODEL_TIMEOUT): LoadAgent lowers the agent's
	// model timeout to it in the version a turn pins. Default 0: none.
	MaxModelTimeout time.Duration
	// MaxToolTimeout is the operator's limit on one attempt of a tool
	// call (AGENTFLOW_MAX_TOOL_TIMEOUT): LoadAgent lowers each tool's
	// timeout to it in the version a turn pins. Default 0: none.
	MaxToolTimeout time.Duration
	// Knowledge and Embedder store and embed the documents IngestPage
	// ingests; nil: this worker refuses ingests.
	Knowledge *knowledge.Store
	Embedder  knowledge.Embedder
	// Programs runs code mode's programs (RunProgram); nil: New makes a
	// runner with internal/program's defaults.
	Programs *program.Runner
}

// Defaults of Deps' settings.
const (
	DefaultStreamInterval = 200 * time.Millisecond
	DefaultStreamMaxBytes = 2048
	DefaultPreviewBytes   = 2048
	DefaultSessionWindow  = 200
	DefaultDataInline     = 64 << 10
	DefaultTelegramAPI    = "https://api.telegram.org"
)

// Activities holds the dependencies of every activity. Build it once in
// main with New and register it with Register.
type Activities struct {
	memories   Memories
	vault      *redact.Vault
	store      *store.Store
	model      llm.Model
	tools      *tools.Registry
	tenants    *tenant.Cache
	logger     *zap.Logger
	temporal   client.Client
	events     eventlog.Publisher
	interrupts Interrupts
	interrupt  func(ctx context.Context, streamID string) error
	gate       approval.Gate
	governor   *governor.Governor
	hooks      *hooks.Registry
	scorers    []evals.Scorer

	knowledge *knowledge.Store
	embedder  knowledge.Embedder
	programs  *program.Runner

	streamInterval  time.Duration
	streamMaxBytes  int
	previewBytes    int
	sessionWindow   int
	dataInlineBytes int
	maxResultBytes  int
	telegramAPI     string
	maxModelTimeout time.Duration
	maxToolTimeout  time.Duration

	// compiled keeps the compiled agents read or made (compiled.go).
	compiled compiledCache
	// handoffs are the model calls that run on after their local
	// activity handed them off (handoff.go).
	handoffs handoffs
}

// New checks the dependencies and fills the defaults.
func New(d Deps) (*Activities, error) {
	var missing []error
	for name, ok := range map[string]bool{
		"Store": d.Store != nil, "Model": d.Model != nil, "Tools": d.Tools != nil,
		"Tenants": d.Tenants != nil, "Logger": d.Logger != nil, "Temporal": d.Temporal != nil,
	} {
		if !ok {
			missing = append(missing, errors.New("activities: "+name+" is required"))
		}
	}
	if err := errors.Join(missing...); err != nil {
		return nil, err
	}
	checker := d.Policy
	if checker == nil {
		var err error
		if checker, err = approval.NewChecker(); err != nil {
			return nil, err
		}
	}
	a := &Activities{
		store: d.Store, model: d.Model, tools: d.Tools, tenants: d.Tenants, logger: d.Logger,
		temporal: d.Temporal, events: d.Events, interrupts: d.Interrupts, interrupt: d.Interrupt, gate: approval.Gate{Checker: checker, Policies: d.Tools, Grants: d.Store}, governor: d.Governor, vault: d.Vault,
		maxModelTimeout: d.MaxModelTimeout,
		maxToolTimeout:  d.MaxToolTimeout,
		knowledge:       d.Knowledge,
		embedder:        d.Embedder,
		streamInterval:  agent.OrDefault(d.StreamInterval, DefaultStreamInterval),
		streamMaxBytes:  agent.OrDefault(d.StreamMaxBytes, DefaultStreamMaxBytes),
		previewBytes:    agent.OrDefault(d.PreviewBytes, DefaultPreviewBytes),
		sessionWindow:   agent.OrDefault(d.SessionWindow, DefaultSessionWindow),
		dataInlineBytes: agent.OrDefault(d.DataInlineBytes, DefaultDataInline),
		maxResultBytes:  agent.OrDefault(d.MaxResultBytes, DefaultMaxResultBytes),
		telegramAPI:     cmp.Or(d.TelegramAPI, DefaultTelegramAPI),
		memories:        d.Memories,
		programs:        cmp.Or(d.Programs, program.New(program.Options{})),
	}
	a.scorers = d.Scorers
	a.hooks = hooks.New(a.concerns(d.Hooks)...)
	return a, nil
}

// concerns are the activities' own hooks around the worker's (own:
// tracing first, then the program's), in the order they start (ends run
// in reverse; internal/hooks):
//
//   - the agent's input guards, which refuse before anything is reserved;
//   - the PII reveal of a tool's arguments and the tool's rate limit,
//     before the worker's hooks: a tool call's span starts once the call
//     is admitted;
//   - the worker's hooks;
//   - the budget reservation, the output guard and the provider
//     governor's admission, after them: a model call's span covers the
//     wait. The governor returns first, ending the admission as soon as
//     the model has answered; the output guard checks the reply before
//     any hook before it sees it;
//   - the PII redaction of a tool's output, last, so that its return runs
//     first: every hook reads the output redacted;
//   - the injection guard's screen of what the model reads of a tool's
//     result, which runs after the call's hooks have ended.
func (a *Activities) concerns(own *hooks.Registry) []hooks.Handler {
	hs := []hooks.Handler{a.inputGuards(), a.piiReveal(), a.toolRateLimit()}
	hs = append(hs, own.Handlers()...)
	return append(hs, a.budgets(), a.outputGuardHook(), a.admission(), a.piiRedaction(), a.injectionScreen())
}

// agentVersion loads the version of its agent a turn runs, waiting out a
// database that is away (db); the error names the agent and version.
func (a *Activities) agentVersion(ctx context.Context, tenantID, agentID string, version int) (agent.Agent, error) {
	var ag agent.Agent
	err := a.db(ctx, "load agent", func() (err error) {
		ag, err = a.store.AgentVersion(ctx, tenantID, agentID, version)
		return err
	})
	if err != nil {
		return agent.Agent{}, fmt.Errorf("load agent %q version %d: %w", agentID, version, agentNotFound(err))
	}
	return ag, nil
}

// db runs a store operation and waits out a database that is away:
// with backoff, heartbeating, until ctx ends. Work the activity already
// did (a paid model call, a tool's side effects) is then stored late
// instead of done again.
func (a *Activities) db(ctx context.Context, what string, op func() error) error {
	wait := 250 * time.Millisecond
	for {
		err := op()
		if err == nil || !store.Unavailable(err) {
			return err
		}
		if ctx.Err() != nil {
			return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("%s: the database is unavailable: %w", what, err))
		}
		a.log(ctx).Warn("database unavailable; waiting to try again", zap.String("op", what), zap.Duration("wait", wait), zap.Error(err))
		if activity.IsActivity(ctx) && !activity.GetInfo(ctx).IsLocalActivity {
			activity.RecordHeartbeat(ctx)
		}
		select {
		case <-ctx.Done():
			return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("%s: the database is unavailable: %w", what, err))
		case <-time.After(wait):
		}
		wait = min(wait*2, 5*time.Second)
	}
}

// agentNotFound says what a missing agent or agent version means to a
// turn: AgentNotFound.
func agentNotFound(err error) error {
	if agent.IsCode(err, agent.CodeNotFound) {
		return agent.WithCode(agent.CodeAgentNotFound, err)
	}
	return err
}

// truncate returns at most n bytes of s, cut at a rune boundary.
func truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// sinks is the activity's way to its turn's event log (and to notify, a
// workflow that also receives its token batches), logging through the
// activity's logger.
func (a *Activities) sinks(ctx context.Context, notify string) eventlog.Sinks {
	return eventlog.Sinks{Temporal: a.temporal, Live: a.events, Notify: notify,
		Logger: tlog.NewStructuredLogger(slog.New(zapslog.NewHandler(a.log(ctx).Core())))}
}
