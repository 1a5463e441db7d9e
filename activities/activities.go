package activities

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/policy"
	"github.com/agentflow/agentflow/internal/registry"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tools"
)

// Registered activity names. They are part of the public contract: they
// appear in workflow histories and in the Web UI.
const (
	LoadAgentName   = "LoadAgent"
	RouteName       = "Route"
	CallModelName   = "CallModel"
	ExecuteToolName = "ExecuteTool"
	SaveResultName  = "SaveResult"
)

// Activities holds the dependencies of every activity. Build it once in
// main and register it with RegisterWith.
type Activities struct {
	Store  *store.Store
	Model  llm.Model
	Tools  *tools.Registry
	Logger *zap.Logger
	// Temporal sends token batches to turns and reads a turn's event log
	// head when a streaming call is retried.
	Temporal client.Client
	// Events is the live path of stream events to gateways; nil means
	// none (gateways then read the turn's log).
	Events EventPublisher
	// StreamInterval is the time between token batches (default 200ms);
	// StreamMaxBytes sends a batch early when its text reaches that size
	// (default 2048).
	StreamInterval time.Duration
	StreamMaxBytes int
	// Policy applies tools' approval policies; nil means a default Checker.
	Policy *policy.Checker
	// Routes caches the tenants' compiled routing rules; nil routes every
	// request without an agent to the tenant's default.
	Routes *registry.Cache
	// PreviewBytes bounds the tool output copied into workflow history;
	// longer outputs are stored as blobs and passed by cas:// reference.
	// Default 2048.
	PreviewBytes int
	// SessionWindow is how many earlier session messages CallModel sends to
	// the model when a turn loads history. Default 50.
	SessionWindow int
}

var (
	defaultPolicyOnce sync.Once
	defaultPolicy     *policy.Checker
	defaultPolicyErr  error
)

func (a *Activities) policy() (*policy.Checker, error) {
	if a.Policy != nil {
		return a.Policy, nil
	}
	defaultPolicyOnce.Do(func() { defaultPolicy, defaultPolicyErr = policy.New() })
	return defaultPolicy, defaultPolicyErr
}

func (a *Activities) previewBytes() int {
	if a.PreviewBytes > 0 {
		return a.PreviewBytes
	}
	return 2048
}

func (a *Activities) sessionWindow() int {
	if a.SessionWindow > 0 {
		return a.SessionWindow
	}
	return 50
}

// classify turns a domain error into a Temporal error: codes that a retry
// cannot fix become non-retryable application errors with a stable type.
func classify(err error, notFoundType string) error {
	if err == nil {
		return nil
	}
	var e *agent.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case agent.CodeInvalid, agent.CodeConflict:
		return temporal.NewNonRetryableApplicationError(err.Error(), agent.ErrTypeInvalidRequest, nil)
	case agent.CodeNotFound:
		return temporal.NewNonRetryableApplicationError(err.Error(), notFoundType, nil)
	case agent.CodeLimit:
		return temporal.NewNonRetryableApplicationError(err.Error(), agent.ErrTypeInternal, nil)
	}
	return err
}

// modelError maps a provider failure to a Temporal error: retryable
// failures stay retryable (with the provider's Retry-After as the next
// delay), the rest fail the activity for good.
func modelError(err error) error {
	var le *llm.Error
	if errors.As(err, &le) {
		msg := fmt.Sprintf("model call failed: %s", le.Message)
		if !le.Retryable {
			return temporal.NewNonRetryableApplicationError(msg, agent.ErrTypeModelRejected, nil)
		}
		opts := temporal.ApplicationErrorOptions{}
		if le.RetryAfter > 0 {
			opts.NextRetryDelay = le.RetryAfter
		}
		return temporal.NewApplicationErrorWithOptions(msg, agent.ErrTypeModelFailed, opts)
	}
	if agent.IsCode(err, agent.CodeInvalid) {
		return temporal.NewNonRetryableApplicationError(err.Error(), agent.ErrTypeModelRejected, nil)
	}
	return fmt.Errorf("model call: %w", err)
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
