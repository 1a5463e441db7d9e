package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/objstore"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// DefaultResultInlineLimit is the size under which a serialized result is
// stored inline in agent_results (seed 004 §3.2); larger ones go to cas_blobs.
const DefaultResultInlineLimit = 10 << 20

// Options configure a Store.
type Options struct {
	// ResultInlineLimit is the size in bytes under which a result's
	// serialized output is stored inline; default DefaultResultInlineLimit.
	ResultInlineLimit int
	// MaxConns caps the connection pool; default pgxpool's (max(4, NumCPU)).
	MaxConns int32
	// BlobChunkSize is the size of the chunks blobs larger than one are
	// stored in (blobs.go); default DefaultBlobChunkSize. Tests make it
	// small to write many chunks quickly.
	BlobChunkSize int
	// Objects, when set, keeps blobs larger than its
	// Config().MinBlobBytes (and than one chunk) in an S3-compatible
	// object store (objects.go); default nil: every blob in PostgreSQL.
	Objects *objstore.Store
	// SpoolDir holds a blob bound for the object store while it is read
	// and hashed (objects.go); default os.TempDir() ($TMPDIR).
	SpoolDir string
	// Logger receives migration progress; default zap.NewNop().
	Logger *zap.Logger
	// Retention is the operator's TTLs (retention.go), which a tenant's
	// catalog may only narrow; default zero: keep everything.
	Retention agent.Retention
	// ModelLimits are the operator's limits on model calls, by governed
	// key (internal/governor.Limits.Map), which a tenant's catalog may
	// only narrow (modellimits.go); default none: any tenant limit goes.
	ModelLimits map[string]agent.ModelLimits
	// Build is the worker's build ("deployment:build"), stored with each
	// result it saves (BuildSignals); default "": unversioned.
	Build string
}

// Store is agentflow's Postgres storage. It is safe for concurrent use.
type Store struct {
	pool        *pgxpool.Pool
	inlineLimit int
	chunkSize   int
	objects     *objstore.Store
	objectMin   int64 // blobs larger are the object store's
	build       string
	spoolDir    string
	retention   agent.Retention              // the operator's
	modelLimits map[string]agent.ModelLimits // the operator's
	log         *zap.Logger
	// versions keeps agent versions read: a version never changes once
	// stored, so every model and tool call of every turn need not read
	// it again.
	versions versionCache
}

// Open connects to databaseURL and applies pending migrations. Concurrent
// Opens against one database are serialised; the second applies nothing.
func Open(ctx context.Context, databaseURL string, opts Options) (*Store, error) {
	opts.ResultInlineLimit = agent.OrDefault(opts.ResultInlineLimit, DefaultResultInlineLimit)
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	opts.BlobChunkSize = agent.OrDefault(opts.BlobChunkSize, DefaultBlobChunkSize)
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// The URL may hold a password: never echo it.
		return nil, agent.Errorf(agent.CodeInvalid, "database URL: cannot be parsed")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	s := &Store{pool: pool, build: opts.Build, inlineLimit: opts.ResultInlineLimit, chunkSize: opts.BlobChunkSize, log: opts.Logger,
		objects: opts.Objects, spoolDir: opts.SpoolDir, retention: opts.Retention, modelLimits: opts.ModelLimits}
	if s.objects != nil {
		s.objectMin = max(s.objects.Config().MinBlobBytes, int64(s.chunkSize))
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open store: %w", err)
	}
	return s, nil
}

// Close closes the connection pool, waiting for acquired connections.
func (s *Store) Close() { s.pool.Close() }

// Pool returns the connection pool, for health checks and for packages that
// keep their own tables in the same database.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// versionTable is tern's bookkeeping table.
const versionTable = "public.agentflow_schema_version"

// migrateLockKey is the advisory lock held while migrating. tern takes its
// own lock around each step; holding ours across the whole run also covers
// the creation of the version table and the version check that precedes it.
const migrateLockKey = int64(0x6167656e74666c6f) // "agentflo"

const (
	sqlAdvisoryLock   = `SELECT pg_advisory_lock($1)`
	sqlAdvisoryUnlock = `SELECT pg_advisory_unlock($1)`
)

func (s *Store) migrate(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, sqlAdvisoryLock, migrateLockKey); err != nil {
		return fmt.Errorf("lock migrations: %w", err)
	}
	// A session-level advisory lock lives as long as its connection: when
	// the unlock does not happen, close the connection rather than return it
	// to the pool still holding the lock.
	unlocked := false
	defer func() {
		if !unlocked {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()

	if err := s.migrateLocked(ctx, conn.Conn()); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, sqlAdvisoryUnlock, migrateLockKey); err != nil {
		return fmt.Errorf("unlock migrations: %w", err)
	}
	unlocked = true
	return nil
}

func (s *Store) migrateLocked(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return fmt.Errorf("prepare migrations: %w", err)
	}
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	current, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	latest := int32(len(m.Migrations))
	if current >= latest {
		// A newer release may have migrated further; its migrations are
		// additive, so this one keeps working during a rolling deploy.
		s.log.Debug("schema up to date", zap.Int32("version", current), zap.Int32("known", latest))
		return nil
	}
	m.OnStart = func(seq int32, name, _, _ string) {
		s.log.Info("applying migration", zap.Int32("sequence", seq), zap.String("name", name))
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Postgres error codes the store maps to domain errors.
const (
	pgUniqueViolation     = "23505"
	pgForeignKeyViolation = "23503"
)

// Unavailable reports whether err says the database could not be reached,
// refused connections or dropped one: a failure that a later try may not
// have. Callers wait it out instead of failing the work they hold.
// The object store's failures are not the database's: they fail the
// work, which its caller retries (Temporal, for an activity).
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, objstore.ErrUnavailable) {
		return false
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connect), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	code := pgCode(err)
	// 08: connection exception; 57P01-03: the server is shutting down or
	// starting; 53300: too many connections.
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300" ||
		pgconn.SafeToRetry(err)
}

func pgCode(err error) string {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pgErr.Code
	}
	return ""
}

// requireID validates a required identifier before any query runs.
func requireID(field, v string) error {
	if v == "" {
		return agent.Errorf(agent.CodeInvalid, "%s is required", field)
	}
	return agent.ValidateID(field, v)
}

// requireKey validates a tenant's id, then the id of field within it.
func requireKey(tenantID, field, id string) error {
	if err := requireID("tenant_id", tenantID); err != nil {
		return err
	}
	return requireID(field, id)
}

// querier runs a query: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// collect runs sql on q and scans every row with scan; the caller wraps
// its error once, whichever step failed.
func collect[T any](ctx context.Context, q querier, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scan)
}

// collectOne is collect for a query of exactly one row: pgx.ErrNoRows
// when there is none (oneRow tells it apart).
func collectOne[T any](ctx context.Context, q querier, scan pgx.RowToFunc[T], sql string, args ...any) (T, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		var none T
		return none, err
	}
	return pgx.CollectExactlyOneRow(rows, scan)
}

// oneRow is the error of a query for one row: notFound when there was
// none, err wrapped as format says otherwise, nil when it found the row.
func oneRow(err, notFound error, format string, args ...any) error {
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return notFound
	case err != nil:
		return fmt.Errorf(format+": %w", append(args, err)...)
	}
	return nil
}
