package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// What every channel that follows turns shares: gRPC Stream and Resume
// (and ListEvents, which waits for events when asked), Server-Sent Events (sse.go), WebSocket (ws.go), the OpenAI-compatible
// chat completions, the AI SDK, AG-UI, A2A and MCP read a turn's events
// through the one EventSource (eventlog.Follower), and every follow holds
// a slot of its tenant's open streams while it runs: the Service's
// EventSource (heldEvents) takes one unless the follow's context already
// holds one. A door that does work before it follows — sends a message,
// decides an approval — takes its slot first (holdStream), so that a
// request refused for want of one has done nothing.

// DefaultMaxStreamsPerTenant is how many streams a tenant may have open
// on one gateway process when Options.MaxStreamsPerTenant is not set:
// enough for a thousand clients following turns at once (the scale
// benchmark's load), few enough that one tenant's runaway client cannot
// take the process's memory from the others.
const DefaultMaxStreamsPerTenant = 1000

// streamSlots counts each tenant's open streams in this process.
type streamSlots struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

func newStreamSlots(max int) *streamSlots {
	return &streamSlots{max: max, open: map[string]int{}}
}

// take opens a stream of tenant, or refuses it (CodeRateLimited: HTTP
// 429, gRPC ResourceExhausted) when the tenant has max open. release
// closes it; calling it again does nothing.
func (l *streamSlots) take(tenant string) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[tenant] >= l.max {
		return nil, agent.Errorf(agent.CodeRateLimited,
			"tenant %q has %d streams open on this gateway, its limit (AGENTFLOW_MAX_STREAMS_PER_TENANT): close one, or try again later", tenant, l.max)
	}
	l.open[tenant]++
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.open[tenant]--; l.open[tenant] <= 0 {
			delete(l.open, tenant)
		}
	}), nil
}

// streamHeldKey marks a context that holds a slot of its tenant's streams.
type streamHeldKey struct{}

// HoldStream takes a slot of the caller's tenant's streams for what ctx
// does until release, or refuses it (CodeRateLimited) when the tenant
// has as many open as it may. A context that holds one already (a
// WebSocket's, which holds one while it is open) takes none.
func (s *Service) HoldStream(ctx context.Context) (context.Context, func(), error) {
	if ctx.Value(streamHeldKey{}) != nil {
		return ctx, func() {}, nil
	}
	release, err := s.streams.take(TenantOf(ctx))
	if err != nil {
		return ctx, nil, err
	}
	return context.WithValue(ctx, streamHeldKey{}, true), release, nil
}

// heldEvents is the Service's EventSource: each follow holds a slot of
// its stream's tenant while it runs, the one its context holds
// (holdStream) or one it takes, so that no door follows a turn
// uncounted.
type heldEvents struct {
	src     EventSource
	streams *streamSlots
}

func (h heldEvents) hold(ctx context.Context, streamID string) (func(), error) {
	if ctx.Value(streamHeldKey{}) != nil {
		return func() {}, nil
	}
	tenant, err := agent.StreamTenant(streamID)
	if err != nil {
		return nil, err
	}
	return h.streams.take(tenant)
}

// Follow implements EventSource.
func (h heldEvents) Follow(ctx context.Context, streamID string, after int64, send func(agent.Event) error) error {
	release, err := h.hold(ctx, streamID)
	if err != nil {
		return err
	}
	defer release()
	return h.src.Follow(ctx, streamID, after, send)
}

// FollowNew implements EventSource: the slot is taken before the
// stream is started.
func (h heldEvents) FollowNew(ctx context.Context, streamID string, start func() (string, error), send func(agent.Event) error) error {
	release, err := h.hold(ctx, streamID)
	if err != nil {
		return err
	}
	defer release()
	return h.src.FollowNew(ctx, streamID, start, send)
}

// Read implements EventSource: a read that may wait holds a slot while
// it does, as a follow does; one that answers at once holds none.
func (h heldEvents) Read(ctx context.Context, streamID string, after int64, limit int, wait time.Duration) (agent.EventsPage, error) {
	if wait > 0 {
		release, err := h.hold(ctx, streamID)
		if err != nil {
			return agent.EventsPage{}, err
		}
		defer release()
	}
	return h.src.Read(ctx, streamID, after, limit, wait)
}

// OpenStreams is how many streams tenant has open on this process.
func (s *Service) OpenStreams(tenant string) int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return s.streams.open[tenant]
}

// FollowNew starts a prepared turn and follows it from its first event,
// as Stream does: subscribed before the start (EventSource.FollowNew).
// started, when not nil, is called once the turn has started or been
// found, before its first event is sent.
func (s *Service) FollowNew(ctx context.Context, req agent.TurnRequest, started func(streamID string) error, send func(agent.Event) error) error {
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	return s.events.FollowNew(ctx, streamID, func() (string, error) {
		run, err := s.StartPrepared(ctx, req)
		if err != nil {
			return "", err
		}
		if started != nil {
			if err := started(streamID); err != nil {
				return "", err
			}
		}
		return run.GetRunID(), nil
	}, send)
}
