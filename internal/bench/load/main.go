// Command load streams turns through a running agentflow gateway, as many
// at once as asked, for as long as asked, checks every stream (indices
// without a gap, a completed status, text), and then checks that the stack
// still answers: one more turn after the load. It prints one JSON line.
//
// It imports only the generated API and grpcturn: it drives a running
// gateway from outside, as a client does.
//
//	go run ./internal/bench/load -conc 64 -duration 5m
//
// `go tool task load` starts the stack of `go tool task up`, runs it and
// stops the stack.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/bench/grpcturn"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

type report struct {
	Concurrency int            `json:"concurrency"`
	Seconds     float64        `json:"seconds"`
	Turns       int64          `json:"turns"`
	Errors      int64          `json:"errors"`
	PerSecond   float64        `json:"turns_per_s"`
	P50         float64        `json:"turn_p50_ms"`
	P99         float64        `json:"turn_p99_ms"`
	FirstP50    float64        `json:"first_token_p50_ms"`
	ErrorKinds  map[string]int `json:"error_kinds,omitempty"`
	AnswersMs   float64        `json:"answers_after_ms"`
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:50051", "gateway")
	tok := flag.String("token", "dev-token", "bearer token")
	prompt := flag.String("prompt", "What is 12.5 * 4?", "each turn's prompt")
	want := flag.String("want", "50", "text every answer must contain")
	conc := flag.Int("conc", 64, "concurrent callers")
	duration := flag.Duration("duration", 5*time.Minute, "how long callers start turns")
	flag.Parse()
	if *conc < 1 || *duration <= 0 {
		return errors.New("conc and duration must be positive")
	}
	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+*tok)

	var mu sync.Mutex
	var lat, firsts []float64
	kinds := map[string]int{}
	var turns, errs atomic.Int64
	stop := time.Now().Add(*duration)
	begin := time.Now()
	var wg sync.WaitGroup
	for c := range *conc {
		wg.Go(func() {
			for i := 0; time.Now().Before(stop); i++ {
				l, f, err := turn(ctx, api, fmt.Sprintf("load-%d-%d-%d", os.Getpid(), c, i), *prompt, *want)
				turns.Add(1)
				mu.Lock()
				if err != nil {
					errs.Add(1)
					kinds[clip(err.Error())]++
				} else {
					lat, firsts = append(lat, l), append(firsts, f)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	secs := time.Since(begin).Seconds()
	r := report{Concurrency: *conc, Seconds: round(secs), Turns: turns.Load(), Errors: errs.Load(),
		PerSecond: round(float64(turns.Load()) / secs)}
	if len(lat) > 0 {
		r.P50, r.P99, r.FirstP50 = pct(lat, .5), pct(lat, .99), pct(firsts, .5)
	}
	if len(kinds) > 0 {
		r.ErrorKinds = kinds
	}
	// The stack answers after the load.
	after := time.Now()
	if _, _, err := turn(ctx, api, fmt.Sprintf("load-%d-after", os.Getpid()), *prompt, *want); err != nil {
		line, _ := json.Marshal(r)
		fmt.Println(string(line))
		return fmt.Errorf("a turn after the load failed: %w", err)
	}
	r.AnswersMs = round(float64(time.Since(after).Microseconds()) / 1000)
	line, _ := json.Marshal(r)
	fmt.Println(string(line))
	if r.Errors > 0 {
		return fmt.Errorf("%d of %d turns failed", r.Errors, r.Turns)
	}
	return nil
}

// turn streams one turn and checks it; it returns the turn's and the first
// token's latency in milliseconds.
func turn(ctx context.Context, api pb.AgentServiceClient, job, prompt, want string) (float64, float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	r, err := grpcturn.Stream(ctx, api, &pb.TurnRequest{JobId: job, Prompt: prompt})
	if err != nil {
		return 0, 0, err
	}
	if r.Status != pb.Status_STATUS_COMPLETED || !strings.Contains(r.Text, want) {
		return 0, 0, fmt.Errorf("turn ended %s with %q", r.Status, clip(r.Text))
	}
	return ms(r.Total), ms(r.FirstToken), nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func pct(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return round(s[int(float64(len(s)-1)*p)])
}

func round(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func clip(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
