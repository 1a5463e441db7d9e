package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/store"
)

// sweepObjects is how many expired blobs, results and turns
// BenchmarkRetentionSweep deletes: each of the blobs has its object on
// the stack's S3 store.
const sweepObjects = 100_000

// countRequests is an S3 endpoint in front of another that counts the
// requests it forwards.
type countRequests struct {
	n     atomic.Int64
	proxy *httputil.ReverseProxy
}

func (c *countRequests) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.n.Add(1)
	c.proxy.ServeHTTP(w, r)
}

// BenchmarkRetentionSweep sweeps a tenant's sweepObjects expired blobs
// (a row, an owner and an S3 object each), as many expired results and
// as many expired turns (a row and a step each), a kind at a time in
// batches of store.DefaultSweepBatch, as the Retention workflow's
// activity does; it reports the time, the SQL statements and the S3
// requests of each kind.
func BenchmarkRetentionSweep(b *testing.B) {
	ctx := context.Background()
	cfg := devtest.ObjectStore(b)
	upstream, err := url.Parse(cfg.Endpoint)
	must(b, err)
	counter := &countRequests{proxy: httputil.NewSingleHostReverseProxy(upstream)}
	front := httptest.NewServer(counter)
	b.Cleanup(front.Close)
	cfg.Endpoint = front.URL
	objects, err := objstore.New(ctx, cfg)
	must(b, err)
	st, err := store.Open(ctx, devtest.Database(b), store.Options{Objects: objects, Retention: agent.Retention{Blobs: time.Hour, Results: time.Hour, Transcripts: time.Hour}})
	must(b, err)
	b.Cleanup(st.Close)

	start := time.Now()
	seedSweep(b, ctx, st, objects)
	b.Logf("seeded %d blobs with their objects, %d results and %d turns in %s", sweepObjects, sweepObjects, sweepObjects, time.Since(start).Round(time.Second))

	for b.Loop() {
		before := time.Now().Add(-time.Hour)
		for _, kind := range store.RetentionKinds {
			s3Before := counter.n.Load()
			t0 := time.Now()
			var total store.Swept
			batches := 0
			for {
				got, err := st.Sweep(ctx, store.Sweep{RunID: "bench", TenantID: "acme", Kind: kind, Before: before})
				must(b, err)
				batches++
				total.Deleted += got.Deleted
				total.Freed += got.Freed
				total.Objects += got.Objects
				total.Statements += got.Statements
				if !got.More {
					break
				}
			}
			took := time.Since(t0)
			b.Logf("%-11s deleted %d (blobs freed %d, objects %d) in %d batches: %.2f s, %.0f rows/s, %d SQL statements, %d S3 requests",
				kind, total.Deleted, total.Freed, total.Objects, batches, took.Seconds(), float64(total.Deleted)/took.Seconds(),
				total.Statements, counter.n.Load()-s3Before)
			b.ReportMetric(took.Seconds(), string(kind)+"-s")
			b.ReportMetric(float64(total.Statements), string(kind)+"-statements")
		}
	}
	var left int
	must(b, st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM cas_blobs) + (SELECT count(*) FROM agent_results) + (SELECT count(*) FROM turns)`).Scan(&left))
	if left != 0 {
		b.Fatalf("%d rows left after the sweep", left)
	}
}

// seedSweep stores sweepObjects expired blobs of tenant acme, each with
// an object, and as many expired results and turns.
func seedSweep(b *testing.B, ctx context.Context, st *store.Store, objects *objstore.Store) {
	b.Helper()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(32)
	for i := range sweepObjects {
		g.Go(func() error {
			body := fmt.Appendf(nil, "expired object %d", i)
			return objects.Put(gctx, objstore.Key(fmt.Sprintf("%064x", i)), bytes.NewReader(body), int64(len(body)), "text/plain", nil)
		})
	}
	must(b, g.Wait())
	for _, q := range []string{
		`INSERT INTO cas_blobs (sha256, content_type, size, object_key, created_at)
SELECT lpad(to_hex(i), 64, '0'), 'text/plain', 20, 'sha256/' || lpad(to_hex(i), 64, '0'), now() - interval '2 days'
FROM generate_series(0, $1 - 1) i`,
		`INSERT INTO blob_owners (tenant_id, sha256, created_at)
SELECT 'acme', lpad(to_hex(i), 64, '0'), now() - interval '2 days' FROM generate_series(0, $1 - 1) i`,
		`INSERT INTO agent_results (tenant_id, job_id, result_data, status, created_at)
SELECT 'acme', 'job-' || i, '{"output": "an answer"}', 'completed', now() - interval '2 days' FROM generate_series(1, $1) i`,
		`INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, request, created_at)
SELECT 'acme', 'job-' || i, 'turn/acme/job-' || i, 'a', 1, '{"prompt": "a question"}', now() - interval '2 days' FROM generate_series(1, $1) i`,
		`INSERT INTO turn_steps (tenant_id, job_id, seq, message)
SELECT 'acme', 'job-' || i, 0, '{"role": "user", "content": "a question"}' FROM generate_series(1, $1) i`,
	} {
		_, err := st.Pool().Exec(ctx, q, sweepObjects)
		must(b, err)
	}
	_, err := st.Pool().Exec(ctx, `ANALYZE`)
	must(b, err)
}
