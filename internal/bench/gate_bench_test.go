package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/store"
)

// BenchmarkWriteGate measures what delivering a write at most once costs
// (internal/effects): the intent recorded before the request leaves and
// the answer after, two PostgreSQL writes, beside a POST to a local API
// that answers at once — the write with its gate, and the bare POST, each
// 500 times one after another. It reports the p50 and p99 of each and
// the gate's share.
func BenchmarkWriteGate(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, devtest.Database(b), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }))
	defer api.Close()
	job := fmt.Sprintf("gate-%d", time.Now().UnixNano())
	if err := st.BeginTurn(ctx, store.Turn{TenantID: "bench", JobID: job, WorkflowID: "turn/bench/" + job, AgentID: "a", AgentVersion: 1,
		Request: agent.TurnRequest{Version: agent.ProtocolVersion, JobID: job, TenantID: "bench", Prompt: "p"}}); err != nil {
		b.Fatal(err)
	}
	const n = 500
	post := func() error {
		resp, err := http.Post(api.URL, "application/json", nil)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}
	for b.Loop() {
		var bare, gated []time.Duration
		for i := range n {
			start := time.Now()
			if err := post(); err != nil {
				b.Fatal(err)
			}
			bare = append(bare, time.Since(start))

			gate := effects.NewGate(st, effects.Key{TenantID: "bench", JobID: job, Seq: i + 1})
			start = time.Now()
			if err := gate.Begin(ctx, "POST "+api.URL); err != nil {
				b.Fatal(err)
			}
			if err := post(); err != nil {
				b.Fatal(err)
			}
			gate.Answered(ctx, http.StatusCreated)
			gated = append(gated, time.Since(start))
		}
		p := func(ds []time.Duration, q float64) time.Duration {
			s := slices.Clone(ds)
			slices.Sort(s)
			return s[int(q*float64(len(s)-1))]
		}
		b.ReportMetric(float64(p(bare, 0.5).Microseconds())/1000, "bare-p50-ms")
		b.ReportMetric(float64(p(gated, 0.5).Microseconds())/1000, "gated-p50-ms")
		b.ReportMetric(float64(p(gated, 0.99).Microseconds())/1000, "gated-p99-ms")
		b.ReportMetric(float64((p(gated, 0.5)-p(bare, 0.5)).Microseconds())/1000, "gate-p50-ms")
	}
}
