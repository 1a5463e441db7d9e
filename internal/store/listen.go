package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// Listen LISTENs on channel with a connection of its own until ctx ends,
// reconnecting with backoff when it drops. connected reports each change
// of state — notifications sent while not listening are lost, so callers
// treat every change as "re-read what you cache" — and notify gets each
// payload, in order.
func Listen(ctx context.Context, pool *pgxpool.Pool, channel string, logger *zap.Logger,
	connected func(bool), notify func(payload string)) error {
	backoff := 100 * time.Millisecond
	for {
		err := listenOnce(ctx, pool, channel, connected, notify)
		connected(false)
		if ctx.Err() != nil {
			return nil
		}
		logger.Warn("listener lost; reconnecting", zap.String("channel", channel), zap.Error(err), zap.Duration("after", backoff))
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, connected func(bool), notify func(string)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listener connection: %w", err)
	}
	// The connection has session state (LISTEN): never return it to the pool.
	pc := conn.Hijack()
	defer pc.Close(context.Background())
	if _, err := pc.Exec(ctx, "LISTEN "+channel); err != nil {
		return fmt.Errorf("listen %s: %w", channel, err)
	}
	connected(true)
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return err
			}
			return fmt.Errorf("wait for notification: %w", err)
		}
		notify(n.Payload)
	}
}
