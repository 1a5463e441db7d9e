package pglive

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentflow/agentflow/internal/agent"
)

// Channel is the Postgres NOTIFY channel of stream events.
const Channel = "agentflow_events"

// maxPayload stays under Postgres' 8000-byte NOTIFY limit.
const maxPayload = 7900

// message is a NOTIFY payload: a batch of events, or a wake-up (no events).
type message struct {
	StreamID string        `json:"s"`
	Events   []agent.Event `json:"e,omitempty"`
	// At is when the batch was published, in Unix microseconds: the
	// receiving hub reports the lag.
	At int64 `json:"t,omitempty"`
}

// Publisher sends events and wake-ups with NOTIFY.
type Publisher struct {
	pool *pgxpool.Pool
}

// NewPublisher returns a Publisher on pool.
func NewPublisher(pool *pgxpool.Pool) *Publisher { return &Publisher{pool: pool} }

// Publish sends a batch accepted by its turn. A batch too large for one
// notification is sent as a wake-up: followers read it from the log.
func (p *Publisher) Publish(ctx context.Context, b agent.TokenBatch) error {
	payload, err := notification(b)
	if err != nil {
		return err
	}
	return p.notify(ctx, payload)
}

// Wake tells followers of streamID to read its log.
func (p *Publisher) Wake(ctx context.Context, streamID string) error {
	payload, err := json.Marshal(message{StreamID: streamID})
	if err != nil {
		return fmt.Errorf("encode wake-up: %w", err)
	}
	return p.notify(ctx, string(payload))
}

func (p *Publisher) notify(ctx context.Context, payload string) error {
	if _, err := p.pool.Exec(ctx, "SELECT pg_notify($1, $2)", Channel, payload); err != nil {
		return fmt.Errorf("notify %s: %w", Channel, err)
	}
	return nil
}
