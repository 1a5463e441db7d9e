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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

	for range 5 { // warm: connections, caches
		if _, err := d.turn(); err != nil {
			return err
		}
	}
	var alone []sample
	for range o.seq {
		s, err := d.turn()
		if err != nil {
			return err
		}
		alone = append(alone, s)
	}
	byRound := make([][]sample, o.rounds)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, o.conc)
	for range o.conc {
		wg.Go(func() {
			for r := range o.rounds {
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

// calls are the times the model saw a turn's two requests.
type calls struct {
	req1, end1, req2, chunk2, end2 time.Time
}

// model is the peers' fake model's turn, paced: a user message gets a
// calculator tool call, a tool result an answer of 17 words. It notes when
// each request of a turn (by the tag in its prompt) arrived and ended.
type model struct {
	ttft, pace time.Duration
	mu         sync.Mutex
	seen       map[string]*calls
	n          int
}

var tagRE = regexp.MustCompile(`#[0-9]+-[0-9]+`)

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var q struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&q); err != nil || len(q.Messages) == 0 {
		http.Error(w, "want a chat completion request", http.StatusBadRequest)
		return
	}
	tag := ""
	for _, msg := range q.Messages {
		if s, ok := msg.Content.(string); ok && msg.Role == "user" {
			tag = tagRE.FindString(s)
		}
	}
	first := q.Messages[len(q.Messages)-1].Role == "user"
	m.mu.Lock()
	m.n++
	id := "chatcmpl-" + strconv.Itoa(m.n)
	c := m.seen[tag]
	if c == nil {
		c = &calls{}
		m.seen[tag] = c
	}
	m.mu.Unlock()
	note := func(f func()) { m.mu.Lock(); f(); m.mu.Unlock() }
	if first {
		note(func() { c.req1 = arrived })
	} else {
		note(func() { c.req2 = arrived })
	}

	time.Sleep(m.ttft)
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(delta map[string]any, finish any, usage any) {
		chunk := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": "fake",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			chunk["usage"] = usage
		}
		b, _ := json.Marshal(chunk)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	words := strings.Fields("The answer is 50 . That is 12.5 times 4 computed exactly with the calculator tool .")
	usage := map[string]any{"prompt_tokens": 40, "completion_tokens": len(words), "total_tokens": 40 + len(words)}
	if first {
		send(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_" + id, "type": "function",
			"function": map[string]any{"name": "calculator", "arguments": ""}}}}, nil, nil)
		send(map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": `{"expression":"12.5*4"}`}}}}, nil, nil)
		send(map[string]any{}, "tool_calls", usage)
	} else {
		for i, wd := range words {
			if i > 0 {
				time.Sleep(m.pace)
				wd = " " + wd
			} else {
				note(func() { c.chunk2 = time.Now() })
			}
			d := map[string]any{"content": wd}
			if i == 0 {
				d["role"] = "assistant"
			}
			send(d, nil, nil)
		}
		send(map[string]any{}, "stop", usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
	ended := time.Now()
	if first {
		note(func() { c.end1 = ended })
	} else {
		note(func() { c.end2 = ended })
	}
}

// report prints one group of turns' phases.
func (m *model) report(name string, ss []sample) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var total, before, between, after, lag []float64
	for _, s := range ss {
		c := m.seen[s.tag]
		if c == nil || c.req1.IsZero() || c.end1.IsZero() || c.req2.IsZero() || c.end2.IsZero() {
			return fmt.Errorf("turn %s: the model did not see both of its calls", s.tag)
		}
		total = append(total, ms(s.end.Sub(s.start)))
		before = append(before, ms(c.req1.Sub(s.start)))
		between = append(between, ms(c.req2.Sub(c.end1)))
		after = append(after, ms(s.end.Sub(c.end2)))
		lag = append(lag, ms(s.first.Sub(c.chunk2)))
	}
	cell := func(v []float64) string { return fmt.Sprintf("%.1f (%.1f)", mean(v), slices.Max(v)) }
	fmt.Printf("%-18s %8d %14s %14s %14s %14s %14s\n", name, len(ss), cell(total), cell(before), cell(between), cell(after), cell(lag))
	return nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
