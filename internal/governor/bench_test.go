package governor_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/governor"
)

// BenchmarkGovernor is what the governor adds to a model call under its
// limits: one admission (Acquire) and one release (Done) against the real
// Postgres, with every limit declared so that each is counted, and the
// key's window holding the calls before it. It reports the p50 and p99
// of the admission alone (what a call waits before it is sent) and of
// the pair, beside the mean of the pair:
//
//	go test -run '^$' -bench Governor -benchtime 2000x ./internal/governor/
func BenchmarkGovernor(b *testing.B) {
	s := open(b)
	limits, err := governor.ParseLimits("openai=requests:1000000/1m,input_tokens:1000000000/1m,output_tokens:1000000000/1m,concurrent:1000")
	require.NoError(b, err)
	g, err := governor.New(governor.Options{Store: s, Limits: limits, Logger: zap.NewNop()})
	require.NoError(b, err)
	ctx := context.Background()
	usage := &agent.Usage{PromptTokens: 900, CompletionTokens: 100}
	took := make([]time.Duration, 0, b.N)
	admitted := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		p, err := g.Acquire(ctx, governor.Call{Model: "openai:gpt-4o", ID: fmt.Sprint(i), TenantID: "bench",
			Input: 1000, Output: 500, Hold: time.Minute})
		if err != nil || p == nil {
			b.Fatalf("acquire: %v", err)
		}
		admitted = append(admitted, time.Since(start))
		p.Done(ctx, usage)
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	for _, d := range []struct {
		name string
		took []time.Duration
	}{{"admit", admitted}, {"admit+release", took}} {
		slices.Sort(d.took)
		b.ReportMetric(float64(d.took[len(d.took)/2].Microseconds())/1000, d.name+"-p50-ms")
		b.ReportMetric(float64(d.took[len(d.took)*99/100].Microseconds())/1000, d.name+"-p99-ms")
	}
}
