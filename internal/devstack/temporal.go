package devstack

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.uber.org/zap"
)

const (
	temporalStartTimeout = time.Minute
	// temporalGrace bounds the dev server's shutdown after SIGTERM (about
	// 1.5 s when idle).
	temporalGrace = 15 * time.Second
)

// claimTemporal takes the state folder's Temporal lock and makes sv the
// stack's Temporal service; from then on Stop releases the lock.
func (s *Stack) claimTemporal(ctx context.Context, name, logName string) (*service, error) {
	lock, err := LockFile(ctx, filepath.Join(s.Dir, "temporal.lock"), false)
	if errors.Is(err, errLocked) {
		return nil, fmt.Errorf("temporal state in %s is in use by another running stack; stop it or use another folder", s.Dir)
	}
	if err != nil {
		return nil, err
	}
	s.temporal = &service{name: name, lock: lock, signal: syscall.SIGTERM, grace: temporalGrace,
		logPath: filepath.Join(s.Dir, logName)}
	return s.temporal, nil
}

// temporalPort is the frontend port Options ask for: 0 means
// DefaultTemporalPort, -1 a free port.
func temporalPort(opts Options) (int, error) {
	switch opts.TemporalPort {
	case 0:
		return DefaultTemporalPort, nil
	case -1:
		return freePort()
	}
	return opts.TemporalPort, nil
}

// DynamicConfig returns the dev server's dynamic config (key=JSON value), the
// same settings as deploy/temporal-dynamicconfig.yaml. Both take a turn
// with one tool call from 350 ms to about 40 ms (BENCHMARKS.md).
//
// The history service hands every new workflow and activity task to
// matching through its transfer queue, whose reader polls the database at
// most history.transferProcessorMaxPollRPS times a second per shard (20 by
// default). The dev server has one shard, so once tasks follow each other
// closely each waits for the next poll: ~45 ms from scheduled to started.
// The visibility queue has the same limit and delays search attribute
// updates the same way.
//
// A task queue has four partitions by default. A task written to a
// partition with no poller waiting is forwarded to the root partition, and
// when that forward is refused the task waits two seconds before the next
// try: about one activity in fifty with the SDK's default two pollers. A
// single-node server gains nothing from partitions.
//
// Eager dispatch skips matching for the tasks most turns start with: an
// activity scheduled on the worker's own task queue comes back in the
// reply to the workflow task that scheduled it, and a turn started by a
// client that runs a worker (the gateway in the worker process) gets its
// first workflow task in the start reply. Activities are off by default on
// the server.
//
// Worker Deployment Versioning (a worker with AGENTFLOW_DEPLOYMENT_NAME)
// needs the server's worker deployments (system.enableDeploymentVersions)
// and its frontend's taking the polls of versioned workers
// (frontend.workerVersioningWorkflowAPIs). Server 1.29, the version
// tools/go.mod pins for both the dev server and the real one, has both on
// by default; they are set here so that the file says what agentflow
// needs of a server whose operator configures it.
func DynamicConfig() []string {
	return []string{
		"history.transferProcessorMaxPollRPS=2000",
		"history.visibilityProcessorMaxPollRPS=2000",
		"matching.numTaskqueueReadPartitions=1",
		"matching.numTaskqueueWritePartitions=1",
		"system.enableActivityEagerExecution=true",
		"system.enableEagerWorkflowStart=true",
		"system.enableDeploymentVersions=true",
		"frontend.workerVersioningWorkflowAPIs=true",
	}
}

// SQLitePragmas are the file-backed dev server's SQLite settings: a
// write-ahead log, synced at checkpoints rather than at every commit.
// State survives a crash of the server (not of the machine), and a turn
// takes half the time it takes with SQLite's defaults (BENCHMARKS.md).
func SQLitePragmas() []string {
	return []string{"journal_mode=WAL", "synchronous=NORMAL"}
}

// scratchRoot is where an in-memory dev server keeps its state: /dev/shm
// when the machine has it, else the temporary folder.
func scratchRoot() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && syscall.Access("/dev/shm", 2 /* W_OK */) == nil {
		return "/dev/shm"
	}
	return os.TempDir()
}

// startTemporal runs `temporal server start-dev` and waits for its frontend.
// A server on a free port that exits because a port it wanted was taken in
// the meantime (by another process on the machine) is started again on a
// new one.
func (s *Stack) startTemporal(ctx context.Context, bin string, opts Options) error {
	begin := time.Now()
	sv, err := s.claimTemporal(ctx, "temporal dev server", "temporal.log")
	if err != nil {
		return err
	}
	if err := s.startOnFreePorts(sv, opts, func(int) error { return s.runDevServer(ctx, sv, bin, opts) }); err != nil {
		return err
	}
	s.log.Info("temporal dev server started", zap.String("address", s.TemporalAddress), zap.String("namespace", s.Namespace),
		zap.String("ui", s.UIURL), zap.Bool("in_memory", opts.InMemory), zap.Duration("took", time.Since(begin)))
	return nil
}

// temporalHTTPPort is the dev server's HTTP API port beside frontend
// port: the real server's default beside the default frontend port, else
// a free one. The dev server would pick a free one itself, but then
// nobody here would know it, and it must be closed to tools.
func temporalHTTPPort(frontend int) (port int, fixed bool, err error) {
	if frontend == DefaultTemporalPort {
		return DefaultTemporalHTTPPort, true, nil
	}
	port, err = freePort()
	return port, false, err
}

// portsFree refuses fixed ports another process holds: a server still
// running there (an earlier stack that is shutting down) would answer the
// readiness check in place of the one that could not start.
func portsFree(opts Options, temporal, http int, httpFixed bool) error {
	if opts.TemporalPort != -1 {
		if err := portHeld(temporal, "Temporal"); err != nil {
			return err
		}
	}
	if httpFixed {
		if err := portHeld(http, "Temporal HTTP API"); err != nil {
			return err
		}
	}
	if opts.UIPort != -1 {
		return portHeld(cmp.Or(opts.UIPort, DefaultUIPort), "Temporal Web UI")
	}
	return nil
}

// portHeld is the error for a fixed port that is not free.
func portHeld(port int, what string) error {
	if portFree(port) {
		return nil
	}
	return fmt.Errorf("port %d (%s) on 127.0.0.1 is in use: another stack or Temporal server runs there; stop it first, or choose another port", port, what)
}

// portAttempts bounds the starts of a Temporal server on free ports.
const portAttempts = 3

// startOnFreePorts runs start, which starts sv, again while it fails
// because a free port it was given was taken in the meantime by another
// process, up to portAttempts times (attempt counts from 1). Ports the
// caller fixed are not changed: the failure is returned.
func (s *Stack) startOnFreePorts(sv *service, opts Options, start func(attempt int) error) error {
	for attempt := 1; ; attempt++ {
		err := start(attempt)
		if err == nil || opts.TemporalPort != -1 || attempt == portAttempts || !lostPortRace(sv) {
			return err
		}
		s.log.Warn("temporal server lost a port to another process; starting it on others",
			zap.String("server", sv.name), zap.Int("attempt", attempt), zap.Error(err))
	}
}

// lostPortRace reports whether sv's process exited because a port was in use.
func lostPortRace(sv *service) bool {
	if sv.proc == nil || sv.proc.exitError() == nil {
		return false
	}
	b, err := os.ReadFile(sv.logPath)
	return err == nil && bytes.Contains(b, []byte("address already in use"))
}

// runDevServer starts one dev server process for sv and waits until it is
// ready, setting the stack's addresses.
func (s *Stack) runDevServer(ctx context.Context, sv *service, bin string, opts Options) error {
	port, httpPort, metricsPort, err := devServerPorts(opts)
	if err != nil {
		return err
	}
	argv := []string{bin, "server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--http-port", strconv.Itoa(httpPort),
		"--metrics-port", strconv.Itoa(metricsPort),
		"--log-level", "warn",
	}
	local := func(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
	sv.named = []Listener{
		{Addr: local(port), What: "the Temporal frontend's gRPC API"},
		{Addr: local(httpPort), What: "the Temporal frontend's HTTP API"},
		{Addr: local(metricsPort), What: "the Temporal dev server's metrics"},
	}
	uiURL := ""
	switch opts.UIPort {
	case -1:
		argv = append(argv, "--headless")
	default:
		ui := cmp.Or(opts.UIPort, DefaultUIPort)
		argv = append(argv, "--ui-port", strconv.Itoa(ui))
		uiURL = fmt.Sprintf("http://127.0.0.1:%d", ui)
		sv.named = append(sv.named, Listener{Addr: local(ui), What: "the Temporal Web UI"})
	}
	if s.Namespace != DefaultNamespace { // "default" always exists
		argv = append(argv, "--namespace", s.Namespace)
	}
	for _, ns := range opts.Namespaces {
		argv = append(argv, "--namespace", ns)
	}
	for _, name := range searchAttributes() {
		argv = append(argv, "--search-attribute", name+"=Keyword")
	}
	for _, kv := range DynamicConfig() {
		argv = append(argv, "--dynamic-config-value", kv)
	}
	dbArgs, err := s.devServerDB(opts)
	if err != nil {
		return err
	}
	sv.argv = append(argv, dbArgs...)
	if err := sv.start(s.Dir, nil); err != nil {
		return err
	}
	proc := sv.proc

	address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	waitCtx, cancel := context.WithTimeout(ctx, temporalStartTimeout)
	defer cancel()
	sv.ready = func(ctx context.Context) error { return temporalReady(ctx, address, s.Namespace) }
	if err := poll(waitCtx, proc, 100*time.Millisecond, sv.ready); err != nil {
		return err
	}
	s.TemporalAddress, s.UIURL = address, uiURL
	s.TemporalHTTPAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	return nil
}

// devServerPorts are the dev server's frontend, HTTP API and metrics
// ports, the fixed ones checked free.
func devServerPorts(opts Options) (port, httpPort, metricsPort int, err error) {
	if port, err = temporalPort(opts); err != nil {
		return 0, 0, 0, err
	}
	httpPort, httpFixed, err := temporalHTTPPort(port)
	if err != nil {
		return 0, 0, 0, err
	}
	if err := portsFree(opts, port, httpPort, httpFixed); err != nil {
		return 0, 0, 0, err
	}
	// The dev server would take a free port for its metrics itself, which
	// nobody here would know: tools must never reach it.
	if metricsPort, err = freePort(); err != nil {
		return 0, 0, 0, err
	}
	return port, httpPort, metricsPort, nil
}

// devServerDB are the dev server's arguments for its SQLite state: the
// file in the state folder, or with InMemory a fresh one in the stack's
// scratch folder, and its pragmas.
func (s *Stack) devServerDB(opts Options) ([]string, error) {
	dbFile, pragmas := filepath.Join(s.Dir, "temporal.db"), SQLitePragmas()
	if opts.InMemory {
		if s.scratch == "" {
			var err error
			if s.scratch, err = os.MkdirTemp(scratchRoot(), "agentflow-temporal-*"); err != nil {
				return nil, fmt.Errorf("scratch folder for the dev server: %w", err)
			}
		}
		// Nothing to keep: no waiting for the disk either.
		dbFile, pragmas = filepath.Join(s.scratch, "temporal.db"), []string{"journal_mode=WAL", "synchronous=OFF"}
		_ = os.Remove(dbFile) // a start again after a lost port race begins afresh
	}
	argv := []string{"--db-filename", dbFile}
	for _, p := range pragmas {
		argv = append(argv, "--sqlite-pragma", p)
	}
	return argv, nil
}

// temporalReady reports whether the frontend at address passes its health
// check and knows namespace with agentflow's search attributes: the dev
// server registers them when it makes its state, and a state made by an
// older version is given the newer ones here.
func temporalReady(ctx context.Context, address, namespace string) error {
	return withHealthy(ctx, address, namespace, 2*time.Second, func(ctx context.Context, c client.Client) error {
		if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace}); err != nil {
			return err
		}
		return ensureSearchAttributes(ctx, c, namespace)
	})
}

// withHealthy connects to the frontend at address, checks its health and
// runs probe with the client, all within timeout.
func withHealthy(ctx context.Context, address, namespace string, timeout time.Duration, probe func(context.Context, client.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  address,
		Namespace: namespace,
		// Failed attempts are expected while the server boots.
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	return probe(ctx, c)
}

// TemporalCLI returns the path of the `temporal` CLI for the repository at
// root: <root>/.bin/temporal, built on first use with
// `go build github.com/temporalio/cli/cmd/temporal` in <root>/tools (whose
// go.mod pins the version) and rebuilt when tools/go.mod or tools/go.sum is
// newer than the binary. A file lock serialises concurrent callers such as
// parallel test binaries, and the binary is renamed into place whole.
func TemporalCLI(ctx context.Context, root string) (string, error) {
	return temporalCLI(ctx, nil, root)
}

// temporalCLI is TemporalCLI saying on progress, before it builds, that
// it does.
func temporalCLI(ctx context.Context, progress io.Writer, root string) (string, error) {
	return build(ctx, progress, root, "tools", "temporal", "github.com/temporalio/cli/cmd/temporal")
}

// Tool returns <root>/.bin/name, built with `go build pkg` in the tool
// module <root>/<module> (tools, tools/k8s, …: each pins its versions in
// its own go.mod, outside the app's module graph) when the binary is
// missing or older than that module's go.mod or go.sum. Concurrent callers
// build it once.
func Tool(ctx context.Context, root, module, name, pkg string) (string, error) {
	return build(ctx, nil, root, module, name, pkg)
}

// build is Tool; when it has to build, it first writes one line saying so
// to progress (nil: nowhere), since a first build can take minutes in
// which nothing else is printed.
func build(ctx context.Context, progress io.Writer, root, module, name, pkg string) (string, error) {
	bin := filepath.Join(root, ".bin", name)
	toolsDir := filepath.Join(root, module)
	if current(bin, toolsDir) {
		return bin, nil
	}
	if progress != nil {
		fmt.Fprintf(progress, "Building .bin/%s (%s, pinned in %s/go.mod), once: %s…\n",
			name, pkg, module, firstBuild(name))
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", fmt.Errorf("create .bin: %w", err)
	}
	lock, err := LockFile(ctx, bin+".lock", true)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if current(bin, toolsDir) { // built by whoever held the lock
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.build-%d", bin, os.Getpid())
	defer os.Remove(tmp)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, pkg)
	cmd.Dir = toolsDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s in %s: %w\n%s", name, toolsDir, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("install %s: %w", name, err)
	}
	return bin, nil
}

// firstBuild says how long a tool's build takes with an empty build
// cache: the temporal CLI's as measured on two cores (README "Two
// commands"), SeaweedFS's likewise.
func firstBuild(name string) string {
	switch name {
	case "temporal", "temporal-server":
		// The CLI embeds the server: the two compile the same packages.
		return "15 minutes of CPU with an empty build cache, 8 to 15 minutes on 2 idle cores"
	case "temporal-sql-tool":
		return "quicker after the server, whose packages it shares"
	case "weed":
		// Measured 2026-11-29: 9.5 minutes of CPU, 7 m 46 s on 2 busy cores.
		return "9 minutes of CPU with an empty build cache, 5 to 8 minutes on 2 cores"
	}
	return "minutes with an empty build cache"
}

// current reports whether bin exists and is newer than the tool module files.
func current(bin, toolsDir string) bool {
	fi, err := os.Stat(bin)
	if err != nil {
		return false
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		if src, err := os.Stat(filepath.Join(toolsDir, name)); err == nil && src.ModTime().After(fi.ModTime()) {
			return false
		}
	}
	return true
}
