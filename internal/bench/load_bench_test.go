package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	"github.com/agentflow/agentflow/workflows"
)

// BenchmarkThroughput runs one-tool turns (model → calculator → model,
// unstreamed, so the scripted model answers at once) from N concurrent
// callers for a while, and reports turns/s, errors, latency, and the CPU
// milliseconds per turn of the benchmark's process (worker, gateway,
// scripted model and callers), of the Temporal dev server and of
// PostgreSQL.
func BenchmarkThroughput(b *testing.B) {
	st := newStack(b)
	ctx := context.Background()
	c := st.Client()
	server := serverPID(st.Address)
	noStream := false
	turn := func(id string) error {
		req := agent.TurnRequest{TenantID: "demo", JobID: "tp-" + id, Prompt: "calc " + id, Stream: &noStream}
		req.Normalize()
		run, err := c.ExecuteWorkflow(ctx, turnclient.StartOptions(st.TaskQueue, req), contract.AgentTurn, req)
		if err != nil {
			return err
		}
		var res agent.TurnResult
		if err := run.Get(ctx, &res); err != nil {
			return err
		}
		if res.Output != "result 50" {
			return fmt.Errorf("turn answered %q", res.Output)
		}
		return nil
	}
	for range 5 {
		must(b, turn(testserver.RandomID()))
	}
	for _, n := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("c%d", n), func(b *testing.B) {
			for range b.N {
				total := max(100, 12*n) // each caller runs its share, one turn after the other
				var (
					mu        sync.Mutex
					latencies []time.Duration
					errs      atomic.Int64
					firstErr  atomic.Value
					wg        sync.WaitGroup
					next      atomic.Int64
				)
				selfCPU, serverCPU, dbCPU := processCPU(os.Getpid()), processCPU(server), postgresCPU()
				start := time.Now()
				for range n {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for next.Add(1) <= int64(total) {
							t0 := time.Now()
							if err := turn(testserver.RandomID()); err != nil {
								errs.Add(1)
								firstErr.CompareAndSwap(nil, err.Error())
								continue
							}
							mu.Lock()
							latencies = append(latencies, time.Since(t0))
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				wall := time.Since(start)
				selfCPU, serverCPU, dbCPU = processCPU(os.Getpid())-selfCPU, processCPU(server)-serverCPU, postgresCPU()-dbCPU
				if e := firstErr.Load(); e != nil {
					b.Logf("first error: %s", e)
				}
				done := float64(len(latencies))
				b.ReportMetric(done/wall.Seconds(), "turns/s")
				b.ReportMetric(float64(errs.Load()), "errors")
				b.ReportMetric(ms(percentile(latencies, 0.5)), "p50-ms")
				b.ReportMetric(ms(percentile(latencies, 0.99)), "p99-ms")
				b.ReportMetric(1000*selfCPU.Seconds()/done, "worker-cpu-ms/turn")
				if server > 0 {
					b.ReportMetric(1000*serverCPU.Seconds()/done, "server-cpu-ms/turn")
				}
				b.ReportMetric(1000*dbCPU.Seconds()/done, "db-cpu-ms/turn")
			}
		})
	}
}

// BenchmarkIdleConversations opens 1,000 conversations, each answering
// one message and then waiting for the next, and reports the resident
// memory of the benchmark's process (the worker with its workflow cache,
// the gateway, the scripted model) before and after, and how long opening
// a conversation took, at the median and at worst.
func BenchmarkIdleConversations(b *testing.B) {
	const conversations = 1000
	st := newStack(b)
	ctx := context.Background()
	c := st.Client()
	runtime.GC()
	before := rss()
	start := time.Now()
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	var errs atomic.Int64
	var mu sync.Mutex
	var took []time.Duration
	for i := range conversations {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			t0 := time.Now()
			in := agent.ConversationInput{TenantID: "demo", SessionID: fmt.Sprintf("idle-%s-%d", testserver.RandomID(), i), History: agent.HistoryFresh}
			sent, err := turnclient.SendMessage(ctx, c, st.TaskQueue, in, agent.SendMessage{Prompt: "calc " + testserver.RandomID()})
			if err == nil {
				err = awaitTurn(ctx, c, sent.TurnWorkflowID)
			}
			mu.Lock()
			took = append(took, time.Since(t0))
			n := len(took)
			mu.Unlock()
			if n%100 == 0 {
				b.Logf("%d open after %v", n, time.Since(start))
			}
			if err != nil {
				if errs.Add(1) == 1 {
					b.Logf("first error: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	all := time.Since(start)
	runtime.GC()
	after := rss()
	b.ReportMetric(float64(conversations), "conversations")
	b.ReportMetric(float64(errs.Load()), "errors")
	b.ReportMetric(float64(before)/(1<<20), "rss-before-MB")
	b.ReportMetric(float64(after)/(1<<20), "rss-MB")
	b.ReportMetric(float64(after-before)/conversations/1024, "KB/conversation")
	b.ReportMetric(all.Seconds(), "open-s")
	// A stall of one conversation hides in the total; the slowest shows it.
	b.ReportMetric(ms(percentile(took, 0.5)), "open-p50-ms")
	b.ReportMetric(ms(percentile(took, 1)), "open-max-ms")
}

// BenchmarkReplay runs a conversation of many turns under the default
// history bound and replays each of its runs, as a worker does when the
// run is not in its cache: the latest run and the longest one.
func BenchmarkReplay(b *testing.B) {
	const turns = 300
	st := newStack(b)
	ctx := context.Background()
	c := st.Client()
	in := agent.ConversationInput{TenantID: "demo", SessionID: "replay-" + testserver.RandomID(), History: agent.HistoryFresh}
	for range turns {
		sent, err := turnclient.SendMessage(ctx, c, st.TaskQueue, in, agent.SendMessage{Prompt: "calc " + testserver.RandomID()})
		must(b, err)
		must(b, awaitTurn(ctx, c, sent.TurnWorkflowID))
	}
	runs := testserver.Runs(ctx, b, c, contract.ConversationWorkflowID(in.TenantID, in.SessionID))
	replayer := worker.NewWorkflowReplayer()
	replayer.RegisterWorkflowWithOptions(workflows.Conversation, workflow.RegisterOptions{Name: contract.Conversation})
	replay := func(events []*historypb.HistoryEvent) time.Duration {
		h := &historypb.History{Events: events}
		var best time.Duration
		for range 5 {
			t0 := time.Now()
			must(b, replayer.ReplayWorkflowHistoryWithOptions(nil, h, testserver.ReplayOptions(events)))
			if d := time.Since(t0); best == 0 || d < best {
				best = d
			}
		}
		return best
	}
	longest, longestTook := 0, time.Duration(0)
	for _, events := range runs {
		if d := replay(events); len(events) > longest {
			longest, longestTook = len(events), d
		}
	}
	latest := runs[len(runs)-1]
	b.ReportMetric(float64(turns), "turns")
	b.ReportMetric(float64(len(runs)), "runs")
	b.ReportMetric(float64(len(latest)), "latest-events")
	b.ReportMetric(ms(replay(latest)), "latest-replay-ms")
	b.ReportMetric(float64(longest), "longest-events")
	b.ReportMetric(ms(longestTook), "longest-replay-ms")
}

// awaitTurn waits for a conversation's turn to finish. The turn may not
// have started yet: a message sent while the conversation rolls over is
// started by its next run.
func awaitTurn(ctx context.Context, c client.Client, id string) error {
	for {
		err := c.GetWorkflow(ctx, id, "").Get(ctx, nil)
		var notFound *serviceerror.NotFound
		if !errors.As(err, &notFound) {
			return err
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// processCPU is the user and system CPU time a process has used so far,
// from /proc; 0 when pid is 0 or unreadable.
func processCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	if pid == os.Getpid() {
		var ru syscall.Rusage
		if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
			return 0
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) in brackets.
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// postgresCPU is the CPU time of the PostgreSQL processes alive now (the
// server and its connections' backends, whose pool outlives a benchmark).
func postgresCPU() time.Duration {
	var total time.Duration
	comms, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, p := range comms {
		if data, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(data)) == "postgres" {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			total += processCPU(pid)
		}
	}
	return total
}

// serverPID finds the dev server serving address, or 0.
func serverPID(address string) int {
	port := address[strings.LastIndexByte(address, ':')+1:]
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(data), "\x00")
		if len(args) > 3 && args[1] == "server" && args[2] == "start-dev" {
			for i := range args[:len(args)-1] {
				if args[i] == "--port" && args[i+1] == port {
					pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
					return pid
				}
			}
		}
	}
	return 0
}

// rss is the process's resident set size in bytes.
func rss() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024
		}
	}
	return 0
}
