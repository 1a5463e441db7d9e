package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/testserver"
)

// corpusQuestion is one of the shipped corpus's questions: its answer
// and the title of the document that holds it.
type corpusQuestion struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Document string `json:"document"`
}

// BenchmarkKnowledgeRecall measures retrieval quality on the shipped
// corpus (internal/e2e/testdata/corpus: 300 documents, 600 questions,
// each naming its answer and its source document). It ingests the corpus
// once over the HTTP API on the whole server (embeddings by the scripted
// model), then asks every question in each mode (hybrid, text, vector;
// top 10) through POST /v1/collections/{name}/search and reports, per
// mode:
//
//   - recall@1, @5, @10: the share of questions with a chunk of their
//     source document among the first k hits, and MRR, the mean of 1/rank
//     of the first such hit (0 when none is in the top 10);
//   - answer-recall@10 and answer-MRR: the same for the chunk that holds
//     the answer (a chunk of the source document whose text contains it),
//     which is what a model needs to answer;
//   - p50-ms: the median latency of the search request (vector and hybrid
//     include embedding the query over HTTP).
//
// It logs, per mode, the questions whose answering chunk was not in the
// top 10, counted by the kind of their document. Every iteration asks all
// 1,800 searches again; the scores are the same each time, the latencies
// are pooled.
func BenchmarkKnowledgeRecall(b *testing.B) {
	dir := filepath.Join("..", "e2e", "testdata", "corpus")
	var docs []json.RawMessage
	var questions []corpusQuestion
	readJSON(b, filepath.Join(dir, "documents.json"), &docs)
	readJSON(b, filepath.Join(dir, "questions.json"), &questions)
	kinds := map[string]string{} // document title → its metadata's kind
	for _, raw := range docs {
		var d struct {
			Title    string            `json:"title"`
			Metadata map[string]string `json:"metadata"`
		}
		must(b, json.Unmarshal(raw, &d))
		kinds[d.Title] = d.Metadata["kind"]
	}

	token := "bench-" + testserver.RandomID()
	ts := testserver.Start(b, testserver.Options{Script: benchScript(), HTTPAPI: true, Logger: zap.NewNop(),
		Tokens: map[string]string{token: "bench:admin+user:bench"}})
	api := &benchAPI{b: b, base: "http://" + ts.HTTPAPIAddr(), token: token}
	api.call("POST", "/v1/collections", map[string]any{"name": "corpus", "embedding_model": "openai:text-embedding-3-small"}, http.StatusCreated, nil)
	var started struct {
		Status string `json:"status_url"`
	}
	api.call("POST", "/v1/collections/corpus/documents", map[string]any{"documents": docs}, http.StatusAccepted, &started)
	var st contract.IngestStatus
	for st.State == "" || st.State == contract.IngestRunning {
		time.Sleep(50 * time.Millisecond)
		// 503: the worker did not answer the status query in time; ask again.
		api.call("GET", started.Status, nil, http.StatusOK, &st, http.StatusServiceUnavailable)
	}
	if st.State != contract.IngestCompleted || st.Stored != len(docs) {
		b.Fatalf("ingest ended %s with %+v", st.State, st.IngestCounts)
	}

	modes := []knowledge.Mode{knowledge.ModeHybrid, knowledge.ModeText, knowledge.ModeVector}
	byDoc, byAnswer := map[knowledge.Mode]*ranks{}, map[knowledge.Mode]*ranks{}
	missed := map[knowledge.Mode]map[string]int{}
	lat := map[knowledge.Mode][]time.Duration{}
	b.ResetTimer()
	for range b.N {
		for _, mode := range modes {
			byDoc[mode], byAnswer[mode], missed[mode] = &ranks{}, &ranks{}, map[string]int{}
			for _, q := range questions {
				var res struct {
					Hits []agent.Hit `json:"hits"`
				}
				start := time.Now()
				api.call("POST", "/v1/collections/corpus/search", map[string]any{"query": q.Question, "mode": mode, "top_k": 10}, http.StatusOK, &res)
				lat[mode] = append(lat[mode], time.Since(start))
				byDoc[mode].add(res.Hits, func(h agent.Hit) bool { return h.DocumentTitle == q.Document })
				if !byAnswer[mode].add(res.Hits, func(h agent.Hit) bool {
					return h.DocumentTitle == q.Document && strings.Contains(h.Chunk.Text, q.Answer)
				}) {
					missed[mode][kinds[q.Document]]++
				}
			}
		}
	}
	b.StopTimer()
	for _, mode := range modes {
		b.Logf("%s: answering chunk not in the top 10, by document kind: %v", mode, missed[mode])
		b.ReportMetric(byDoc[mode].recall(1), string(mode)+"-recall@1")
		b.ReportMetric(byDoc[mode].recall(5), string(mode)+"-recall@5")
		b.ReportMetric(byDoc[mode].recall(10), string(mode)+"-recall@10")
		b.ReportMetric(byDoc[mode].mrr(), string(mode)+"-MRR")
		b.ReportMetric(byAnswer[mode].recall(10), string(mode)+"-answer-recall@10")
		b.ReportMetric(byAnswer[mode].mrr(), string(mode)+"-answer-MRR")
		b.ReportMetric(ms(percentile(lat[mode], 0.5)), string(mode)+"-p50-ms")
	}
}

// ranks accumulates the rank at which each question's first relevant hit
// came.
type ranks struct {
	questions  int
	within     [11]int // within[k]: questions whose first relevant hit is at rank k (1..10)
	reciprocal float64
}

// add scores one question's hits, best first; it reports whether one of
// the first ten is relevant.
func (r *ranks) add(hits []agent.Hit, relevant func(agent.Hit) bool) bool {
	r.questions++
	for i, h := range hits[:min(len(hits), 10)] {
		if relevant(h) {
			r.within[i+1]++
			r.reciprocal += 1 / float64(i+1)
			return true
		}
	}
	return false
}

// recall is the share of questions with a relevant hit among the first
// k.
func (r *ranks) recall(k int) float64 {
	n := 0
	for _, c := range r.within[1 : k+1] {
		n += c
	}
	return float64(n) / float64(r.questions)
}

// mrr is the mean reciprocal rank of the first relevant hit.
func (r *ranks) mrr() float64 { return r.reciprocal / float64(r.questions) }

// benchAPI calls the server's HTTP API with a bearer token, failing the
// benchmark on any status but the one wanted or one of also (whose
// body is not decoded).
type benchAPI struct {
	b           *testing.B
	base, token string
}

func (a *benchAPI) call(method, path string, body any, want int, out any, also ...int) {
	a.b.Helper()
	var r io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		must(a.b, err)
		r = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, r)
	must(a.b, err)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	must(a.b, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must(a.b, err)
	if slices.Contains(also, resp.StatusCode) {
		return
	}
	if resp.StatusCode != want {
		a.b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out != nil {
		must(a.b, json.Unmarshal(raw, out))
	}
}

func readJSON(b *testing.B, path string, out any) {
	b.Helper()
	data, err := os.ReadFile(path)
	must(b, err)
	if err := json.Unmarshal(data, out); err != nil {
		b.Fatalf("%s: %v", path, err)
	}
}
