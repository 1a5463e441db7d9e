package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// bigBlob is the size of the blob BenchmarkBlobTurn moves: 200 MiB.
const bigBlob = 200 << 20

// blobScript downloads a file with execute_pipeline, keeping it as a
// file (a blob), then sends it by ref to another endpoint, which answers
// its length and sha256. FILES stands for the file server's URL.
const blobScript = `
rules:
  - name: download
    when: {user: '^move (?P<name>[a-z0-9]+)$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "FILES/files/${name}", "response_as": "file"}]}'
  - name: send
    when: {tool: '(?s)\nfile: (?P<ref>cas://sha256:[0-9a-f]{64}) '}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "FILES/upload", "method": "POST", "body_ref": "${ref}"}]}'
  - name: sent
    when: {tool: '"bytes":(?P<n>[0-9]+),"sha256":"(?P<sum>[0-9a-f]{64})"'}
    reply: {text: 'sent ${n} ${sum}'}
  - name: fallback
    reply: {text: "no"}
`

const blobCatalog = `
tenant: demo
default_agent: courier
egress: ["FILESHOST"]
tools:
  - name: execute_pipeline
    kind: execute_pipeline
    approval: never
    config: {cache_ttl_sec: 0}
agents:
  - id: courier
    model: openai:gpt-4o-mini
    tools: [execute_pipeline]
    limits: {max_iterations: 4, turn_timeout_sec: 600}
`

// blobFiles serves bigBlob bytes that do not compress, made as they are
// sent, for any name, and takes uploads, answering their length and
// sha256.
func blobFiles() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutPrefix(r.URL.Path, "/files/"); ok {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", strconv.Itoa(bigBlob))
			_, _ = io.CopyN(w, blobBytes(name), bigBlob)
			return
		}
		h := sha256.New()
		n, err := io.Copy(h, r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"bytes":%d,"sha256":"%s"}`, n, hex.EncodeToString(h.Sum(nil)))
	}))
}

func blobBytes(name string) io.Reader {
	var seed [32]byte
	copy(seed[:], name)
	return rand.NewChaCha8(seed)
}

// BenchmarkBlobTurn moves a 200 MiB blob through one turn: a tool
// downloads it and keeps it as a file (a blob), and its next call reads
// it back by ref and sends it on; with the blob kept in PostgreSQL's
// chunks, and on the stack's S3 store (SeaweedFS, a process of the
// stack, as a real store is another machine). It reports the turn's
// time and the worker's heap: the worker runs in this process, so the
// growth of its Go heap in use at its peak (sampled every millisecond,
// the collector at GOGC=10 so the heap follows what is live) is what it
// held; the bytes allocated in all beside it.
func BenchmarkBlobTurn(b *testing.B) {
	files := blobFiles()
	defer files.Close()
	for _, objects := range []bool{false, true} {
		name := "store=postgres"
		if objects {
			name = "store=s3"
		}
		b.Run(name, func(b *testing.B) {
			ts := testserver.Start(b, testserver.Options{
				Script:      strings.ReplaceAll(blobScript, "FILES", files.URL),
				Catalogs:    []string{strings.ReplaceAll(blobCatalog, "FILESHOST", strings.TrimPrefix(files.URL, "http://"))},
				Logger:      zap.NewNop(),
				ObjectStore: objects,
			})
			var took time.Duration
			var peak, allocated uint64
			for range b.N {
				id := testserver.RandomID()
				h := sha256.New()
				_, _ = io.CopyN(h, blobBytes(id), bigBlob)
				want := fmt.Sprintf("sent %d %x", bigBlob, h.Sum(nil))
				var res agent.TurnResult
				var err error
				peakGrowth, alloc := heapDuring(func() {
					start := time.Now()
					res, err = blobTurn(ts, id)
					took = time.Since(start)
				})
				must(b, err)
				if res.Output != want {
					b.Fatalf("turn: %+v %+v", res.Output, res.Error)
				}
				peak, allocated = max(peak, peakGrowth), alloc
			}
			b.ReportMetric(took.Seconds(), "turn-s")
			b.ReportMetric(float64(bigBlob)/(1<<20)/took.Seconds(), "MiB/s")
			b.ReportMetric(float64(peak)/(1<<20), "heap-peak-growth-MiB")
			b.ReportMetric(float64(allocated)/(1<<20), "allocated-MiB")
		})
	}
}

func blobTurn(ts *testserver.Server, id string) (agent.TurnResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run, err := turnclient.Start(ctx, ts.Client(), ts.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo",
		JobID: "blob-" + id, Prompt: "move " + id})
	if err != nil {
		return agent.TurnResult{}, err
	}
	return turnclient.Result(ctx, run)
}

// heapDuring runs work and returns the peak growth of the heap in use
// over where it stood after a collection before, and the bytes allocated.
func heapDuring(work func()) (peakGrowth, allocated uint64) {
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	samples := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(samples)
	allocs0, inUse0 := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var peak atomic.Uint64
	peak.Store(inUse0)
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				metrics.Read(s)
				if v := s[0].Value.Uint64(); v > peak.Load() {
					peak.Store(v)
				}
			}
		}
	}()
	work()
	close(done)
	<-sampled
	metrics.Read(samples)
	return peak.Load() - inUse0, samples[0].Value.Uint64() - allocs0
}
