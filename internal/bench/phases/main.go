// Command phases shows where a streamed turn's time goes around its model
// calls, alone and under concurrent load: it serves a paced
// OpenAI-compatible model of its own (the peers' fake model's turn: a
// calculator tool call, then an answer of 17 words), starts the stack with
// its provider pointed at it, streams turns through the gateway's gRPC API
// and, for each turn, lines the client's times up with the times the model
// saw its two requests (each turn's prompt carries a tag the model reads
// back, so no guessing is involved). It prints, alone and for each round
// of concurrent callers, the mean and the slowest of:
//
//   - before: from the client's call to the first model request (the
//     start of the turn's workflow, routing, loading the agent);
//   - between: from the end of the first model call to the second
//     request (the tool call and what the turn records of it);
//   - after: from the end of the model's answer to the end of the stream
//     (storing the result, the closing events);
//   - first token lag: from the model's first word to the client's.
//
// Everything else of a turn is the model's own pacing.
//
//	go run ./internal/bench/phases -up '.bin/starter up' -conc 32 -rounds 4
//
// `go tool task phases` builds the starter and runs it (TOPOLOGY=production
// for `up --production`).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/bench/grpcturn"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "phases:", err)
		os.Exit(1)
	}
}

type options struct {
	up, addr, token, log string
	ttft, pace           time.Duration
	seq, conc, rounds    int
}

func run() error {
	var o options
	flag.StringVar(&o.up, "up", ".bin/starter up", "command that starts the stack with its gateway on -addr (run with bash, its provider pointed at this model)")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:50051", "the gateway's gRPC address")
	flag.StringVar(&o.token, "token", "dev-token", "bearer token")
	flag.StringVar(&o.log, "log", ".data/phases/up.log", "where the stack's output goes")
	flag.DurationVar(&o.ttft, "ttft", 300*time.Millisecond, "the model's time to its first chunk")
	flag.DurationVar(&o.pace, "pace", 20*time.Millisecond, "the model's time between words")
	flag.IntVar(&o.seq, "seq", 10, "turns one at a time")
	flag.IntVar(&o.conc, "conc", 32, "concurrent callers")
	flag.IntVar(&o.rounds, "rounds", 4, "turns each concurrent caller makes, one after another")
	flag.Parse()
	if o.seq < 1 || o.conc < 1 || o.rounds < 1 {
		return errors.New("seq, conc and rounds must be positive")
	}

	m := &model{ttft: o.ttft, pace: o.pace, seen: map[string]*calls{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = http.Serve(ln, m) }()

	stop, err := startStack(o, "http://"+ln.Addr().String()+"/v1")
	if err != nil {
		return err
	}
	defer stop()

	conn, err := grpc.NewClient(o.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	d := &driver{api: pb.NewAgentServiceClient(conn),
		ctx: metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+o.token)}

	alone, err := d.alone(o.seq)
	if err != nil {
		return err
	}
	byRound, err := d.rounds(o.conc, o.rounds)
	if err != nil {
		return err
	}

	fmt.Printf("phases of a turn, ms (model: %v to the first chunk, %v between words; %d callers)\n", o.ttft, o.pace, o.conc)
	fmt.Printf("%-18s %8s %14s %14s %14s %14s %14s\n", "", "n", "total", "before", "between", "after", "first token lag")
	if err := m.report("alone", alone); err != nil {
		return err
	}
	for r, ss := range byRound {
		if err := m.report(fmt.Sprintf("round %d", r+1), ss); err != nil {
			return err
		}
	}
	return nil
}

// startStack runs o.up with the provider pointed at baseURL and waits
// until it says it is up; stop interrupts it and waits for it to end.
func startStack(o options, baseURL string) (stop func(), err error) {
	if err := os.MkdirAll(filepath.Dir(o.log), 0o755); err != nil {
		return nil, err
	}
	out, err := os.Create(o.log)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("bash", "-c", o.up)
	cmd.Env = append(os.Environ(), "OPENAI_API_KEY=phases", "OPENAI_BASE_URL="+baseURL)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop = func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		out.Close()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for deadline := time.After(10 * time.Minute); ; {
		if b, err := os.ReadFile(o.log); err == nil && strings.Contains(string(b), "Press Ctrl-C") {
			return stop, nil
		}
		select {
		case <-tick.C:
			continue
		case <-exited:
		case <-deadline:
		}
		stop()
		return nil, fmt.Errorf("the stack did not start; see %s", o.log)
	}
}

// sample is one turn as its client saw it.
type sample struct {
	tag               string
	start, first, end time.Time
}

type driver struct {
	api pb.AgentServiceClient
	ctx context.Context
	mu  sync.Mutex
	n   int
}

func (d *driver) turn() (sample, error) {
	d.mu.Lock()
	d.n++
	tag := fmt.Sprintf("#%d-%d", os.Getpid(), d.n)
	d.mu.Unlock()
	ctx, cancel := context.WithTimeout(d.ctx, 2*time.Minute)
	defer cancel()
	begin := time.Now()
	r, err := grpcturn.Stream(ctx, d.api, &pb.TurnRequest{JobId: "phases-" + strings.TrimPrefix(tag, "#"), Prompt: "What is 12.5 * 4? " + tag})
	if err != nil {
		return sample{}, err
	}
	if r.Status != pb.Status_STATUS_COMPLETED || !strings.Contains(r.Text, "50") {
		return sample{}, fmt.Errorf("turn %s ended %s with %q", tag, r.Status, r.Text)
	}
	return sample{tag: tag, start: begin, first: begin.Add(r.FirstToken), end: begin.Add(r.Total)}, nil
}

// alone runs 5 turns to warm connections and caches, then n turns one at
// a time, and returns those n.
func (d *driver) alone(n int) ([]sample, error) {
	for range 5 { // warm: connections, caches
		if _, err := d.turn(); err != nil {
			return nil, err
		}
	}
	var alone []sample
	for range n {
		s, err := d.turn()
		if err != nil {
			return nil, err
		}
		alone = append(alone, s)
	}
	return alone, nil
}

// rounds has conc callers make rounds turns each, one after another, and
// returns the turns by round.
func (d *driver) rounds(conc, rounds int) ([][]sample, error) {
	byRound := make([][]sample, rounds)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Go(func() {
			for r := range rounds {
				s, err := d.turn()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				byRound[r] = append(byRound[r], s)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	return byRound, nil
}
