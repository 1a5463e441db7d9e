package pglive

import (
	"context"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/store"
)

// InterruptChannel is the Postgres NOTIFY channel of interruptions: the
// stream id of a turn whose model call in flight is to stop now.
const InterruptChannel = "agentflow_interrupts"

// Interrupt tells the worker running streamID's model call, if any, to
// stop it now (Interrupts). Send it after the signal that says why
// (cancel_turn) has been accepted: the turn, whose next workflow task
// holds that signal, then acts on it as it would without the
// interruption, only sooner. Like everything on the live path it may be
// lost: the turn then stops the call as it always did (the activity's
// heartbeat, or a local call's workflow task heartbeat).
func Interrupt(ctx context.Context, pool *pgxpool.Pool, streamID string) error {
	if _, err := pool.Exec(ctx, "SELECT pg_notify($1, $2)", InterruptChannel, streamID); err != nil {
		return fmt.Errorf("notify %s: %w", InterruptChannel, err)
	}
	return nil
}

// Interrupts LISTENs on InterruptChannel with one connection and stops
// the model calls this process runs for the streams named
// (activities.Interrupts): a local model call runs inside its turn's
// workflow task, which sees a signal only at its next heartbeat (8 s at
// Temporal's default), so a cancellation reaches the call this way
// instead, in milliseconds.
type Interrupts struct {
	pool   *pgxpool.Pool
	logger *zap.Logger

	mu        sync.Mutex
	calls     map[string]map[*context.CancelCauseFunc]struct{}
	connected bool
}

// NewInterrupts returns Interrupts; call Run to listen.
func NewInterrupts(pool *pgxpool.Pool, logger *zap.Logger) *Interrupts {
	return &Interrupts{pool: pool, logger: logger, calls: map[string]map[*context.CancelCauseFunc]struct{}{}}
}

// Run listens until ctx ends, reconnecting after failures. An
// interruption sent while it reconnects is lost (see Interrupt).
func (i *Interrupts) Run(ctx context.Context) error {
	return store.Listen(ctx, i.pool, InterruptChannel, i.logger, i.setConnected, i.interrupt)
}

// Connected reports whether the listener is up: interruptions sent now
// reach this process's calls.
func (i *Interrupts) Connected() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.connected
}

func (i *Interrupts) setConnected(up bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.connected = up
}

// Watch returns ctx, ended with the cause eventlog.ErrInterrupted when
// streamID is interrupted, and the function that stops watching, which
// the caller must call.
func (i *Interrupts) Watch(ctx context.Context, streamID string) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	key := &cancel
	i.mu.Lock()
	m := i.calls[streamID]
	if m == nil {
		m = map[*context.CancelCauseFunc]struct{}{}
		i.calls[streamID] = m
	}
	m[key] = struct{}{}
	i.mu.Unlock()
	return ctx, func() {
		i.mu.Lock()
		delete(m, key)
		if len(m) == 0 && len(i.calls[streamID]) == 0 {
			delete(i.calls, streamID)
		}
		i.mu.Unlock()
		cancel(nil)
	}
}

func (i *Interrupts) interrupt(streamID string) {
	i.mu.Lock()
	defer i.mu.Unlock()
	for c := range i.calls[streamID] {
		(*c)(eventlog.ErrInterrupted)
	}
}
