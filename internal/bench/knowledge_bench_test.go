package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
)

// knowledgeCorpus writes chunks of about 200 bytes of words drawn from a
// vocabulary of 5,000 (Zipf-distributed, as words in text are) into a new
// collection, 100 chunks a document, embedded by the scripted embedding
// (scripted.EmbeddingDims = 256 dims) in-process, and returns how long
// the writes took.
func knowledgeCorpus(b *testing.B, ctx context.Context, ks *knowledge.Store, name string, chunks int) time.Duration {
	b.Helper()
	_, err := ks.CreateCollection(ctx, agent.Collection{Tenant: "bench", Name: name, EmbeddingModel: "openai:scripted"})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(uint64(chunks), 1))
	zipf := rand.NewZipf(rng, 1.1, 1, uint64(len(benchVocabulary)-1))
	var took time.Duration
	for written, docNo := 0, 0; written < chunks; docNo++ {
		var text strings.Builder
		for range min(100, chunks-written) {
			para := 0
			for para < 200 {
				w := benchVocabulary[zipf.Uint64()]
				text.WriteString(w)
				text.WriteByte(' ')
				para += len(w) + 1
			}
			text.WriteString(".\n\n")
		}
		doc, cs, err := ks.Prepare(agent.Document{Title: fmt.Sprintf("doc %d", docNo)}, text.String())
		if err != nil {
			b.Fatal(err)
		}
		vecs := make([][]float32, len(cs))
		for i, c := range cs {
			vecs[i] = scripted.Embedding(c.Text, scripted.EmbeddingDims)
		}
		start := time.Now()
		if _, _, err := ks.Write(ctx, "bench", name, doc, cs, vecs); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
		written += len(cs)
	}
	return took
}

// benchVocabulary is 5,000 pronounceable made-up words.
var benchVocabulary = func() []string {
	rng := rand.New(rand.NewPCG(7, 7))
	cons, vows := "bcdfghklmnprstvz", "aeiou"
	seen := map[string]bool{}
	var out []string
	for len(out) < 5000 {
		var w strings.Builder
		for range 2 + rng.IntN(3) {
			w.WriteByte(cons[rng.IntN(len(cons))])
			w.WriteByte(vows[rng.IntN(len(vows))])
		}
		if s := w.String(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}()

// BenchmarkKnowledgeSearch measures search of one collection on the exact
// path (every embedding scanned in Go) at 10,000 and 100,000 chunks of
// 256 dims: vector, full text and hybrid (the query's vector given, so
// no embedding call is timed).
func BenchmarkKnowledgeSearch(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, devtest.Database(b), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ks, err := knowledge.New(ctx, st.Pool(), knowledge.Options{Split: knowledge.SplitOptions{ChunkTokens: 64, OverlapTokens: -1}})
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("chunks=%d", size), func(b *testing.B) {
			name := fmt.Sprintf("c%d", size)
			took := knowledgeCorpus(b, ctx, ks, name, size)
			b.ReportMetric(float64(size)/took.Seconds(), "chunks-written/s")
			queries := 100
			if size > 10_000 {
				queries = 50
			}
			rng := rand.New(rand.NewPCG(3, 3))
			qs := make([]knowledge.Query, queries)
			for i := range qs {
				words := make([]string, 4)
				for j := range words {
					words[j] = benchVocabulary[rng.IntN(500)]
				}
				text := strings.Join(words, " ")
				qs[i] = knowledge.Query{Text: text, TopK: 10, Vector: scripted.Embedding(text, scripted.EmbeddingDims)}
			}
			for _, mode := range []knowledge.Mode{knowledge.ModeVector, knowledge.ModeText, knowledge.ModeHybrid} {
				var lat []time.Duration
				for _, q := range qs {
					q.Mode = mode
					start := time.Now()
					if _, _, err := ks.Search(ctx, nil, "bench", name, q); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(start))
				}
				b.ReportMetric(ms(percentile(lat, 0.5)), string(mode)+"-p50-ms")
				b.ReportMetric(ms(percentile(lat, 0.99)), string(mode)+"-p99-ms")
			}
		})
	}
}
