package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stack is the agentflow stack the turn runs on: its addresses, and the
// processes whose CPU and memory are measured.
type stack struct {
	gateway, temporal, namespace string
	// httpAPI is the gateway's HTTP API (http://host:port), where the
	// turn's timeline is read; "" when it is off.
	httpAPI string
	// workers are the processes that run the worker role (with -topology
	// dev, the one process of the worker and the gateway); server is the
	// Temporal server's (0: unknown).
	workers []int
	server  int

	cmd  *exec.Cmd // the starter, when this program started the stack
	done chan error
	log  string
}

// startupTimeout bounds the stack's start, a first build of the worker
// for the production topology included.
const startupTimeout = 20 * time.Minute

// startStack runs `starter up` with the scripted model as its OpenAI
// model and waits until it is up.
func startStack(ctx context.Context, o options, modelURL string) (*stack, error) {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, err
	}
	s := &stack{log: filepath.Join(o.dir, "up.log"), done: make(chan error, 1)}
	out, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	args := []string{"up", "--temporal-db", o.temporalDB}
	if o.topology == "production" {
		args = []string{"up", "--production", "--temporal-port", "0"}
	}
	s.cmd = exec.Command(o.starter, args...)
	// The scripted model as the OpenAI provider, and free ports where the
	// stack takes them (the machine may run other stacks); the sample
	// flights API is not needed.
	s.cmd.Env = append(os.Environ(), "OPENAI_API_KEY=scripted", "OPENAI_BASE_URL="+modelURL, "AGENTFLOW_SCRIPT=",
		"AGENTFLOW_GRPC_ADDR=127.0.0.1:0", "AGENTFLOW_HTTP_ADDR=127.0.0.1:0", "AGENTFLOW_HTTP_API_ADDR=127.0.0.1:0", "AGENTFLOW_FLIGHTS_ADDR=off")
	s.cmd.Stdout, s.cmd.Stderr = out, out
	progress("starting the stack: %s %s (log: %s)", o.starter, strings.Join(args, " "), s.log)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the stack: %w", err)
	}
	go func() { s.done <- s.cmd.Wait() }()
	if err := s.waitUp(ctx); err != nil {
		s.stop()
		return nil, err
	}
	return s, s.find(o.topology)
}

// waitUp waits for the line the starter prints once the stack is up, and
// reads the stack's addresses from what it printed.
func (s *stack) waitUp(ctx context.Context) error {
	deadline := time.Now().Add(startupTimeout)
	for {
		text, _ := os.ReadFile(s.log)
		if bytes.Contains(text, []byte("Press Ctrl-C")) {
			return s.addresses(string(text))
		}
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("the stack exited at start (%v); see %s", err, s.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stack was not up within %s; see %s", startupTimeout, s.log)
		}
	}
}

var (
	grpcLine     = regexp.MustCompile(`gRPC API:\s+(\S+)`)
	temporalLine = regexp.MustCompile(`Temporal:\s+(\S+) \(namespace (\S+)\)`)
	chatLine     = regexp.MustCompile(`Chat page:\s+(http://\S+)/chat\b`)
)

func (s *stack) addresses(text string) error {
	g, t := grpcLine.FindStringSubmatch(text), temporalLine.FindStringSubmatch(text)
	if g == nil || t == nil {
		return fmt.Errorf("the stack did not say where its gateway and Temporal are; see %s", s.log)
	}
	s.gateway, s.temporal, s.namespace = g[1], t[1], t[2]
	if c := chatLine.FindStringSubmatch(text); c != nil {
		s.httpAPI = c[1]
	}
	return nil
}

// find finds the worker processes and the Temporal server among the
// starter's children: with -topology dev the starter is the worker.
func (s *stack) find(topology string) error {
	pid := s.cmd.Process.Pid
	if topology == "dev" {
		s.workers = []int{pid}
	}
	for _, child := range children(pid) {
		argv := cmdline(child)
		switch {
		case len(argv) == 0:
		case filepath.Base(argv[0]) == "temporal-server" || (len(argv) > 2 && argv[2] == "start-dev"):
			s.server = child
		case topology == "production" && hasEnv(child, "AGENTFLOW_ROLES=worker"):
			s.workers = append(s.workers, child)
		}
	}
	if len(s.workers) == 0 {
		return fmt.Errorf("no worker process found under the starter (pid %d)", pid)
	}
	progress("stack up: gateway %s, Temporal %s, worker pids %v, Temporal server pid %d", s.gateway, s.temporal, s.workers, s.server)
	return nil
}

// runningStack is a stack started elsewhere (-up=false).
func runningStack(o options) (*stack, error) {
	s := &stack{gateway: o.gateway, temporal: o.temporal, namespace: o.namespace, httpAPI: o.httpAPI}
	for f := range strings.SplitSeq(o.workerPIDs, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("-worker-pids: %q is not a process id", f)
		}
		s.workers = append(s.workers, pid)
	}
	return s, nil
}

// stop stops a stack this program started, as Ctrl-C does.
func (s *stack) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// children are a process's child processes.
func children(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for f := range strings.FieldsSeq(string(data)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func cmdline(pid int) []string {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
}

// hasEnv reports whether a process was started with the variable set
// so; nothing else of its environment is kept.
func hasEnv(pid int, kv string) bool {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for v := range bytes.SplitSeq(data, []byte{0}) {
		if string(v) == kv {
			return true
		}
	}
	return false
}

// cpuMS is the CPU time (user and system) the processes have used, in
// milliseconds; the kernel counts it in ticks of 10 ms (USER_HZ 100).
func cpuMS(pids ...int) (float64, error) {
	total := 0.0
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return 0, err
		}
		// The fields after the command's closing parenthesis: state is
		// the first, utime and stime the 12th and 13th.
		rest := string(data[bytes.LastIndexByte(data, ')')+1:])
		f := strings.Fields(rest)
		if len(f) < 13 {
			return 0, errors.New("short /proc stat")
		}
		for _, v := range f[11:13] {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, err
			}
			total += n * 10
		}
	}
	return total, nil
}

// rssMiB is the processes' resident memory together, in MiB.
func rssMiB(pids ...int) (float64, error) {
	total := 0.0
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return 0, err
		}
		for line := range strings.SplitSeq(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
				if err != nil {
					return 0, err
				}
				total += kb / 1024
			}
		}
	}
	return total, nil
}
