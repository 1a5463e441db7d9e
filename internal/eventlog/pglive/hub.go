package pglive

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/store"
)

// subscriberBuffer bounds what a slow follower can hold back; past it the
// follower is marked lagged and reads the log instead.
const subscriberBuffer = 256

// Hub LISTENs on Channel with one connection and fans messages out to
// subscriptions by stream id. Fan-out never blocks.
type Hub struct {
	pool   *pgxpool.Pool
	logger *zap.Logger

	mu        sync.Mutex
	subs      map[string]map[*Subscription]struct{}
	connected bool // the listener is up; while it is not, followers read the log

	// Metrics reports the live path's lag; nil reports nothing.
	Metrics *Metrics
}

// Subscription receives one stream's live messages (eventlog.Subscription).
type Subscription struct {
	hub      *Hub
	streamID string
	// c carries live events (none: a wake-up).
	c chan []agent.Event
	// lagged is signalled when messages were dropped (buffer full, or the
	// listener reconnected): the follower must read the log.
	lagged chan struct{}
}

// Events carries the stream's live batches; an empty one is a wake-up.
func (s *Subscription) Events() <-chan []agent.Event { return s.c }

// Lagged is signalled when messages may have been lost.
func (s *Subscription) Lagged() <-chan struct{} { return s.lagged }

// NewHub returns a Hub; call Run to listen.
func NewHub(pool *pgxpool.Pool, logger *zap.Logger) *Hub {
	return &Hub{pool: pool, logger: logger, subs: map[string]map[*Subscription]struct{}{}}
}

// Connected reports whether the listener is up: subscriptions made now
// get the live path from their start.
func (h *Hub) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.connected
}

// Subscribe starts receiving streamID's messages. Close it when done.
func (h *Hub) Subscribe(streamID string) eventlog.Subscription { return h.subscribe(streamID) }

func (h *Hub) subscribe(streamID string) *Subscription {
	s := &Subscription{hub: h, streamID: streamID, c: make(chan []agent.Event, subscriberBuffer), lagged: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[streamID]
	if m == nil {
		m = map[*Subscription]struct{}{}
		h.subs[streamID] = m
	}
	m[s] = struct{}{}
	if !h.connected {
		s.lag()
	}
	return s
}

// Close stops the subscription.
func (s *Subscription) Close() {
	h := s.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[s.streamID]; m != nil {
		delete(m, s)
		if len(m) == 0 {
			delete(h.subs, s.streamID)
		}
	}
}

func (s *Subscription) lag() {
	select {
	case s.lagged <- struct{}{}:
	default:
	}
}

// Run listens until ctx ends, reconnecting after failures.
func (h *Hub) Run(ctx context.Context) error {
	return store.Listen(ctx, h.pool, Channel, h.logger, h.setConnected, func(payload string) {
		var m message
		if err := json.Unmarshal([]byte(payload), &m); err != nil || m.StreamID == "" {
			h.logger.Debug("ignoring malformed stream notification", zap.Error(err))
			return
		}
		h.dispatch(m)
	})
}

// setConnected records the listener's state; every change makes all
// subscribers read the log, since messages may have been missed.
func (h *Hub) setConnected(up bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.connected = up
	for _, m := range h.subs {
		for s := range m {
			s.lag()
		}
	}
}

func (h *Hub) dispatch(m message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs[m.StreamID]) > 0 {
		h.Metrics.published(m.At, time.Now())
	}
	for s := range h.subs[m.StreamID] {
		select {
		case s.c <- m.Events:
		default:
			s.lag()
		}
	}
}
