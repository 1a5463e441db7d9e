package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/agent"
)

// GovernorLimits are one governed key's limits, as the provider governor
// counts them: a zero count is no limit. Each window is the span over
// which its count is taken, back from the moment of the admission.
type GovernorLimits = agent.ModelLimits

// longestWindow is the longest of l's windows: a grant older than it
// counts against nothing but, while held, the concurrent calls.
func longestWindow(l GovernorLimits) time.Duration {
	return max(l.RequestWindow, l.InputWindow, l.OutputWindow, time.Minute)
}

// GovernorCall is a model call asking a governed key to admit it.
type GovernorCall struct {
	Key      string // the governed key: a provider, or provider:model
	CallID   string // the call's attempt, unique among the key's calls
	TenantID string
	// Priority orders the waiting calls: 1 first, then 2, …
	Priority int
	// Input and Output are the call's worst case in tokens: its counted
	// prompt and its max_tokens; the call settles them to its usage.
	Input, Output int64
	// Hold bounds how long an admitted call holds a concurrent slot if it
	// is never released: the attempt's time left.
	Hold time.Duration
	// Alive is how long the call stays queued without asking again.
	Alive time.Duration
}

// Why a call was not admitted (Admission.Reason).
const (
	GovernorPaused       = "paused"        // the provider asked to wait
	GovernorConcurrent   = "concurrent"    // every concurrent slot is held
	GovernorRequests     = "requests"      // the request window is full
	GovernorInputTokens  = "input_tokens"  // the input-token window is full
	GovernorOutputTokens = "output_tokens" // the output-token window is full
	GovernorQueue        = "queue"         // calls ahead of it are admitted first
)

// Admission is the governor's answer to a call.
type Admission struct {
	Granted bool
	// Reason says why the call was not admitted, one of the Governor*
	// reasons; "" when it was.
	Reason string
	// Retry is when asking again may admit the call, when the key's
	// counts say so (a window's oldest call leaving it, a pause ending);
	// 0 when only asking again will tell (a slot released, a call ahead
	// admitted).
	Retry time.Duration
	// Ahead is how many waiting calls go before this one.
	Ahead int
}

const (
	sqlEnsureGovernorKey = `INSERT INTO governor_keys (key) VALUES ($1) ON CONFLICT (key) DO NOTHING`
	sqlLockGovernorKey   = `SELECT clock_timestamp(), paused_until FROM governor_keys WHERE key = $1 FOR UPDATE`
	sqlHasGrant          = `SELECT EXISTS (SELECT 1 FROM governor_grants WHERE key = $1 AND call_id = $2)`
	sqlDropDeadWaiters   = `DELETE FROM governor_waiters WHERE key = $1 AND alive_until <= clock_timestamp()`
	// Grants past every window and no longer held count for nothing.
	sqlDropOldGrants = `
DELETE FROM governor_grants
WHERE key = $1 AND granted_at < clock_timestamp() - make_interval(secs => $2)
  AND (held_until IS NULL OR held_until <= clock_timestamp())`
	// A waiter keeps its place (since) while it keeps asking.
	sqlUpsertWaiter = `
INSERT INTO governor_waiters (key, call_id, tenant_id, priority, since, alive_until)
VALUES ($1, $2, $3, $4, clock_timestamp(), clock_timestamp() + make_interval(secs => $5))
ON CONFLICT (key, call_id) DO UPDATE SET alive_until = EXCLUDED.alive_until, priority = EXCLUDED.priority`
	// One statement, one now: the key's counts over each window (and,
	// when the request window is full, its grants' times), and the
	// caller's place among the live waiters, ordered by priority, then by
	// the tenant's grants within the fairness window (fewest first: a
	// tenant with many calls waiting takes turns with one with few), then
	// by arrival.
	sqlGovernorUse = `
WITH n AS (SELECT clock_timestamp() AS t),
u AS (
  SELECT
    count(*) FILTER (WHERE g.granted_at > n.t - make_interval(secs => $2)) AS reqs,
    count(*) FILTER (WHERE g.granted_at > n.t - make_interval(secs => $2)) >= $7 AS reqs_full,
    COALESCE(sum(g.input_tokens) FILTER (WHERE g.granted_at > n.t - make_interval(secs => $3)), 0)::bigint AS input,
    min(g.granted_at) FILTER (WHERE g.granted_at > n.t - make_interval(secs => $3)) AS input_oldest,
    COALESCE(sum(g.output_tokens) FILTER (WHERE g.granted_at > n.t - make_interval(secs => $4)), 0)::bigint AS output,
    min(g.granted_at) FILTER (WHERE g.granted_at > n.t - make_interval(secs => $4)) AS output_oldest,
    count(*) FILTER (WHERE g.held_until > n.t) AS held
  FROM n LEFT JOIN governor_grants g ON g.key = $1
  GROUP BY n.t),
q AS (
  SELECT w.call_id, row_number() OVER (ORDER BY w.priority, r.recent, w.since, w.call_id) AS pos
  FROM n CROSS JOIN governor_waiters w
  CROSS JOIN LATERAL (
    SELECT count(*) AS recent FROM governor_grants g
    WHERE g.key = w.key AND g.tenant_id = w.tenant_id AND g.granted_at > n.t - make_interval(secs => $5)
      AND NOT g.unanswered) r
  WHERE w.key = $1 AND w.alive_until > n.t)
SELECT n.t, u.reqs,
  CASE WHEN u.reqs_full THEN (SELECT array_agg(g.granted_at ORDER BY g.granted_at) FROM governor_grants g
    WHERE g.key = $1 AND g.granted_at > n.t - make_interval(secs => $2)) END,
  u.input, u.input_oldest, u.output, u.output_oldest, u.held,
  COALESCE((SELECT pos FROM q WHERE q.call_id = $6), 1)
FROM n, u`
	sqlInsertGrant = `
INSERT INTO governor_grants (key, call_id, tenant_id, granted_at, input_tokens, output_tokens, held_until)
VALUES ($1, $2, $3, clock_timestamp(), $4, $5, clock_timestamp() + make_interval(secs => $6))
ON CONFLICT (key, call_id) DO NOTHING`
	sqlDeleteWaiter = `DELETE FROM governor_waiters WHERE key = $1 AND call_id = $2`
	sqlDeleteGrant  = `DELETE FROM governor_grants WHERE key = $1 AND call_id = $2`
	// Settling keeps the worst case of a count the call did not report
	// (NULL); a call that reported neither had no answer (unanswered).
	sqlSettleGrant = `
UPDATE governor_grants SET held_until = NULL,
  input_tokens = COALESCE($3, input_tokens), output_tokens = COALESCE($4, output_tokens),
  unanswered = $3::bigint IS NULL AND $4::bigint IS NULL
WHERE key = $1 AND call_id = $2`
	sqlPauseGovernorKey = `
INSERT INTO governor_keys (key, paused_until) VALUES ($1, clock_timestamp() + make_interval(secs => $2))
ON CONFLICT (key) DO UPDATE SET paused_until = greatest(governor_keys.paused_until, EXCLUDED.paused_until)`
)

// governorUse is a key's counts as one admission sees them.
type governorUse struct {
	now            time.Time
	paused         *time.Time // nil: never paused
	requests, held int
	input, output  int64
	reqsAt         []time.Time // the request window's grants, oldest first
	inOld, outOld  *time.Time  // the oldest grant of each token window
	position       int         // the call's place among the waiting calls, from 1
}

// Admit decides whether the key admits the call now, and records the
// call as admitted (a grant) or as waiting. Every admission to a key
// holds the key's row lock from its counts to its grant, so the fleet's
// admissions to the key are decided one after the other, each seeing the
// grants before it: no window ever holds more than its limit of grants.
// The call is admitted when the key is not paused, each limit has room
// for it, and it is the first of the key's live waiting calls. A call
// whose tokens alone exceed a token limit is admitted when that window is
// empty. A call already admitted (a retried admission) is admitted again
// without counting twice.
func (s *Store) Admit(ctx context.Context, lim GovernorLimits, c GovernorCall) (Admission, error) {
	if err := c.valid(); err != nil {
		return Admission{}, err
	}
	var adm Admission
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		adm = Admission{}
		var b pgx.Batch
		b.Queue(sqlEnsureGovernorKey, c.Key)
		var u governorUse
		b.Queue(sqlLockGovernorKey, c.Key).QueryRow(func(row pgx.Row) error { return row.Scan(&u.now, &u.paused) })
		var granted bool
		b.Queue(sqlHasGrant, c.Key, c.CallID).QueryRow(func(row pgx.Row) error { return row.Scan(&granted) })
		b.Queue(sqlDropDeadWaiters, c.Key)
		b.Queue(sqlDropOldGrants, c.Key, longestWindow(lim).Seconds())
		b.Queue(sqlUpsertWaiter, c.Key, c.CallID, c.TenantID, c.Priority, c.Alive.Seconds())
		b.Queue(sqlGovernorUse, c.Key, lim.RequestWindow.Seconds(), lim.InputWindow.Seconds(), lim.OutputWindow.Seconds(),
			longestWindow(lim).Seconds(), c.CallID, requestsFull(lim)).QueryRow(func(row pgx.Row) error {
			return row.Scan(&u.now, &u.requests, &u.reqsAt, &u.input, &u.inOld, &u.output, &u.outOld, &u.held, &u.position)
		})
		if err := tx.SendBatch(ctx, &b).Close(); err != nil {
			return err
		}
		if !granted {
			if adm = decide(lim, c, u); !adm.Granted {
				return nil
			}
		}
		adm = Admission{Granted: true}
		var g pgx.Batch
		g.Queue(sqlInsertGrant, c.Key, c.CallID, c.TenantID, c.Input, c.Output, c.Hold.Seconds())
		g.Queue(sqlDeleteWaiter, c.Key, c.CallID)
		return tx.SendBatch(ctx, &g).Close()
	})
	if err != nil {
		return Admission{}, fmt.Errorf("admit call to %q: %w", c.Key, err)
	}
	return adm, nil
}

// requestsFull is the count at which the request window is full; with no
// request limit, a count it never reaches.
func requestsFull(l GovernorLimits) int64 {
	if l.Requests <= 0 {
		return math.MaxInt64
	}
	return int64(l.Requests)
}

// decide is the admission of c by counts u.
func decide(l GovernorLimits, c GovernorCall, u governorUse) Admission {
	until := func(oldest *time.Time, window time.Duration) time.Duration {
		if oldest == nil {
			return 0
		}
		return max(oldest.Add(window).Sub(u.now), 0)
	}
	switch {
	case u.paused != nil && u.paused.After(u.now):
		return Admission{Reason: GovernorPaused, Retry: u.paused.Sub(u.now), Ahead: u.position - 1}
	case l.Concurrent > 0 && u.held >= l.Concurrent:
		return Admission{Reason: GovernorConcurrent, Ahead: u.position - 1}
	case l.Requests > 0 && u.requests >= l.Requests:
		// The call's turn comes when as many of the window's calls have
		// left it as put it over the limit, and one more for each call
		// ahead: calls deep in the queue do not all ask at the next free
		// slot.
		i := min(u.requests-l.Requests+u.position-1, len(u.reqsAt)-1)
		var at *time.Time
		if i >= 0 {
			at = &u.reqsAt[i]
		}
		return Admission{Reason: GovernorRequests, Retry: until(at, l.RequestWindow), Ahead: u.position - 1}
	case l.InputTokens > 0 && u.input > 0 && u.input+c.Input > l.InputTokens:
		return Admission{Reason: GovernorInputTokens, Retry: until(u.inOld, l.InputWindow), Ahead: u.position - 1}
	case l.OutputTokens > 0 && u.output > 0 && u.output+c.Output > l.OutputTokens:
		return Admission{Reason: GovernorOutputTokens, Retry: until(u.outOld, l.OutputWindow), Ahead: u.position - 1}
	case u.position > 1:
		return Admission{Reason: GovernorQueue, Ahead: u.position - 1}
	}
	return Admission{Granted: true}
}

// valid checks what the governor's tables cannot take.
func (c GovernorCall) valid() error {
	if c.Key == "" || c.CallID == "" || c.TenantID == "" {
		return agent.Errorf(agent.CodeInvalid, "governed call %q of tenant %q to key %q: want a key, a call id and a tenant", c.CallID, c.TenantID, c.Key)
	}
	if c.Input < 0 || c.Output < 0 || c.Hold <= 0 || c.Alive <= 0 {
		return agent.Errorf(agent.CodeInvalid, "governed call %q to %q of %d input and %d output tokens, held %s, alive %s: want no negative count and positive times",
			c.CallID, c.Key, c.Input, c.Output, c.Hold, c.Alive)
	}
	return nil
}

// Withdraw takes a call that gave up waiting off the key's queue.
// Withdrawing a call that is not waiting is no error.
func (s *Store) Withdraw(ctx context.Context, key, callID string) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteWaiter, key, callID); err != nil {
		return fmt.Errorf("withdraw call from %q: %w", key, err)
	}
	return nil
}

// Revoke deletes an admitted call's grant, as if it had not been
// admitted: the call was never sent (a call another key then refused).
func (s *Store) Revoke(ctx context.Context, key, callID string) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteGrant, key, callID); err != nil {
		return fmt.Errorf("revoke grant of %q: %w", key, err)
	}
	return nil
}

// Settle releases an admitted call's concurrent slot and sets its tokens
// to what the provider counted; a nil count keeps the call's worst case
// (a call that failed is still counted as sent). Settling a call that
// holds no grant is no error.
func (s *Store) Settle(ctx context.Context, key, callID string, input, output *int64) error {
	if _, err := s.pool.Exec(ctx, sqlSettleGrant, key, callID, input, output); err != nil {
		return fmt.Errorf("settle call to %q: %w", key, err)
	}
	return nil
}

// PauseKey stops the key admitting calls for d (unless it is already
// paused for longer): a provider refused a call and said when to come
// back.
func (s *Store) PauseKey(ctx context.Context, key string, d time.Duration) error {
	if key == "" || d <= 0 {
		return errors.New("pause governed key: want a key and a positive time")
	}
	if _, err := s.pool.Exec(ctx, sqlPauseGovernorKey, key, d.Seconds()); err != nil {
		return fmt.Errorf("pause %q: %w", key, err)
	}
	return nil
}
