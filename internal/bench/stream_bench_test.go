package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/openai"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/eventlog"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// samples is how many sequential streams each latency figure is made of.
const samples = 30

// timing is one stream's latencies.
type timing struct {
	ttft     time.Duration   // from the request to the first token at the client
	perToken []time.Duration // per word: client arrival - the model's flush of it
	turn     time.Duration   // from the request to the turn's last event at the client
	events   int
}

type followFunc func(ctx context.Context, streamID string, send func(agent.Event) error) error

// direct streams the same reply straight from the scripted server with
// langchaingo: the floor.
func direct(ctx context.Context, st *stack, id string) (timing, error) {
	m, err := openai.New(openai.WithBaseURL(st.Model.URL()), openai.WithToken("bench"), openai.WithModel("gpt-4o-mini"))
	if err != nil {
		return timing{}, err
	}
	var t timing
	start := time.Now()
	_, err = m.GenerateContent(ctx, []llms.MessageContent{llms.TextParts(llms.ChatMessageTypeHuman, "bench "+id)},
		llms.WithStreamingFunc(func(_ context.Context, chunk []byte) error {
			t.observe(st, start, string(chunk), time.Now())
			return nil
		}))
	return t, err
}

// durable runs the reply as an AgentTurn and follows its events.
func durable(ctx context.Context, st *stack, follow followFunc, id string) (timing, error) {
	var t timing
	start := time.Now()
	streamID, err := st.startTurn(ctx, st.Client(), id)
	if err != nil {
		return t, err
	}
	var got []string
	err = follow(ctx, streamID, func(e agent.Event) error {
		got = append(got, fmt.Sprintf("%d:%s:%q", e.Index, e.Kind, e.Text))
		t.events++
		if e.Kind == agent.EventToken {
			t.observe(st, start, e.Text, time.Now())
		}
		return nil
	})
	t.turn = time.Since(start)
	if err == nil && len(t.perToken) != words {
		err = fmt.Errorf("stream %s: got %d words, want %d: %v", streamID, len(t.perToken), words, got)
	}
	return t, err
}

func (t *timing) observe(st *stack, start time.Time, text string, now time.Time) {
	for _, w := range strings.Fields(text) {
		if t.ttft == 0 {
			t.ttft = now.Sub(start)
		}
		if at, ok := st.emitted.at(w); ok {
			t.perToken = append(t.perToken, now.Sub(at))
		}
	}
}

// viaGateway starts and follows the turn with one gRPC Stream call, as an
// app does.
func viaGateway(ctx context.Context, st *stack, c pb.AgentServiceClient, id string) (timing, error) {
	var t timing
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bench-token")
	start := time.Now()
	s, err := c.Stream(ctx, &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: "bench-" + id, Prompt: "bench " + id}})
	if err != nil {
		return t, err
	}
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return t, err
		}
		t.events++
		if tok := ev.GetToken(); tok != nil {
			t.observe(st, start, tok.GetText(), time.Now())
		}
	}
	t.turn = time.Since(start)
	if len(t.perToken) != words {
		return t, fmt.Errorf("stream of %s: got %d words, want %d", id, len(t.perToken), words)
	}
	return t, nil
}

// summary aggregates timings.
type summary struct {
	ttft, perToken, turn []time.Duration
}

func (s *summary) add(t timing) {
	s.ttft = append(s.ttft, t.ttft)
	s.turn = append(s.turn, t.turn)
	s.perToken = append(s.perToken, t.perToken...)
}

var (
	floorOnce sync.Once
	floor     summary
)

func BenchmarkStreamLatency(b *testing.B) {
	st := newStack(b)
	ctx := context.Background()
	floorOnce.Do(func() {
		for range samples {
			t, err := direct(ctx, st, testserver.RandomID())
			must(b, err)
			floor.add(t)
		}
	})
	report := func(b *testing.B, s summary) {
		b.ReportMetric(ms(percentile(s.ttft, 0.5)), "ttft-p50-ms")
		b.ReportMetric(ms(percentile(s.ttft, 0.99)), "ttft-p99-ms")
		b.ReportMetric(ms(percentile(s.perToken, 0.5)), "token-p50-ms")
		b.ReportMetric(ms(percentile(s.perToken, 0.99)), "token-p99-ms")
		b.ReportMetric(ms(percentile(s.turn, 0.5)), "turn-p50-ms")
		base := percentile(floor.ttft, 0.5)
		baseTok := percentile(floor.perToken, 0.5)
		b.ReportMetric(ms(percentile(s.ttft, 0.5)-base), "added-ttft-p50-ms")
		b.ReportMetric(ms(percentile(s.ttft, 0.99)-base), "added-ttft-p99-ms")
		b.ReportMetric(ms(percentile(s.perToken, 0.5)-baseTok), "added-token-p50-ms")
		b.ReportMetric(ms(percentile(s.perToken, 0.99)-baseTok), "added-token-p99-ms")
	}

	b.Run("direct", func(b *testing.B) {
		for range b.N {
			report(b, floor)
		}
	})
	modes := []struct {
		name   string
		follow *eventlog.Follower
	}{
		// The product's design: NOTIFY live path, log reads to fill gaps.
		{"live", st.Follower()},
		// The alternative it was chosen over: read the log every 50ms.
		{"poll-50ms", eventlog.NewFollower(st.Client(), nil, tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)), 50*time.Millisecond)},
	}
	b.Run("grpc", func(b *testing.B) {
		c := pb.NewAgentServiceClient(st.Conn)
		for range b.N {
			var s summary
			for range samples {
				t, err := viaGateway(ctx, st, c, testserver.RandomID())
				must(b, err)
				s.add(t)
			}
			report(b, s)
		}
	})
	// The same turn started and followed over HTTP as Server-Sent Events
	// (POST /v1/turns:stream), as a browser or a curl does.
	b.Run("sse", func(b *testing.B) {
		for range b.N {
			var s summary
			for range samples {
				t, err := viaSSE(ctx, st, testserver.RandomID())
				must(b, err)
				s.add(t)
			}
			report(b, s)
		}
	})
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				var s summary
				for range samples {
					t, err := durable(ctx, st, func(ctx context.Context, id string, send func(agent.Event) error) error {
						return m.follow.Follow(ctx, id, 0, send)
					}, testserver.RandomID())
					must(b, err)
					s.add(t)
				}
				report(b, s)
			}
		})
	}
}

// BenchmarkConcurrentStreams runs 100 streamed turns at once, each a gRPC
// Stream call; it reports errors and the events per second clients got.
func BenchmarkConcurrentStreams(b *testing.B) {
	st := newStack(b)
	streams := 100
	if v := os.Getenv("BENCH_STREAMS"); v != "" {
		_, _ = fmt.Sscan(v, &streams)
	}
	c := pb.NewAgentServiceClient(st.Conn)
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var (
			mu     sync.Mutex
			errs   int
			events int
			s      summary
			wg     sync.WaitGroup
		)
		start := time.Now()
		for range streams {
			wg.Go(func() {
				t, err := viaGateway(ctx, st, c, testserver.RandomID())
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs++
					b.Logf("stream failed: %v", err)
					return
				}
				events += t.events
				s.add(t)
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		cancel()
		b.ReportMetric(float64(streams), "streams")
		b.ReportMetric(float64(errs), "errors")
		b.ReportMetric(float64(events)/elapsed.Seconds(), "events/s")
		b.ReportMetric(float64(streams*words)/elapsed.Seconds(), "tokens/s")
		b.ReportMetric(elapsed.Seconds(), "wall-s")
		b.ReportMetric(ms(percentile(s.ttft, 0.5)), "ttft-p50-ms")
		b.ReportMetric(ms(percentile(s.ttft, 0.99)), "ttft-p99-ms")
		b.ReportMetric(ms(percentile(s.perToken, 0.5)), "token-p50-ms")
		b.ReportMetric(ms(percentile(s.perToken, 0.99)), "token-p99-ms")
	}
}
