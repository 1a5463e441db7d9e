package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
)

// BenchmarkKnowledgeIngest ingests the shipped corpus
// (internal/e2e/testdata/corpus: 300 documents) over the HTTP API into a
// new collection per iteration, on the whole server (gateway, Ingest
// workflow, IngestPage activities, the scripted model's embeddings over
// HTTP, PostgreSQL), from the POST to the ingest's end as
// GET /v1/ingests/{id} sees it, and reports documents and embeddings a
// second.
func BenchmarkKnowledgeIngest(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "e2e", "testdata", "corpus", "documents.json"))
	if err != nil {
		b.Fatal(err)
	}
	var docs []json.RawMessage
	if err := json.Unmarshal(data, &docs); err != nil {
		b.Fatal(err)
	}
	token := "bench-" + testserver.RandomID()
	ts := testserver.Start(b, testserver.Options{Script: benchScript(), HTTPAPI: true, Logger: zap.NewNop(),
		Tokens: map[string]string{token: "bench:admin+user:bench"}})
	api := "http://" + ts.HTTPAPIAddr()
	unavailable := 0
	// call answers the status; want 0 takes 200 and 503.
	call := func(method, path string, body any, want int, out any) int {
		b.Helper()
		var r io.Reader
		if body != nil {
			raw, err := json.Marshal(body)
			if err != nil {
				b.Fatal(err)
			}
			r = bytes.NewReader(raw)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, api+path, r)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		switch {
		case want == 0 && resp.StatusCode == http.StatusServiceUnavailable:
			return resp.StatusCode
		case resp.StatusCode != want && (want != 0 || resp.StatusCode != http.StatusOK):
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				b.Fatal(err)
			}
		}
		return resp.StatusCode
	}
	var took time.Duration
	var documents, embeddings int
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("corpus-%d", i)
		call("POST", "/v1/collections", map[string]any{"name": name, "embedding_model": "openai:text-embedding-3-small"}, http.StatusCreated, nil)
		start := time.Now()
		var started struct {
			Status string `json:"status_url"`
		}
		call("POST", "/v1/collections/"+name+"/documents", map[string]any{"documents": docs}, http.StatusAccepted, &started)
		var st contract.IngestStatus
		for st.State == "" || st.State == contract.IngestRunning {
			time.Sleep(20 * time.Millisecond)
			if code := call("GET", started.Status, nil, 0, &st); code == http.StatusServiceUnavailable {
				unavailable++
			}
		}
		took += time.Since(start)
		if st.State != contract.IngestCompleted || st.Stored != len(docs) {
			b.Fatalf("ingest ended %s with %+v", st.State, st.IngestCounts)
		}
		documents += st.Stored
		embeddings += st.Embeddings
	}
	b.ReportMetric(float64(documents)/took.Seconds(), "docs/s")
	b.ReportMetric(float64(embeddings)/took.Seconds(), "embeddings/s")
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/ingest")
	b.ReportMetric(float64(unavailable), "status-503s")
}
