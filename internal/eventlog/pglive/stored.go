package pglive

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// The batches of model calls in flight (eventlog.Appender): stored as they
// are published, fenced per stream by step and attempt. See the migration
// 013_live_batches.sql for the tables.
const (
	// sqlAppend stores a batch and publishes it, in one statement: the
	// fence upsert locks the stream's row (even when its WHERE is false),
	// so appends and claims of one stream happen one at a time, and an
	// append of an attempt older than the stream's claim stores nothing
	// and notifies nobody. It returns one row when the batch was stored.
	sqlAppend = `
WITH f AS (
  INSERT INTO live_fences AS f (stream_id, step, attempt) VALUES ($1, $2, $3)
  ON CONFLICT (stream_id) DO UPDATE SET step = EXCLUDED.step, attempt = EXCLUDED.attempt, updated_at = now()
  WHERE (f.step, f.attempt) <= (EXCLUDED.step, EXCLUDED.attempt)
  RETURNING 1
), b AS (
  INSERT INTO live_batches (stream_id, first, last, events)
  SELECT $1, $4, $5, $6 FROM f
  ON CONFLICT DO NOTHING
  RETURNING 1
)
SELECT pg_notify($7, $8)::text FROM b`

	// sqlAppendHeld stores and publishes a batch of an attempt that holds
	// the stream already (it claimed it, or appended before): only while
	// the stream's fence is still the attempt's own. Unlike sqlAppend it
	// never makes the fence row: once the turn has forgotten the stream
	// (sqlForget, which drops the row), an attempt it sealed or gave up
	// on, which runs on until its next heartbeat, stores and publishes
	// nothing — its batch would take the indices of the turn's closing
	// events.
	sqlAppendHeld = `
WITH f AS (
  UPDATE live_fences SET updated_at = now()
  WHERE stream_id = $1 AND step = $2 AND attempt = $3
  RETURNING 1
), b AS (
  INSERT INTO live_batches (stream_id, first, last, events)
  SELECT $1, $4, $5, $6 FROM f
  ON CONFLICT DO NOTHING
  RETURNING 1
)
SELECT pg_notify($7, $8)::text FROM b`

	// sqlPut stores the turn's own events handed to an activity and
	// publishes them, unfenced: they are the turn's, the same whichever
	// attempt hands them on. Handed on again (a workflow task run again),
	// they are stored and published once.
	sqlPut = `
WITH b AS (
  INSERT INTO live_batches (stream_id, first, last, events) VALUES ($1, $2, $3, $4)
  ON CONFLICT DO NOTHING
  RETURNING 1
)
SELECT pg_notify($5, $6)::text FROM b`

	// sqlPublishFenced publishes a batch of a signalled call, fenced as
	// sqlAppend is and storing nothing: the turn logs it from its signal.
	// It returns one row when the batch was published.
	sqlPublishFenced = `
WITH f AS (
  INSERT INTO live_fences AS f (stream_id, step, attempt) VALUES ($1, $2, $3)
  ON CONFLICT (stream_id) DO UPDATE SET step = EXCLUDED.step, attempt = EXCLUDED.attempt, updated_at = now()
  WHERE (f.step, f.attempt) <= (EXCLUDED.step, EXCLUDED.attempt)
  RETURNING 1
)
SELECT pg_notify($4, $5)::text FROM f`

	// sqlClaim makes (step, attempt) the stream's newest call; no row when
	// a newer one has claimed it.
	sqlClaim = `
INSERT INTO live_fences AS f (stream_id, step, attempt) VALUES ($1, $2, $3)
ON CONFLICT (stream_id) DO UPDATE SET step = EXCLUDED.step, attempt = EXCLUDED.attempt, updated_at = now()
WHERE (f.step, f.attempt) <= (EXCLUDED.step, EXCLUDED.attempt)
RETURNING 1`

	// sqlNextAttempt makes a new attempt of step the stream's newest
	// call and returns its number: least, or one past the step's attempt
	// that claimed the stream last, whichever is more; no row when a later
	// step has claimed it, or the step was sealed.
	sqlNextAttempt = `
INSERT INTO live_fences AS f (stream_id, step, attempt) VALUES ($1, $2, $3)
ON CONFLICT (stream_id) DO UPDATE SET
  attempt = CASE WHEN f.step = EXCLUDED.step THEN GREATEST(f.attempt + 1, EXCLUDED.attempt) ELSE EXCLUDED.attempt END,
  step = EXCLUDED.step, updated_at = now()
WHERE f.step < EXCLUDED.step OR (f.step = EXCLUDED.step AND f.attempt < 2147483647)
RETURNING attempt`

	// sqlStored reads the batches that hold events after an index.
	sqlStored = `SELECT events FROM live_batches WHERE stream_id = $1 AND last > $2 ORDER BY first`

	// sqlForget drops a stream's batches and fence once its log holds
	// them, and, a few at a time, what turns that never got that far (a
	// terminated workflow) left behind.
	sqlForget = `
WITH b AS (DELETE FROM live_batches WHERE stream_id = $1),
     f AS (DELETE FROM live_fences WHERE stream_id = $1),
     old AS (DELETE FROM live_fences WHERE ctid IN (
       SELECT ctid FROM live_fences WHERE updated_at < now() - $2::interval LIMIT 100))
DELETE FROM live_batches WHERE ctid IN (
  SELECT ctid FROM live_batches WHERE created_at < now() - $2::interval LIMIT 100)`
)

// Sinks publishes a signalled call's batches fenced only when the live
// path is a Fencer, and otherwise unfenced, without a word.
var _ eventlog.Fencer = (*Publisher)(nil)

// keepAbandoned is how long the batches of a turn that never forgot them
// are kept: far longer than any model call streams.
const keepAbandoned = "6 hours"

// Append stores a batch of a model call in flight and publishes it
// (eventlog.Appender). held: the attempt holds the stream already (it
// claimed it, or appended before), and the batch is stored only while the
// stream's fence is its own (sqlAppendHeld); otherwise the append claims
// the stream for it (sqlAppend). eventlog.ErrFenced: a newer attempt of
// the call, or a later call, has claimed the stream, or the turn has
// forgotten it, and nothing was stored.
func (p *Publisher) Append(ctx context.Context, b agent.TokenBatch, held bool) error {
	if len(b.Events) == 0 {
		return nil
	}
	last, events, payload, err := encodeStored(b)
	if err != nil {
		return err
	}
	sql := sqlAppend
	if held {
		sql = sqlAppendHeld
	}
	return p.fenced(ctx, b, "store batch", sql, b.StreamID, b.Step, b.Attempt, b.First, last, events, Channel, payload)
}

// Put stores the turn's own events that it handed an activity
// (contract.Live) and publishes them, unfenced (eventlog.Appender): with
// its calls' batches, the live path then holds the run's log from its
// first hand-on, and a follower that joins while a local model call holds
// the turn's workflow task reads it there rather than wait for the task
// to answer a query.
func (p *Publisher) Put(ctx context.Context, b agent.TokenBatch) error {
	if len(b.Events) == 0 {
		return nil
	}
	last, events, payload, err := encodeStored(b)
	if err != nil {
		return err
	}
	if _, err := p.pool.Exec(ctx, sqlPut, b.StreamID, b.First, last, events, Channel, payload); err != nil {
		return fmt.Errorf("store the turn's events: %w", err)
	}
	return nil
}

// PublishFenced publishes a batch of a model call that signals its
// batches to its turn, once the turn has been sent it (eventlog.Fencer):
// fenced as Append is, so that an attempt the turn has given up on, whose
// batches the turn refuses, shows followers nothing. A batch too large
// for a notification goes as a wake-up. eventlog.ErrFenced: a newer
// attempt of the call, or a later call, has claimed the stream, and
// nothing was published.
func (p *Publisher) PublishFenced(ctx context.Context, b agent.TokenBatch) error {
	payload, err := notification(b)
	if err != nil {
		return err
	}
	return p.fenced(ctx, b, "publish batch", sqlPublishFenced, b.StreamID, b.Step, b.Attempt, Channel, payload)
}

// fenced runs sql, which returns a row only while b's call holds its
// stream: none is eventlog.ErrFenced. what names the work in errors.
func (p *Publisher) fenced(ctx context.Context, b agent.TokenBatch, what, sql string, args ...any) error {
	tag, err := p.pool.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("batch %d of stream %q, step %d, attempt %d: %w", b.First, b.StreamID, b.Step, b.Attempt, eventlog.ErrFenced)
	}
	return nil
}

// encodeStored encodes a batch to store: the index of its last event, its
// events, and its notification (notification).
func encodeStored(b agent.TokenBatch) (last int64, events []byte, payload string, err error) {
	last = b.First + int64(len(b.Events)) - 1
	if events, err = json.Marshal(b.Events); err != nil {
		return 0, nil, "", fmt.Errorf("encode batch: %w", err)
	}
	payload, err = notification(b)
	return last, events, payload, err
}

// notification is a batch's notification: the batch, or a wake-up when
// it is too large for one (its followers read it stored, or from the
// log).
func notification(b agent.TokenBatch) (string, error) {
	msg, err := json.Marshal(message{StreamID: b.StreamID, Events: b.Events, At: time.Now().UnixMicro()})
	if err != nil {
		return "", fmt.Errorf("encode batch: %w", err)
	}
	if len(msg) > maxPayload {
		if msg, err = json.Marshal(message{StreamID: b.StreamID}); err != nil {
			return "", fmt.Errorf("encode wake-up: %w", err)
		}
	}
	return string(msg), nil
}

// Claim makes attempt of step the stream's newest call, so that no earlier
// one publishes again, then returns what the stream's calls stored at
// index from and after (eventlog.Appender). eventlog.ErrFenced: a newer
// one has claimed it.
func (p *Publisher) Claim(ctx context.Context, streamID string, step, attempt int, from int64) ([]agent.Event, error) {
	if err := p.Fence(ctx, streamID, step, attempt); err != nil {
		return nil, err
	}
	// A separate statement: it sees every append that committed before
	// the claim, and the claim refuses every later one.
	evs, err := stored(ctx, p.pool, streamID, from-1)
	if err != nil {
		return nil, err
	}
	for i, e := range evs {
		if e.Index != from+int64(i) {
			return nil, fmt.Errorf("stored events of stream %q do not continue its log at index %d", streamID, from+int64(i))
		}
	}
	return evs, nil
}

// Fence makes attempt of step the stream's newest call, so that no
// earlier one appends or publishes again (eventlog.Fencer).
// eventlog.ErrFenced: a newer one has claimed it.
func (p *Publisher) Fence(ctx context.Context, streamID string, step, attempt int) error {
	tag, err := p.pool.Exec(ctx, sqlClaim, streamID, step, attempt)
	if err != nil {
		return fmt.Errorf("claim stream %q: %w", streamID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("claim stream %q for step %d, attempt %d: %w", streamID, step, attempt, eventlog.ErrFenced)
	}
	return nil
}

// NextAttempt claims the stream for a new attempt of step, numbered least
// or one past the step's last claim, whichever is more, and returns its
// number (eventlog.Appender). eventlog.ErrFenced: a later step has
// claimed the stream, or the step was sealed.
func (p *Publisher) NextAttempt(ctx context.Context, streamID string, step, least int) (int, error) {
	var attempt int
	err := p.pool.QueryRow(ctx, sqlNextAttempt, streamID, step, least).Scan(&attempt)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("new attempt of step %d on stream %q: %w", step, streamID, eventlog.ErrFenced)
	}
	if err != nil {
		return 0, fmt.Errorf("new attempt of step %d on stream %q: %w", step, streamID, err)
	}
	return attempt, nil
}

// Stored returns what the stream's calls stored after index after,
// claiming nothing (eventlog.Appender).
func (p *Publisher) Stored(ctx context.Context, streamID string, after int64) ([]agent.Event, error) {
	return stored(ctx, p.pool, streamID, after)
}

// Forget drops what a stream's calls stored, once its log holds it
// (eventlog.Appender).
func (p *Publisher) Forget(ctx context.Context, streamID string) error {
	if _, err := p.pool.Exec(ctx, sqlForget, streamID, keepAbandoned); err != nil {
		return fmt.Errorf("forget stream %q: %w", streamID, err)
	}
	return nil
}

// Stored returns the events of the stream's calls in flight after index
// after (eventlog.LiveSource): what followers have been shown that the
// log does not hold yet.
func (h *Hub) Stored(ctx context.Context, streamID string, after int64) ([]agent.Event, error) {
	return stored(ctx, h.pool, streamID, after)
}

func stored(ctx context.Context, pool *pgxpool.Pool, streamID string, after int64) ([]agent.Event, error) {
	rows, err := pool.Query(ctx, sqlStored, streamID, after)
	if err != nil {
		return nil, fmt.Errorf("read stored events of stream %q: %w", streamID, err)
	}
	var out []agent.Event
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&raw}, func() error {
		var evs []agent.Event
		if err := json.Unmarshal(raw, &evs); err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		for _, e := range evs {
			if e.Index > after {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read stored events of stream %q: %w", streamID, err)
	}
	return out, nil
}
