package devstack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/objstore"
)

// Environment variables through which one process hands its stack to test
// binaries it runs (see [Env] and the devtest package).
const (
	// EnvTestDatabaseURL names a Postgres server where tests may CREATE DATABASE.
	EnvTestDatabaseURL = "AGENTFLOW_TEST_DATABASE_URL"
	// EnvTestTemporalAddress names the frontend (host:port) of a Temporal server for tests.
	EnvTestTemporalAddress = "AGENTFLOW_TEST_TEMPORAL_ADDRESS"
	// EnvTestTemporalHTTPAddress names that frontend's HTTP API (host:port).
	EnvTestTemporalHTTPAddress = "AGENTFLOW_TEST_TEMPORAL_HTTP_ADDRESS"
	// EnvTestNamespace names the Temporal namespace for tests; empty means "default".
	EnvTestNamespace = "AGENTFLOW_TEST_NAMESPACE"
	// EnvTestPlatformAddrs names every listener of those servers
	// (Stack.PlatformAddrs), host:port, comma-separated: tests close them
	// to tools.
	EnvTestPlatformAddrs = "AGENTFLOW_TEST_PLATFORM_ADDRS"
	// EnvTestObjectStore names the endpoint (http://host:port) of an
	// object store like the stack's: tests create buckets there.
	EnvTestObjectStore = "AGENTFLOW_TEST_S3_ENDPOINT"
)

// Defaults of [Options].
const (
	DefaultTemporalPort = 7233
	// DefaultTemporalHTTPPort is the dev server's HTTP API port when its
	// frontend is on DefaultTemporalPort: the real server's default.
	DefaultTemporalHTTPPort = 7243
	DefaultUIPort           = 8233
	DefaultNamespace        = "default"
)

// searchAttributes are the Keyword search attributes the dev server registers
// at start (the Temporal contract in DESIGN.md).
func searchAttributes() []string {
	return contract.SearchAttributes()
}

// Options configure [Start]. The zero value starts both servers with
// file-backed state under <repo root>/.data, the frontend on 127.0.0.1:7233
// and the Web UI on http://127.0.0.1:8233.
type Options struct {
	// Dir is the state folder: Postgres data (Dir/postgres), the dev server's
	// database file (Dir/temporal.db), the object store's state
	// (Dir/seaweedfs), the servers' logs and lock files.
	// Default: "<repo root>/.data", where the repo root is the nearest folder
	// at or above the working directory that holds a go.mod (else the working
	// directory).
	Dir string
	// DatabaseURL, when set, is used as is and no Postgres is started; callers
	// pass os.Getenv("DATABASE_URL"). Default: empty (start a private Postgres).
	DatabaseURL string
	// PostgresPort is the private Postgres's TCP port on 127.0.0.1.
	// Default 0: a free port.
	PostgresPort int
	// Durable runs the private Postgres with its durability settings
	// (fsync, synchronous commit, full page writes) instead of without
	// them: a crash then loses no acknowledged write, as in production.
	// Fault tests that crash Postgres need it. Default false (faster).
	Durable bool
	// SkipPostgres starts no Postgres and ignores DatabaseURL; the Stack then
	// has no DatabaseURL. Default false.
	SkipPostgres bool

	// TemporalAddress (host:port), when set, is used as is and no dev server
	// is started. Default: empty (start the dev server).
	TemporalAddress string
	// TemporalHTTPAddress is the HTTP API (host:port) of the server at
	// TemporalAddress, when known; the Stack passes it on. Default: empty.
	TemporalHTTPAddress string
	// TemporalPort is the dev server's frontend port on 127.0.0.1.
	// Default 0 means 7233; -1 picks a free port. The frontend's HTTP API
	// is on DefaultTemporalHTTPPort beside the default port, else on a
	// free one (Stack.TemporalHTTPAddress).
	TemporalPort int
	// UIPort is the Web UI's port on 127.0.0.1. Default 0 means 8233; -1
	// starts the dev server headless (no UI). Set it when running several
	// stacks with a UI at once.
	UIPort int
	// Namespace is the Temporal namespace, created at start when it is not
	// "default". Default "default".
	Namespace string
	// Namespaces are created at start beside Namespace, on a server
	// started here: other teams' namespaces, such as the one whose Nexus
	// services agents call. Default: none.
	Namespaces []string
	// NexusEndpoints are created once a server started here is up (an
	// endpoint of that name routed elsewhere is pointed at this target).
	// Default: none.
	NexusEndpoints []NexusEndpoint
	// InMemory keeps the dev server's state only while it runs: faster,
	// and gone when it stops. The state is a scratch SQLite file in memory
	// (/dev/shm) rather than SQLite's own in-memory database, which is
	// deleted whole when its one connection is closed (a query the server
	// interrupts can do that), leaving the server without its tables.
	InMemory bool
	// SkipTemporal starts no dev server and ignores TemporalAddress; the Stack
	// then has no TemporalAddress. Default false.
	SkipTemporal bool
	// TemporalBinary is the path of the `temporal` CLI. Default: the
	// repo root's .bin/temporal, built when missing (see [TemporalCLI]).
	TemporalBinary string
	// TemporalServer runs the real Temporal server (what a cluster and
	// docker-compose.yml run) on the stack's Postgres instead of the dev
	// server: its databases "temporal" and "temporal_visibility" are created
	// and migrated by its SQL tool, and it starts with the settings of
	// [DynamicConfig]. It has no Web UI; UIPort and InMemory are ignored.
	// Needs Postgres (the private one or DatabaseURL). Default false.
	TemporalServer bool

	// ObjectStoreEndpoint (http://host:port), when set, names an object
	// store like the stack's, used as is. Default: empty (serve one).
	ObjectStoreEndpoint string
	// ObjectStorePort is the object store's S3 port on 127.0.0.1.
	// Default 0: the last start's while it is free, else a free one.
	ObjectStorePort int
	// SkipObjectStore serves no object store and ignores
	// ObjectStoreEndpoint; the Stack then has no ObjectStore. Default
	// false.
	SkipObjectStore bool

	// Logger receives the stack's lifecycle messages. Default: no logging.
	Logger *zap.Logger
	// Progress receives one line before a Temporal binary or SeaweedFS
	// is built into .bin/, which takes minutes with an empty build cache
	// and prints nothing meanwhile: a terminal's reader learns why it
	// waits. Default: nowhere.
	Progress io.Writer
}

// Stack is a running set of dev servers. Fields are empty for services that
// were skipped. Stop it when done.
type Stack struct {
	// DatabaseURL reaches the "postgres" database of the server as its
	// superuser (or is Options.DatabaseURL).
	DatabaseURL string
	// TemporalAddress is the frontend's host:port.
	TemporalAddress string
	// TemporalHTTPAddress is the frontend's HTTP API, host:port: a
	// platform address that tools must never reach (it serves every
	// tenant's workflows). Empty when the server was not started here and
	// Options did not name it.
	TemporalHTTPAddress string
	// Namespace is the Temporal namespace to use.
	Namespace string
	// UIURL is the Web UI's base URL; empty when headless or not started here.
	UIURL string
	// Dir is the state folder in use.
	Dir string
	// ObjectStore is the S3-compatible object store's configuration:
	// the stack's SeaweedFS with its state in Dir/seaweedfs (or the store
	// Options.ObjectStoreEndpoint names), bucket ObjectStoreBucket. Zero
	// when skipped.
	ObjectStore objstore.Config

	log      *zap.Logger
	postgres *service
	temporal *service
	objects  *service
	// objectSockets are the Unix sockets SeaweedFS leaves in /tmp,
	// removed at Stop.
	objectSockets []string
	// scratch holds an in-memory dev server's state; removed at Stop.
	scratch string

	stopOnce sync.Once
	stopErr  error
}

// Start starts what opts ask for and returns once every started server
// accepts requests. ctx bounds only the start: the servers keep running
// until [Stack.Stop]. On error, whatever was started is stopped again.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	ns := cmp.Or(opts.Namespace, DefaultNamespace)
	s := &Stack{Namespace: ns, log: log}

	needPostgres := !opts.SkipPostgres && opts.DatabaseURL == ""
	needTemporal := !opts.SkipTemporal && opts.TemporalAddress == ""
	needObjects := !opts.SkipObjectStore && opts.ObjectStoreEndpoint == ""
	if !opts.SkipObjectStore && opts.ObjectStoreEndpoint != "" {
		s.ObjectStore = ObjectStoreConfig(opts.ObjectStoreEndpoint, ObjectStoreBucket)
	}
	if !opts.SkipPostgres {
		s.DatabaseURL = opts.DatabaseURL
	}
	if !opts.SkipTemporal {
		s.TemporalAddress, s.TemporalHTTPAddress = opts.TemporalAddress, opts.TemporalHTTPAddress
	}
	if !needPostgres && !needTemporal && !needObjects {
		return s, nil
	}

	if needTemporal && opts.TemporalServer && opts.SkipPostgres {
		return nil, errors.New("the Temporal server needs Postgres: SkipPostgres and TemporalServer exclude each other")
	}
	needRoot := needObjects || (needTemporal && (opts.TemporalBinary == "" || opts.TemporalServer))
	root, err := s.useDir(needRoot, opts)
	if err != nil {
		return nil, err
	}

	// The object store is independent of the two others; starting it
	// beside them saves its start time (seconds) on every test binary,
	// and the first failure cancels the other starts.
	g, gctx := errgroup.WithContext(ctx)
	if needObjects {
		g.Go(func() error { return s.startObjects(gctx, root, opts) })
	}
	g.Go(func() error {
		if needTemporal && opts.TemporalServer {
			return s.startWithServer(gctx, root, needPostgres, opts)
		}
		return s.startSideBySide(gctx, root, needPostgres, needTemporal, opts)
	})
	if err := g.Wait(); err != nil {
		return nil, errors.Join(err, s.Stop())
	}
	if needTemporal {
		if err := s.ensureNexus(ctx, opts); err != nil {
			return nil, errors.Join(err, s.Stop())
		}
	}
	return s, nil
}

// useDir finds the repository root when the state folder or a binary
// built into its .bin/ (needRoot) needs it, and makes the state folder
// (Options.Dir, else <root>/.data) the stack's, absolute and created. It
// returns the root, "" when not needed.
func (s *Stack) useDir(needRoot bool, opts Options) (root string, err error) {
	if opts.Dir == "" || needRoot {
		if root, err = RepoRoot(); err != nil {
			return "", err
		}
	}
	s.Dir = opts.Dir
	if s.Dir == "" {
		s.Dir = filepath.Join(root, ".data")
	}
	// Absolute, because running servers are recognised by their working folder.
	dir, err := filepath.Abs(s.Dir)
	if err != nil {
		return "", fmt.Errorf("state folder: %w", err)
	}
	s.Dir = dir
	if err := prepareDir(s.Dir); err != nil {
		return "", err
	}
	return root, nil
}

// startSideBySide starts Postgres and the dev server (building its CLI
// when needed), each when needed, at the same time: the shorter of the
// two start times is saved on every test binary.
func (s *Stack) startSideBySide(ctx context.Context, root string, needPostgres, needTemporal bool, opts Options) error {
	g, gctx := errgroup.WithContext(ctx)
	if needPostgres {
		g.Go(func() error { return s.startPostgres(gctx, opts.PostgresPort, opts.Durable) })
	}
	if needTemporal {
		g.Go(func() error {
			bin := opts.TemporalBinary
			if bin == "" {
				var err error
				if bin, err = temporalCLI(gctx, opts.Progress, root); err != nil {
					return err
				}
			}
			return s.startTemporal(gctx, bin, opts)
		})
	}
	return g.Wait()
}

// startWithServer starts Postgres (unless given) and builds the server
// side by side, then the server on that Postgres.
func (s *Stack) startWithServer(ctx context.Context, root string, needPostgres bool, opts Options) error {
	var bins serverBinaries
	g, gctx := errgroup.WithContext(ctx)
	if needPostgres {
		g.Go(func() error { return s.startPostgres(gctx, opts.PostgresPort, opts.Durable) })
	}
	g.Go(func() error {
		var err error
		bins.server, bins.sqlTool, err = temporalServer(gctx, opts.Progress, root)
		return err
	})
	if err := g.Wait(); err != nil {
		return err
	}
	return s.startServer(ctx, bins, opts)
}

// Services of a Stack, for [Stack.Restart].
const (
	ServicePostgres = "postgres"
	ServiceTemporal = "temporal"
)

// Restart takes a service this Stack started away, abruptly (SIGKILL for
// Temporal; an immediate shutdown, which aborts every session without a
// checkpoint, for Postgres), keeps it down for down, then starts it again
// on the same port and state and returns once it serves. Fault tests use
// it.
func (s *Stack) Restart(ctx context.Context, name string, down time.Duration) error {
	var sv *service
	var sig syscall.Signal
	switch name {
	case ServicePostgres:
		sv, sig = s.postgres, syscall.SIGQUIT
	case ServiceTemporal:
		sv, sig = s.temporal, syscall.SIGKILL
	default:
		return fmt.Errorf("restart: unknown service %q (%s, %s)", name, ServicePostgres, ServiceTemporal)
	}
	if sv == nil || sv.proc == nil || sv.ready == nil {
		return fmt.Errorf("restart %s: not started by this stack", name)
	}
	_ = sv.proc.stop(sig, 10*time.Second)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := sv.start(sv.dir, sv.cred); err != nil {
		return err
	}
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return poll(waitCtx, sv.proc, 50*time.Millisecond, sv.ready)
}

// Stop stops the servers this Stack started, the dev server first, and waits
// for them to exit. It is safe to call more than once; later calls return the
// first call's result.
func (s *Stack) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if s.temporal != nil {
			errs = append(errs, s.temporal.stop())
		}
		if s.postgres != nil {
			errs = append(errs, s.postgres.stop())
		}
		if s.objects != nil {
			errs = append(errs, s.objects.stop())
			for _, path := range s.objectSockets {
				_ = os.Remove(path) // stale once the server is gone
			}
		}
		if s.scratch != "" {
			errs = append(errs, os.RemoveAll(s.scratch))
		}
		s.stopErr = errors.Join(errs...)
		if s.stopErr == nil && (s.temporal != nil || s.postgres != nil || s.objects != nil) {
			s.log.Info("dev stack stopped")
		}
	})
	return s.stopErr
}

// Env returns the AGENTFLOW_TEST_* assignments ("NAME=value") that make the
// devtest package in child processes use s instead of starting its own
// servers, for a command that starts one stack and runs `go test ./...`.
func Env(s *Stack) []string {
	var env []string
	if s.DatabaseURL != "" {
		env = append(env, EnvTestDatabaseURL+"="+s.DatabaseURL)
	}
	if s.TemporalAddress != "" {
		env = append(env, EnvTestTemporalAddress+"="+s.TemporalAddress, EnvTestNamespace+"="+s.Namespace)
	}
	if s.TemporalHTTPAddress != "" {
		env = append(env, EnvTestTemporalHTTPAddress+"="+s.TemporalHTTPAddress)
	}
	if s.ObjectStore.Endpoint != "" {
		env = append(env, EnvTestObjectStore+"="+s.ObjectStore.Endpoint)
	}
	if addrs := s.PlatformAddrs(); len(addrs) > 0 {
		env = append(env, EnvTestPlatformAddrs+"="+strings.Join(addrs, ","))
	}
	return env
}

// RepoRoot is the nearest folder at or above the working directory holding
// a go.mod, else the working directory.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repo root: %w", err)
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd, nil
		}
		dir = parent
	}
}

// prepareDir creates the state folder. As root it also opens the folder to
// other users, because Postgres runs as the postgres user and must reach its
// data folder inside.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create state folder: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("stat state folder: %w", err)
	}
	if mode := fi.Mode().Perm(); mode&0o005 != 0o005 {
		if err := os.Chmod(dir, mode|0o055); err != nil {
			return fmt.Errorf("open state folder to the postgres user: %w", err)
		}
	}
	return nil
}
