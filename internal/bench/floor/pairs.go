package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/bench/grpcturn"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// measurePairs measures the turn-shaped floor and agentflow's streamed
// turn (the peers' turn: a calculator call, then the answer) n times
// each, alternately, on the same stack. One run of either moves by a
// quarter from one minute to the next on a shared 2-core machine; pairs
// taken close together, and their median, say what one pair cannot.
func measurePairs(ctx context.Context, w io.Writer, c client.Client, o options, n int, gateway, token string) error {
	conn, err := grpc.NewClient(gateway, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial %s: %w", gateway, err)
	}
	defer conn.Close()
	api := pb.NewAgentServiceClient(conn)
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	var turns atomic.Int64
	turn := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		job := fmt.Sprintf("pairs-%d-%d", os.Getpid(), turns.Add(1))
		r, err := grpcturn.Stream(ctx, api, &pb.TurnRequest{JobId: job, Prompt: "What is 12.5 * 4?"})
		if err != nil {
			return err
		}
		if r.Status != pb.Status_STATUS_COMPLETED || !strings.Contains(r.Text, "50") {
			return fmt.Errorf("job %s ended %s with %q", job, r.Status, r.Text)
		}
		return nil
	}
	var p50s, tputs []float64
	fmt.Fprintln(w, "| pair | floor p50 ms | agentflow p50 ms | p50 × | floor turns/s | agentflow turns/s | turns/s × |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for i := range n {
		f, err := measure(ctx, c, o, "FloorTurnShape", o.shapeArgs())
		if err != nil {
			return fmt.Errorf("floor: %w", err)
		}
		a, err := measureRuns(actx, o, turn)
		if err != nil {
			return fmt.Errorf("agentflow: %w", err)
		}
		if f.Errors > 0 || a.Errors > 0 {
			return fmt.Errorf("pair %d: %d floor and %d agentflow errors (%s%s)", i+1, f.Errors, a.Errors, f.FirstError, a.FirstError)
		}
		p50s, tputs = append(p50s, a.P50/f.P50), append(tputs, a.PerSecond/f.PerSecond)
		fmt.Fprintf(w, "| %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.2f |\n", i+1, f.P50, a.P50, a.P50/f.P50, f.PerSecond, a.PerSecond, a.PerSecond/f.PerSecond)
	}
	slices.Sort(p50s)
	slices.Sort(tputs)
	fmt.Fprintf(w, "\nmedian of %d pairs: agentflow's p50 %.2f× the floor's, its turns/s %.2f× (each pair: %d one after another, %d by %d callers)\n",
		n, median(p50s), median(tputs), o.seq, o.total, o.conc)
	return nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}
