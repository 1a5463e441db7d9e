package chaos

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/topology"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// BenchmarkSoak streams turns from SOAK_CALLERS concurrent clients
// (default 200) through the two gateways of the production topology for
// SOAK_DURATION (default 10m), each turn checked like a chaos run, and
// samples every process's resident memory and goroutines as it goes:
// they should stay flat. `go tool task soak` runs it.
func BenchmarkSoak(b *testing.B) {
	callers := envInt("SOAK_CALLERS", 200)
	duration := 10 * time.Minute
	if v := os.Getenv("SOAK_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(b, err, "SOAK_DURATION")
		duration = d
	}
	dir, err := os.MkdirTemp("", "soak-*")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	ctx := context.Background()
	e, err := start(ctx, dir, false, zap.NewNop())
	require.NoError(b, err)
	defer e.stop()

	var turns, failures atomic.Int64
	var firstErr atomic.Value
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range callers {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				job := fmt.Sprintf("soak-%d-%d-%d", time.Now().UnixNano(), c, i)
				spec := computeTurn("", "")(e, job)
				run := &turnRun{job: job, workflowID: "turn/" + tenant + "/" + job, gateway: c % len(e.conns), tokens: map[int64]string{}}
				rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
				err := e.stream(rctx, run, &pb.TurnRequest{JobId: job, SessionId: job, Prompt: spec.prompt}, func(moment, *pb.ToolEvent) {})
				if err == nil {
					err = e.check(rctx, trial{}, run, spec, true)
				}
				cancel()
				turns.Add(1)
				if err != nil {
					failures.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", job, err))
				}
			}
		})
	}

	// Samples of every process, at the start and every tenth of the run.
	var samples [][]sample
	take := func() { samples = append(samples, e.sample()) }
	take()
	tick := time.NewTicker(duration / 10)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
loop:
	for {
		select {
		case <-tick.C:
			take()
		case <-done:
			break loop
		}
	}
	tick.Stop()
	take()
	b.StopTimer()

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "soak: %d callers for %s: %d turns, %d failed\n", callers, duration, turns.Load(), failures.Load())
	header := "minute"
	for _, p := range e.top.Processes() {
		header += "\t" + p.Name + " RSS MiB\tgoroutines"
	}
	fmt.Fprintln(tw, header)
	for i, row := range samples {
		line := fmt.Sprintf("%.1f", float64(i)*duration.Minutes()/10)
		if i == len(samples)-1 {
			line = "end"
		}
		for _, s := range row {
			line += fmt.Sprintf("\t%.0f\t%d", s.rssMiB, s.goroutines)
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush()
	b.ReportMetric(float64(turns.Load())/duration.Seconds(), "turns/s")
	b.ReportMetric(float64(failures.Load()), "failed")
	if v := firstErr.Load(); v != nil {
		b.Errorf("%d of %d turns failed; first: %s", failures.Load(), turns.Load(), v)
	}
}

// sample is one process's resident memory and goroutines.
type sample struct {
	rssMiB     float64
	goroutines int
}

func (e *env) sample() []sample {
	var out []sample
	for _, p := range e.top.Processes() {
		out = append(out, sample{rssMiB: rssMiB(p.PID()), goroutines: goroutines(p)})
	}
	return out
}

// rssMiB is a process's resident set size, from /proc.
func rssMiB(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}

// goroutines reads go_goroutines from a process's /metrics.
func goroutines(p *topology.Process) int {
	resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(rest, 64)
			return int(n)
		}
	}
	return -1
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
