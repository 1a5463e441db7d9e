package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/sse"
	"github.com/agentflow/agentflow/internal/testserver"
)

// sseClient has no overall timeout (streams last as long as their turn)
// and enough idle connections for the followers' bursts.
var sseClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 0}}

// sseStream sends one request to the HTTP API and reads its event
// stream, handing each event on; it ends at the turn's terminal status.
func sseStream(ctx context.Context, st *stack, method, path, body string, header map[string]string, each func(agent.Event)) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+st.HTTPAPIAddr()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer bench-token")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := sseClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	r := sse.NewReader(resp.Body)
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s %s: the stream ended before the turn did", method, path)
		}
		if err != nil {
			return err
		}
		if m.Type == gateway.SSEProblemEvent {
			return fmt.Errorf("%s %s: %s", method, path, m.Data)
		}
		ev, err := agent.DecodeEvent([]byte(m.Data))
		if err != nil {
			return err
		}
		each(ev)
		if ev.Terminal() {
			return nil
		}
	}
}

// viaSSE starts and follows the turn with one POST /v1/turns:stream, as a
// browser does.
func viaSSE(ctx context.Context, st *stack, id string) (timing, error) {
	var t timing
	start := time.Now()
	body := fmt.Sprintf(`{"job_id": "bench-%s", "prompt": "bench %s"}`, id, id)
	err := sseStream(ctx, st, "POST", "/v1/turns:stream", body, nil, func(ev agent.Event) {
		t.events++
		if ev.Kind == agent.EventToken {
			t.observe(st, start, ev.Text, time.Now())
		}
	})
	t.turn = time.Since(start)
	if err == nil && len(t.perToken) != words {
		err = fmt.Errorf("SSE stream of %s: got %d words, want %d", id, len(t.perToken), words)
	}
	return t, err
}

// BenchmarkSSEFollowers opens BENCH_FOLLOWERS (default 1,000) Server-Sent
// Events streams on one gateway at once: ten turns of ten seconds each,
// every one followed by a tenth of them from its first event. It reports
// errors, how many streams got their turn whole, the first event's
// latency after connecting, the events per second delivered, and the
// process's RSS growth and CPU time over the run. The gateway runs in the
// benchmark's process, so the RSS and CPU include the clients' side of
// the streams too: they bound the gateway's cost from above.
func BenchmarkSSEFollowers(b *testing.B) {
	st := newStack(b)
	followers, turns := 1000, 10
	if v := os.Getenv("BENCH_FOLLOWERS"); v != "" {
		n, err := strconv.Atoi(v)
		must(b, err)
		followers = n
	}
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		rss0, cpu0 := processRSS(), processCPU(os.Getpid())
		var ids []string
		for range turns {
			id := testserver.RandomID()
			body := fmt.Sprintf(`{"job_id": "bench-%s", "prompt": "long %s"}`, id, id)
			req, err := http.NewRequestWithContext(ctx, "POST", "http://"+st.HTTPAPIAddr()+"/v1/turns", strings.NewReader(body))
			must(b, err)
			req.Header.Set("Authorization", "Bearer bench-token")
			resp, err := sseClient.Do(req)
			must(b, err)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("start: %d", resp.StatusCode)
			}
			ids = append(ids, id)
		}
		var (
			mu        sync.Mutex
			errs      int
			whole     int
			events    int
			firsts    []time.Duration
			peakRSS   int64
			wg        sync.WaitGroup
			sampling  = make(chan struct{})
			samplerWG sync.WaitGroup
		)
		samplerWG.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-sampling:
					return
				case <-tick.C:
					if r := processRSS(); r > peakRSS {
						peakRSS = r
					}
				}
			}
		})
		start := time.Now()
		for i := range followers {
			id := ids[i%turns]
			wg.Go(func() {
				connect := time.Now()
				var first time.Duration
				n, text := 0, 0
				err := sseStream(ctx, st, "GET", "/v1/turn/demo/bench-"+id+"/events:stream", "", nil, func(ev agent.Event) {
					if n == 0 {
						first = time.Since(connect)
					}
					n++
					if ev.Kind == agent.EventToken {
						text += len(strings.Fields(ev.Text))
					}
				})
				mu.Lock()
				defer mu.Unlock()
				events += n
				if err != nil {
					errs++
					b.Logf("follower: %v", err)
					return
				}
				firsts = append(firsts, first)
				if text == longWords {
					whole++
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(sampling)
		samplerWG.Wait()
		cancel()
		b.ReportMetric(float64(followers), "followers")
		b.ReportMetric(float64(errs), "errors")
		b.ReportMetric(float64(whole), "whole")
		b.ReportMetric(ms(percentile(firsts, 0.5)), "first-event-p50-ms")
		b.ReportMetric(ms(percentile(firsts, 0.99)), "first-event-p99-ms")
		b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
		b.ReportMetric(elapsed.Seconds(), "wall-s")
		b.ReportMetric(float64(peakRSS-rss0)/(1<<20), "rss-growth-MiB")
		b.ReportMetric((processCPU(os.Getpid()) - cpu0).Seconds(), "cpu-s")
	}
}

// processRSS is the process's resident set, in bytes (0 where /proc is
// missing).
func processRSS() int64 {
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}
