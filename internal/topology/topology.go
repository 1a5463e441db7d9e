// Package topology runs agentflow on one machine the way a cluster runs
// it, and the way docker-compose.yml describes it: the real Temporal server
// on PostgreSQL (devstack with TemporalServer), worker processes
// (AGENTFLOW_ROLES=worker) and gateway processes (AGENTFLOW_ROLES=gateway),
// each its own operating-system process built from this repository. Every
// part can be killed and started again, which is what the fault suite
// (internal/chaos) does; `starter up --production` runs it for people.
//
// It runs the binaries it builds and imports none of their packages (the
// server, the workflows, the store): it sees them as an operator does.
package topology

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/egress"
)

// Roles, as AGENTFLOW_ROLES names them.
const (
	RoleWorker  = "worker"
	RoleGateway = "gateway"
)

// appDatabase is agentflow's database on a private Postgres, beside the
// Temporal server's two.
const appDatabase = "agentflow_app"

// Options configure [Start].
type Options struct {
	// Dir is the state folder: the stack's data, the built binary and every
	// process's log. Required.
	Dir string
	// Workers is the number of worker processes. Default 2.
	Workers int
	// Gateways is the number of gateway processes. Default 1.
	Gateways int
	// Env is added to every agentflow process's environment: the model
	// (OPENAI_BASE_URL, AGENTFLOW_SCRIPT…), AGENTFLOW_TOKENS for gateways,
	// AGENTFLOW_EGRESS_ALLOW for what tools may call on this machine, and
	// any other setting of internal/server.Config. Start adds the
	// platform's addresses to AGENTFLOW_PLATFORM_ADDRS.
	Env []string
	// TemporalPort is the server's frontend port; 0 means 7233, -1 a free
	// port.
	TemporalPort int
	// DevServer runs the Temporal CLI's dev server (the dev stack's, one
	// process on SQLite) instead of the real server: the same processes of
	// agentflow on the dev stack's Temporal.
	DevServer bool
	// WorkerEnv, when set, is asked once the stack runs for what worker i
	// (from 0) gets beside Env, which it overrides: a fault suite's proxy
	// as its TEMPORAL_ADDRESS, say.
	WorkerEnv func(i int, stack *devstack.Stack) []string
	// GatewayAddr is the first gateway's gRPC address. Default: a free port.
	GatewayAddr string
	// DatabaseURL, when set, is the Postgres to use instead of a private one.
	DatabaseURL string
	// Binary is the agentflow worker program. Default: built from ./worker
	// of the repository into Dir/bin.
	Binary string
	// Namespaces and NexusEndpoints are other teams' namespaces and the
	// endpoints into them, made once the server is up (as
	// devstack.Options). Default: none.
	Namespaces     []string
	NexusEndpoints []devstack.NexusEndpoint
	// Logger receives lifecycle messages. Default: none.
	Logger *zap.Logger
	// Progress receives a line before each Temporal binary is built, as
	// devstack.Options.Progress. Default: nowhere.
	Progress io.Writer
}

func (o *Options) defaults() {
	o.Workers = cmp.Or(o.Workers, 2)
	o.Gateways = cmp.Or(o.Gateways, 1)
}

// Topology is a running production-like deployment. Stop it when done.
type Topology struct {
	Stack *devstack.Stack
	// DatabaseURL is agentflow's database on the stack's Postgres.
	DatabaseURL string
	Workers     []*Process
	Gateways    []*Process

	log  *zap.Logger
	bin  string
	dir  string
	base []string // every process's environment, before its own
	// platform is AGENTFLOW_PLATFORM_ADDRS as closePlatform gave it.
	platform string
}

// Start starts the stack, then the workers and gateways, and returns once
// each answers its health check.
func Start(ctx context.Context, opts Options) (*Topology, error) {
	if opts.Dir == "" {
		return nil, errors.New("topology: Dir is required")
	}
	opts.defaults()
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	bin := opts.Binary
	if bin == "" {
		var err error
		if bin, err = Build(ctx, filepath.Join(opts.Dir, "bin")); err != nil {
			return nil, err
		}
	}
	stack, err := devstack.Start(ctx, devstack.Options{
		// Durable: a crashed Postgres must not take back acknowledged writes.
		Dir: opts.Dir, TemporalServer: !opts.DevServer, Durable: true, TemporalPort: opts.TemporalPort,
		DatabaseURL: opts.DatabaseURL, Logger: log, Progress: opts.Progress,
		Namespaces: opts.Namespaces, NexusEndpoints: opts.NexusEndpoints,
	})
	if err != nil {
		return nil, err
	}
	t := &Topology{Stack: stack, DatabaseURL: stack.DatabaseURL, log: log, bin: bin, dir: opts.Dir}
	if opts.DatabaseURL == "" {
		// Beside the server's own databases, not in "postgres".
		if t.DatabaseURL, err = stack.CreateDatabase(ctx, appDatabase); err != nil {
			return nil, errors.Join(err, stack.Stop())
		}
	}
	base := append([]string{
		"DATABASE_URL=" + t.DatabaseURL,
		"TEMPORAL_ADDRESS=" + stack.TemporalAddress,
		"AGENTFLOW_TEMPORAL_HTTP_ADDR=" + stack.TemporalHTTPAddress,
		"TEMPORAL_NAMESPACE=" + stack.Namespace,
	}, append(stack.ObjectStore.Env(), opts.Env...)...)
	t.base = base
	for i := range opts.Workers {
		env := base
		if opts.WorkerEnv != nil {
			env = append(slices.Clone(base), opts.WorkerEnv(i, stack)...)
		}
		p, err := newProcess(fmt.Sprintf("worker-%d", i+1), RoleWorker, bin, opts.Dir, env, log)
		if err != nil {
			return nil, errors.Join(err, t.Stop())
		}
		t.Workers = append(t.Workers, p)
	}
	for i := range opts.Gateways {
		p, err := newProcess(fmt.Sprintf("gateway-%d", i+1), RoleGateway, bin, opts.Dir, base, log)
		if err != nil {
			return nil, errors.Join(err, t.Stop())
		}
		if i == 0 && opts.GatewayAddr != "" {
			p.setGRPCAddr(opts.GatewayAddr)
		}
		t.Gateways = append(t.Gateways, p)
	}
	t.closePlatform(stack, opts.Env)
	// Workers first: the gateway's first turns need someone to run them.
	for _, p := range append(append([]*Process{}, t.Workers...), t.Gateways...) {
		if err := p.Start(ctx); err != nil {
			return nil, errors.Join(err, t.Stop())
		}
	}
	return t, nil
}

// closePlatform tells every process the platform's addresses it cannot
// know from its own configuration, to close them to tools
// (AGENTFLOW_PLATFORM_ADDRS): every other process's ports, beside any the
// environment names already.
func (t *Topology) closePlatform(stack *devstack.Stack, env []string) {
	addrs := stack.PlatformAddrs()
	for _, p := range t.Processes() {
		addrs = append(addrs, p.HTTPAddr)
		if p.GRPCAddr != "" {
			addrs = append(addrs, p.GRPCAddr)
		}
	}
	if given := lookupEnv(env, egress.EnvPlatformAddrs); given != "" {
		addrs = append(addrs, given)
	}
	t.platform = strings.Join(addrs, ",")
	for _, p := range t.Processes() {
		p.env = append(p.env, egress.EnvPlatformAddrs+"="+t.platform)
	}
}

// AddWorker starts one more worker process, with env added to what
// every process gets (a later setting of a name wins), and returns once
// it answers its health check: a worker of a new build during a deploy
// (AGENTFLOW_BUILD_ID), for instance. Its ports are closed to the other
// processes' tools only by the platform's default rules (the others
// were told of theirs at start).
func (t *Topology) AddWorker(ctx context.Context, env ...string) (*Process, error) {
	p, err := newProcess(fmt.Sprintf("worker-%d", len(t.Workers)+1), RoleWorker, t.bin, t.dir, t.base, t.log)
	if err != nil {
		return nil, err
	}
	p.env = append(append(p.env, egress.EnvPlatformAddrs+"="+t.platform+","+p.HTTPAddr), env...)
	t.Workers = append(t.Workers, p)
	if err := p.Start(ctx); err != nil {
		return p, err
	}
	return p, nil
}

// lookupEnv is key's value in env (the last assignment wins), else in the
// process's environment, as a started process would see it.
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return os.Getenv(key)
}

// Processes are the workers and the gateways.
func (t *Topology) Processes() []*Process {
	return append(append([]*Process{}, t.Workers...), t.Gateways...)
}

// Stop stops the gateways, the workers and the stack, in that order.
func (t *Topology) Stop() error {
	var errs []error
	for _, p := range append(append([]*Process{}, t.Gateways...), t.Workers...) {
		errs = append(errs, p.Stop())
	}
	errs = append(errs, t.Stack.Stop())
	return errors.Join(errs...)
}

// Build compiles the worker program of the repository holding the working
// directory into dir and returns its path: with the scripted model
// (-tags scripted), as docker-compose.yml's image has it, so that
// `starter up --production` runs offline.
func Build(ctx context.Context, dir string) (string, error) {
	root, err := devstack.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "agentflow-worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "scripted", "-o", bin, "./worker")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build worker: %w\n%s", err, strings.TrimSpace(string(out)))
	}
	return bin, nil
}

// Process is one agentflow process of a role, with fixed addresses so a
// restarted one is found where it was.
type Process struct {
	Name string
	Role string
	// GRPCAddr is the gateway's address and HTTPAPIAddr its HTTP API's
	// (gateways only); HTTPAddr serves /healthz and /metrics.
	GRPCAddr, HTTPAPIAddr, HTTPAddr string
	// Log is the path of its log file (appended across restarts).
	Log string

	bin string
	env []string
	log *zap.Logger
	// wrap, when set, runs the program: a host's namespace (NewProcessOn).
	wrap []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	// exit is how the last run ended (cmd.Wait's error), written before
	// done is closed.
	exit *error
}

func newProcess(name, role, bin, dir string, base []string, log *zap.Logger) (*Process, error) {
	if log == nil {
		log = zap.NewNop()
	}
	p := &Process{Name: name, Role: role, bin: bin, Log: filepath.Join(dir, name+".log"), log: log}
	var err error
	if p.HTTPAddr, err = devstack.FreeAddr(); err != nil {
		return nil, err
	}
	env := append(append([]string{}, base...), "AGENTFLOW_ROLES="+role, "AGENTFLOW_HTTP_ADDR="+p.HTTPAddr)
	if role == RoleGateway {
		if p.GRPCAddr, err = devstack.FreeAddr(); err != nil {
			return nil, err
		}
		if p.HTTPAPIAddr, err = devstack.FreeAddr(); err != nil {
			return nil, err
		}
		env = append(env, "AGENTFLOW_GRPC_ADDR="+p.GRPCAddr, "AGENTFLOW_HTTP_API_ADDR="+p.HTTPAPIAddr)
	}
	p.env = env
	return p, nil
}

// NewProcessOn is a process of role run by wrap (the command line that
// enters a host, as internal/cluster gives it), its listeners on the
// host's address ip at the ports a machine of its own would use: 8080
// (health, metrics), and for a gateway 9090 (gRPC) and 8081 (HTTP API).
// env is its whole environment beside this process's, AGENTFLOW_ROLES
// and the listeners' addresses added.
func NewProcessOn(name, role, bin, dir, ip string, wrap, env []string, log *zap.Logger) *Process {
	if log == nil {
		log = zap.NewNop()
	}
	p := &Process{Name: name, Role: role, bin: bin, Log: filepath.Join(dir, name+".log"), log: log, wrap: wrap,
		HTTPAddr: net.JoinHostPort(ip, "8080")}
	p.env = append(slices.Clone(env), "AGENTFLOW_ROLES="+role, "AGENTFLOW_HTTP_ADDR="+p.HTTPAddr)
	if role == RoleGateway {
		p.GRPCAddr, p.HTTPAPIAddr = net.JoinHostPort(ip, "9090"), net.JoinHostPort(ip, "8081")
		p.env = append(p.env, "AGENTFLOW_GRPC_ADDR="+p.GRPCAddr, "AGENTFLOW_HTTP_API_ADDR="+p.HTTPAPIAddr)
	}
	return p
}

// AddEnv adds settings to the process's environment, for its next start.
func (p *Process) AddEnv(env ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.env = append(p.env, env...)
}

func (p *Process) setGRPCAddr(addr string) {
	p.GRPCAddr = addr
	for i, kv := range p.env {
		if strings.HasPrefix(kv, "AGENTFLOW_GRPC_ADDR=") {
			p.env[i] = "AGENTFLOW_GRPC_ADDR=" + addr
		}
	}
}

// Start starts the process (again) and waits until /healthz answers.
//
// A process started again after a kill binds the ports it had, which went
// back into the kernel's ephemeral pool at the kill: another process's
// outgoing connection may hold one for a moment (its bind fails "address
// already in use"). Such a start is tried again, a second apart, for up to
// half a minute.
func (p *Process) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return fmt.Errorf("%s is running", p.Name)
	}
	for attempt := 1; ; attempt++ {
		from := logSize(p.Log)
		err := p.startOnce(ctx)
		if err == nil || attempt == 30 || !errors.Is(err, errExitedAtStart) || !logSays(p.Log, from, "address already in use") {
			return err
		}
		p.log.Warn("process could not bind its port; starting it again", zap.String("name", p.Name), zap.Int("attempt", attempt))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// errExitedAtStart is a start whose process exited before it was healthy.
var errExitedAtStart = errors.New("exited at start")

// logSize is the size of the log at path (0 when it cannot be read).
func logSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// logSays reports whether the log at path says text after offset from.
func logSays(path string, from int64, text string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, from, 1<<20))
	return err == nil && strings.Contains(string(b), text)
}

// startOnce is one start of the process; p.mu is held.
func (p *Process) startOnce(ctx context.Context) error {
	logFile, err := os.OpenFile(p.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("open %s log: %w", p.Name, err)
	}
	defer logFile.Close()
	argv := append(slices.Clone(p.wrap), p.bin)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	done, exit := make(chan struct{}), new(error)
	go func() { *exit = cmd.Wait(); close(done) }()
	p.cmd, p.done, p.exit = cmd, done, exit

	deadline := time.Now().Add(time.Minute)
	client := http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + p.HTTPAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.log.Info("process started", zap.String("name", p.Name), zap.Int("pid", cmd.Process.Pid))
				return nil
			}
		}
		select {
		case <-done:
			return fmt.Errorf("%s %w; see %s", p.Name, errExitedAtStart, p.Log)
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy: %w", p.Name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not healthy within a minute; see %s", p.Name, p.Log)
		}
	}
}

// Kill ends the process with SIGKILL, as a crash or an OOM kill would, and
// waits until it is gone.
func (p *Process) Kill() error { return p.signal(syscall.SIGKILL, 0) }

// Stop asks the process to shut down (SIGTERM) and kills it after
// stopGrace.
func (p *Process) Stop() error { return p.signal(syscall.SIGTERM, stopGrace) }

// stopGrace is how long Stop waits: a worker's default stop timeout
// (30 s: the activities in flight finish) and some.
const stopGrace = 45 * time.Second

// Terminate sends the process SIGTERM, as an orchestrator does to start
// a graceful shutdown, and returns at once; Wait says how it ended.
func (p *Process) Terminate() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return fmt.Errorf("%s is not running", p.Name)
	}
	return p.cmd.Process.Signal(syscall.SIGTERM)
}

// Wait waits until the process has ended and returns how: nil for an
// exit with status 0, else the exit error.
func (p *Process) Wait(ctx context.Context) error {
	p.mu.Lock()
	done, exit := p.done, p.exit
	p.mu.Unlock()
	if done == nil {
		return fmt.Errorf("%s was never started", p.Name)
	}
	select {
	case <-done:
		return *exit
	case <-ctx.Done():
		return fmt.Errorf("%s still running: %w", p.Name, ctx.Err())
	}
}

func (p *Process) signal(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	if grace > 0 {
		select {
		case <-p.done:
			return nil
		case <-time.After(grace):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	<-p.done
	p.log.Info("process ended", zap.String("name", p.Name), zap.String("signal", sig.String()))
	return nil
}

// PID is the process id, 0 when it is not running.
func (p *Process) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running() {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is up.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running()
}

func (p *Process) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}
