package gateway

import (
	"context"
	"sync"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// What every channel that follows turns shares: gRPC Stream and Resume,
// Server-Sent Events (sse.go) and WebSocket (ws.go) read a turn's events
// through the one EventSource (eventlog.Follower) and take a slot of the
// tenant's open streams while they do.

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
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.open[tenant]--; l.open[tenant] <= 0 {
				delete(l.open, tenant)
			}
		})
	}, nil
}

// OpenStreams is how many streams tenant has open on this process.
func (s *Service) OpenStreams(tenant string) int {
	s.streams.mu.Lock()
	defer s.streams.mu.Unlock()
	return s.streams.open[tenant]
}

// followNew starts a prepared turn and follows it from its first event,
// as Stream does: subscribed before the start (EventSource.FollowNew).
// started, when not nil, is called once the turn has started or been
// found, before its first event is sent.
func (s *Service) followNew(ctx context.Context, req agent.TurnRequest, started func(streamID string) error, send func(agent.Event) error) error {
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	return s.events.FollowNew(ctx, streamID, func() (string, error) {
		run, err := s.startPrepared(ctx, req)
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
