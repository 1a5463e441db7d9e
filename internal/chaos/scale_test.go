package chaos

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/bench/grpcturn"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/topology"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// scaleScript is a model with realistic pacing: 300 ms to the first token,
// then a token every 20 ms, 40 tokens (words) in all.
var scaleScript = &scripted.Script{
	Pacing: scripted.Pacing{ChunkWords: 1, DelayMS: 20},
	Rules: []scripted.Rule{{Name: "answer", Reply: scripted.Reply{
		DelayMS: 300,
		Text:    strings.TrimSpace(strings.Repeat("durable agents stream every word exactly once ", 5)),
	}}},
}

const scaleCatalog = `
tenant: chaos
default_agent: talk
agents:
  - id: talk
    description: Answers at length.
    model: openai:gpt-4o-mini
    system_prompt: Answer.
`

// BenchmarkScale starts SCALE_TURNS (default 1,000) streamed turns at once
// through one gateway of the production topology, against a model with
// realistic pacing (300 ms to the first token, then one every 20 ms, 40
// tokens), once with one worker process and once with two
// (SCALE_WORKERS, default "1,2"). It reports errors, the first token's
// latency at the client over the model's own (measured directly), the
// whole turn, and each worker's peak resident memory and CPU time. Every
// stream is checked for gaps and its text. `go tool task scale` runs it.
func BenchmarkScale(b *testing.B) {
	turns := envInt("SCALE_TURNS", 1000)
	var workerCounts []int
	for f := range strings.SplitSeq(cmp.Or(os.Getenv("SCALE_WORKERS"), "1,2"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "SCALE_WORKERS")
		workerCounts = append(workerCounts, n)
	}
	// Requests are not kept: thousands of them would only hold memory.
	model, err := scripted.Start("127.0.0.1:0", scaleScript, scripted.Options{MaxRecorded: 1})
	require.NoError(b, err)
	defer model.Close()
	direct := directFirstToken(b, model.URL()+"/chat/completions")

	var rows []scaleRow
	for _, workers := range workerCounts {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			row := runScale(b, model.URL(), workers, turns)
			row.directMs = direct
			rows = append(rows, row)
			b.ReportMetric(float64(row.errors), "errors")
			b.ReportMetric(row.firstP50-direct, "added-first-token-p50-ms")
			b.ReportMetric(row.firstP99-direct, "added-first-token-p99-ms")
		})
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nscale: %d concurrent streamed turns; the model's own first token (direct, p50): %.0f ms\n", turns, direct)
	fmt.Fprintln(tw, "workers\terrors\twall s\tfirst token p50 ms\tp99 ms\tadded p50 ms\tadded p99 ms\tturn p50 ms\tturn p99 ms\tworker peak RSS MiB\tworker CPU s\tgateway peak RSS MiB")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%.0f\n", r.workers, r.errors, r.wall.Seconds(),
			r.firstP50, r.firstP99, r.firstP50-r.directMs, r.firstP99-r.directMs, r.turnP50, r.turnP99,
			joinFloats(r.workerRSS, "%.0f"), joinFloats(r.workerCPU, "%.1f"), r.gatewayRSS)
	}
	_ = tw.Flush()
}

type scaleRow struct {
	workers                              int
	errors                               int64
	wall                                 time.Duration
	firstP50, firstP99, turnP50, turnP99 float64
	directMs                             float64
	workerRSS, workerCPU                 []float64
	gatewayRSS                           float64
}

func runScale(b *testing.B, modelURL string, workers, turns int) scaleRow {
	dir, err := os.MkdirTemp("", "scale-*")
	require.NoError(b, err)
	defer os.RemoveAll(dir)
	ctx := context.Background()
	top, err := topology.Start(ctx, topology.Options{
		Dir: dir, Workers: workers, Gateways: 1, TemporalPort: -1, Logger: zap.NewNop(),
		Env: []string{
			"OPENAI_BASE_URL=" + modelURL,
			"OPENAI_API_KEY=scale",
			"AGENTFLOW_SCRIPT=",
			"AGENTFLOW_TOKENS=" + token + "=" + tenant + ":user+admin:scale",
		},
	})
	require.NoError(b, err)
	defer func() { _ = top.Stop() }()
	conn, err := grpc.NewClient(top.Gateways[0].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(b, err)
	defer conn.Close()
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	_, err = pb.NewCatalogServiceClient(conn).UpsertCatalog(actx, &pb.UpsertCatalogRequest{Files: map[string]string{"scale.yaml": scaleCatalog}})
	require.NoError(b, err)
	api := pb.NewAgentServiceClient(conn)
	want := scaleScript.Rules[0].Reply.Text

	// One turn first: everything is warm and connected.
	_, _, err = scaleTurn(actx, api, "warm-up", want)
	require.NoError(b, err)

	cpu0 := make([]float64, workers)
	for i, w := range top.Workers {
		cpu0[i] = cpuSeconds(w.PID())
	}
	peak := make([]float64, workers+1) // workers, then the gateway
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			for i, w := range top.Workers {
				peak[i] = max(peak[i], rssMiB(w.PID()))
			}
			peak[workers] = max(peak[workers], rssMiB(top.Gateways[0].PID()))
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	})

	firsts := make([]float64, turns)
	totals := make([]float64, turns)
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	begin := time.Now()
	b.ResetTimer()
	for i := range turns {
		wg.Go(func() {
			tctx, cancel := context.WithTimeout(actx, 5*time.Minute)
			defer cancel()
			first, total, err := scaleTurn(tctx, api, fmt.Sprintf("scale-%d-%d-%d", workers, time.Now().UnixNano(), i), want)
			if err != nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
				return
			}
			firsts[i], totals[i] = ms(first), ms(total)
		})
	}
	wg.Wait()
	wall := time.Since(begin)
	b.StopTimer()
	close(stopSampling)
	sampling.Wait()

	row := scaleRow{workers: workers, errors: errs.Load(), wall: wall, gatewayRSS: peak[workers], workerRSS: peak[:workers]}
	for i, w := range top.Workers {
		row.workerCPU = append(row.workerCPU, cpuSeconds(w.PID())-cpu0[i])
	}
	firsts, totals = nonZero(firsts), nonZero(totals)
	if len(firsts) > 0 {
		row.firstP50, row.firstP99 = percentile(firsts, .5), percentile(firsts, .99)
		row.turnP50, row.turnP99 = percentile(totals, .5), percentile(totals, .99)
	}
	if v := firstErr.Load(); v != nil {
		b.Errorf("%d of %d turns failed; first: %s\nthe gateway's first errors:\n%s", errs.Load(), turns, v, grepLog(top.Gateways[0].Log, "request failed", 3))
	}
	return row
}

// scaleTurn streams one turn and checks it: indices without a gap, the
// model's whole text, a completed status. It returns the time to the
// first token and to the end.
func scaleTurn(ctx context.Context, api pb.AgentServiceClient, job, want string) (time.Duration, time.Duration, error) {
	r, err := grpcturn.Stream(ctx, api, &pb.TurnRequest{JobId: job, Prompt: "Tell me about durable agents."})
	if err != nil {
		return 0, 0, err
	}
	if r.Status != pb.Status_STATUS_COMPLETED || r.Text != want {
		return 0, 0, fmt.Errorf("%s: ended %s with %q", job, r.Status, r.Text)
	}
	return r.FirstToken, r.Total, nil
}

// directFirstToken is the model's own time to its first streamed chunk,
// the median of ten sequential calls straight to it.
func directFirstToken(b *testing.B, url string) float64 {
	var samples []float64
	for range 10 {
		body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Tell me about durable agents."}]}`
		begin := time.Now()
		resp, err := http.Post(url, "application/json", strings.NewReader(body))
		require.NoError(b, err)
		buf := make([]byte, 1)
		_, err = resp.Body.Read(buf) // the first byte is the first chunk
		require.NoError(b, err)
		samples = append(samples, ms(time.Since(begin)))
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return percentile(samples, .5)
}

// grepLog returns up to n lines of a log file that contain s.
func grepLog(path, s string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, s) && len(out) < n {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// cpuSeconds is a process's user and system CPU time, from /proc.
func cpuSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses.
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func percentile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

func nonZero(v []float64) []float64 {
	return slices.DeleteFunc(slices.Clone(v), func(x float64) bool { return x == 0 })
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func joinFloats(v []float64, format string) string {
	var parts []string
	for _, x := range v {
		parts = append(parts, fmt.Sprintf(format, x))
	}
	return strings.Join(parts, " + ")
}
