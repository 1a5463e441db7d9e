// Package devtest gives integration tests real servers: each test its own
// Postgres database and S3 bucket, and a Temporal dev server shared by the
// test binary.
//
// Only tests import it, and it must not import the store or the server,
// whose tests use it.
//
// Use it from TestMain, which stops what it started:
//
//	func TestMain(m *testing.M) { devtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		dbURL := devtest.Database(t)
//		address, namespace := devtest.Temporal(t)
//		...
//	}
//
// The servers start lazily, once per test binary and only when a test asks
// for them, in a private state folder under os.TempDir (so test binaries that
// `go test ./...` runs in parallel never share a data folder), with free
// ports, an in-memory headless dev server, and no Web UI; the object store
// is SeaweedFS, a real S3 server (devstack.SeaweedArgs). When the
// AGENTFLOW_TEST_DATABASE_URL, AGENTFLOW_TEST_TEMPORAL_ADDRESS (with
// AGENTFLOW_TEST_NAMESPACE, AGENTFLOW_TEST_TEMPORAL_HTTP_ADDRESS and
// AGENTFLOW_TEST_PLATFORM_ADDRS) or AGENTFLOW_TEST_S3_ENDPOINT variables are
// set — a wrapper that started one stack for every package sets them with
// devstack.Env — those servers are used instead.
//
// A server that cannot start fails the tests that need it, with the reason;
// tests are never skipped for it.
package devtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/objstore"
)

const (
	startTimeout   = 3 * time.Minute // includes building the temporal CLI on a fresh checkout
	cleanupTimeout = 30 * time.Second
)

// shared is the test binary's servers. It is package state because tests
// reach it through Database and Temporal, which take only a testing.TB.
var shared suite

type suite struct {
	mainRunning atomic.Bool

	postgres lazyStack
	temporal lazyStack
	objects  lazyStack
}

// lazyStack starts one devstack service on first use.
type lazyStack struct {
	once  sync.Once
	stack *devstack.Stack
	dir   string
	err   error
	// started is stack once it runs, for readers that must not start it.
	started atomic.Pointer[devstack.Stack]
}

func (l *lazyStack) get(opts devstack.Options) (*devstack.Stack, error) {
	l.once.Do(func() {
		external := opts.DatabaseURL != "" || opts.TemporalAddress != "" || opts.ObjectStoreEndpoint != ""
		if !external {
			dir, err := os.MkdirTemp("", "agentflow-devtest-*")
			if err != nil {
				l.err = fmt.Errorf("create state folder: %w", err)
				return
			}
			l.dir, opts.Dir = dir, dir
		}
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		l.stack, l.err = devstack.Start(ctx, opts)
		if l.err == nil {
			l.started.Store(l.stack)
		}
	})
	return l.stack, l.err
}

func (l *lazyStack) stop() error {
	var errs []error
	if l.stack != nil {
		errs = append(errs, l.stack.Stop())
	}
	if l.dir != "" {
		errs = append(errs, os.RemoveAll(l.dir))
	}
	return errors.Join(errs...)
}

// Main runs the package's tests, stops the servers they started and exits
// with the tests' status (failing also when a server does not stop cleanly).
func Main(m *testing.M) {
	shared.mainRunning.Store(true)
	code := m.Run()
	if err := errors.Join(shared.temporal.stop(), shared.postgres.stop(), shared.objects.stop()); err != nil {
		fmt.Fprintf(os.Stderr, "devtest: stop dev servers: %v\n", err)
		code = cmp.Or(code, 1)
	}
	os.Exit(code)
}

// Database returns the URL of a new, empty database for this test, named
// after the test with a random suffix. The database is dropped when the test
// and its cleanups (registered after this call) are done.
func Database(t testing.TB) string {
	t.Helper()
	s := postgresStack(t)
	name := databaseName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	dbURL, err := s.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatalf("devtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil {
			t.Errorf("devtest: %v", err)
		}
	})
	return dbURL
}

// Temporal returns the frontend address and namespace of the Temporal server
// shared by the test binary. Tests keep apart by their workflow ids and task
// queues.
func Temporal(t testing.TB) (address, namespace string) {
	t.Helper()
	s := temporalStack(t)
	return s.TemporalAddress, s.Namespace
}

// TemporalHTTPAddress returns the HTTP API (host:port) of the frontend
// Temporal returns, a platform address that tools must never reach; empty
// when a wrapper handed over a server without naming it
// (AGENTFLOW_TEST_TEMPORAL_HTTP_ADDRESS).
func TemporalHTTPAddress(t testing.TB) string {
	t.Helper()
	return temporalStack(t).TemporalHTTPAddress
}

// PlatformAddrs returns every listener of the servers Database and
// Temporal have given so far (devstack.Stack.PlatformAddrs: the dev
// server's metrics and internal ports as well as its frontend), with
// those a wrapper names (AGENTFLOW_TEST_PLATFORM_ADDRS): addresses of the
// platform's own, which a server under test closes to tools.
func PlatformAddrs(t testing.TB) []string {
	t.Helper()
	requireMain(t)
	var addrs []string
	for _, a := range strings.Split(os.Getenv(devstack.EnvTestPlatformAddrs), ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	for _, l := range []*lazyStack{&shared.temporal, &shared.postgres, &shared.objects} {
		if s := l.started.Load(); s != nil {
			addrs = append(addrs, s.PlatformAddrs()...)
		}
	}
	return addrs
}

func temporalStack(t testing.TB) *devstack.Stack {
	t.Helper()
	return sharedStack(t, &shared.temporal, "temporal dev server", devstack.Options{
		TemporalAddress:     os.Getenv(devstack.EnvTestTemporalAddress),
		TemporalHTTPAddress: os.Getenv(devstack.EnvTestTemporalHTTPAddress),
		Namespace:           os.Getenv(devstack.EnvTestNamespace),
		SkipPostgres:        true,
		SkipObjectStore:     true,
		TemporalPort:        -1,
		UIPort:              -1,
		InMemory:            true,
	})
}

func postgresStack(t testing.TB) *devstack.Stack {
	t.Helper()
	return sharedStack(t, &shared.postgres, "postgres", devstack.Options{
		DatabaseURL:     os.Getenv(devstack.EnvTestDatabaseURL),
		SkipTemporal:    true,
		SkipObjectStore: true,
	})
}

// sharedStack is part of the stack the test binary shares, started by the
// first test that needs it with opts; what names it when it fails.
func sharedStack(t testing.TB, part *lazyStack, what string, opts devstack.Options) *devstack.Stack {
	t.Helper()
	requireMain(t)
	s, err := part.get(opts)
	if err != nil {
		t.Fatalf("devtest: start %s: %v", what, err)
	}
	return s
}

// ObjectStore returns the configuration of a new, empty bucket for this
// test on the object store shared by the test binary (the stack's
// SeaweedFS), named after the test as Database names its database. The
// bucket is deleted with its objects when the test and its cleanups
// (registered after this call) are done. Set MinBlobBytes to choose
// which blobs go there.
func ObjectStore(t testing.TB) objstore.Config {
	t.Helper()
	endpoint := os.Getenv(devstack.EnvTestObjectStore)
	if endpoint == "" {
		buildSeaweed(t)
	}
	s := sharedStack(t, &shared.objects, "the object store", devstack.Options{
		ObjectStoreEndpoint: endpoint,
		SkipPostgres:        true,
		SkipTemporal:        true,
	})
	cfg := devstack.ObjectStoreConfig(s.ObjectStore.Endpoint, bucketName(t.Name()))
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := devstack.CreateBucket(ctx, cfg); err != nil {
		t.Fatalf("devtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := devstack.DeleteBucket(ctx, cfg); err != nil {
			t.Errorf("devtest: %v", err)
		}
	})
	return cfg
}

// buildSeaweed builds SeaweedFS into the repository's .bin/ unless it is
// there, before the start of the stack and outside its timeout: a first
// build takes minutes.
func buildSeaweed(t testing.TB) {
	t.Helper()
	root, err := devstack.RepoRoot()
	if err == nil {
		_, err = devstack.Seaweed(context.Background(), os.Stderr, root)
	}
	if err != nil {
		t.Fatalf("devtest: start the object store: %v", err)
	}
}

// bucketName turns a test name into a bucket name: [a-z0-9-], with a
// random suffix, 3 to 63 bytes, starting with a letter.
func bucketName(testName string) string {
	name := strings.ReplaceAll(databaseName(testName), "_", "-")
	name = strings.Trim(strings.ReplaceAll(name, "--", "-"), "-")
	return "t" + name[:min(len(name), 62)]
}

// requireMain fails tests of packages whose TestMain does not call Main:
// their servers would outlive the tests' state folder cleanup.
func requireMain(t testing.TB) {
	t.Helper()
	if !shared.mainRunning.Load() {
		t.Fatal("devtest: call devtest.Main(m) from the package's TestMain")
	}
}

// databaseName turns a test name into a database name: lower case, [a-z0-9_]
// only, with a random suffix, at most 63 bytes (Postgres's limit).
func databaseName(testName string) string {
	var suffix [4]byte
	_, _ = rand.Read(suffix[:]) // never fails (crypto/rand)
	tail := "_" + hex.EncodeToString(suffix[:])
	base := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		default:
			return '_'
		}
	}, testName)
	if room := 63 - len(tail); len(base) > room {
		base = base[:room]
	}
	return base + tail
}

// RefuseConnections makes the database at dbURL refuse new connections
// and ends the open ones, until the test ends: Postgres down, as far as
// that database's clients can tell.
func RefuseConnections(t testing.TB, dbURL string) {
	t.Helper()
	ctx := context.Background()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("devtest: %v", err)
	}
	name := u.Path[1:]
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatalf("devtest: %v", err)
	}
	_, err = admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" ALLOW_CONNECTIONS false")
	if err != nil {
		t.Fatalf("devtest: %v", err)
	}
	_, err = admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name)
	if err != nil {
		t.Fatalf("devtest: %v", err)
	}
	t.Cleanup(func() {
		_, err := admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" ALLOW_CONNECTIONS true")
		if err != nil {
			t.Errorf("devtest: %v", err)
		}
		_ = admin.Close(ctx)
	})
}
