package knowledge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
)

func TestMain(m *testing.M) { devtest.Main(m) }

const model = "openai:text-embedding-3-small"

// env is a Store on a new database and an embedder over the scripted
// server.
type env struct {
	ks   *knowledge.Store
	pool *pgxpool.Pool
	emb  *llm.Router
	srv  *scripted.Server
}

func newEnv(t *testing.T, opts knowledge.Options) env {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ks, err := knowledge.New(ctx, st.Pool(), opts)
	require.NoError(t, err)
	srv, err := scripted.Start("127.0.0.1:0", scripted.Demo(), scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	emb, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL()})
	require.NoError(t, err)
	return env{ks: ks, pool: st.Pool(), emb: emb, srv: srv}
}

func (e env) collection(t *testing.T, tenant, name string) agent.Collection {
	t.Helper()
	c, err := e.ks.CreateCollection(context.Background(), agent.Collection{Tenant: tenant, Name: name, EmbeddingModel: model})
	require.NoError(t, err)
	return c
}

func (e env) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

func TestStoreRoundTrip(t *testing.T) {
	e := newEnv(t, knowledge.Options{Split: knowledge.SplitOptions{ChunkTokens: 16, OverlapTokens: 4}})
	ctx := context.Background()
	require.Equal(t, knowledge.IndexExact, e.ks.VectorIndex(), "Debian's PostgreSQL has no pgvector")

	c := e.collection(t, "acme", "handbook")
	require.Equal(t, 0, c.Dims)
	again, err := e.ks.CreateCollection(ctx, agent.Collection{Tenant: "acme", Name: "handbook", EmbeddingModel: model})
	require.NoError(t, err, "a retried create is harmless")
	require.Equal(t, c, again)
	_, err = e.ks.CreateCollection(ctx, agent.Collection{Tenant: "acme", Name: "handbook", EmbeddingModel: "openai:other"})
	require.True(t, agent.IsCode(err, agent.CodeConflict), "%v", err)

	text := "# Refunds\nRefunds are paid within five working days of the return.\n\n# Shipping\nParcels ship from Lyon every weekday morning."
	doc := agent.Document{Title: "Policies", Source: "file://policies.md", Metadata: map[string]string{"lang": "en"}}
	res, err := e.ks.Put(ctx, e.emb, "acme", "handbook", doc, text)
	require.NoError(t, err)
	require.True(t, res.Created)
	require.Greater(t, res.Usage.PromptTokens, 0)
	d := res.Document
	require.Equal(t, agent.DocumentID(agent.ContentHash(text)), d.ID)
	require.Equal(t, "handbook", d.Collection)
	require.Equal(t, "Policies", d.Title)
	require.Equal(t, map[string]string{"lang": "en"}, d.Metadata)
	require.Equal(t, len(text), d.Size)
	require.GreaterOrEqual(t, d.Chunks, 2)
	require.Equal(t, d.Chunks, e.count(t, "knowledge_chunks"))

	c, err = e.ks.Collection(ctx, "acme", "handbook")
	require.NoError(t, err)
	require.Equal(t, scripted.EmbeddingDims, c.Dims, "the first document's vectors set the dims")

	got, err := e.ks.Document(ctx, "acme", "handbook", d.ID)
	require.NoError(t, err)
	require.Equal(t, d, got)
	list, err := e.ks.Documents(ctx, "acme", "handbook", "", 0)
	require.NoError(t, err)
	require.Equal(t, []agent.Document{d}, list)

	hits, _, err := e.ks.Search(ctx, e.emb, "acme", "handbook", knowledge.Query{Text: "when do parcels ship?", TopK: 1})
	require.NoError(t, err)
	require.Len(t, hits, 1)
	h := hits[0]
	require.Contains(t, h.Chunk.Text, "Parcels ship from Lyon")
	require.Equal(t, agent.ChunkID(d.ID, h.Chunk.Position), h.Chunk.ID)
	require.Equal(t, map[string]string{"lang": "en", "heading": "Shipping"}, h.Chunk.Metadata)
	require.Equal(t, "Policies", h.DocumentTitle)
	require.Equal(t, agent.Citation{ChunkID: h.Chunk.ID, DocumentID: d.ID, DocumentTitle: "Policies", Position: h.Chunk.Position}, h.Citation())
	require.Equal(t, 1, h.TextRank)
	require.Equal(t, 1, h.VectorRank)

	cols, err := e.ks.Collections(ctx, "acme")
	require.NoError(t, err)
	require.Len(t, cols, 1)

	require.NoError(t, e.ks.DeleteDocument(ctx, "acme", "handbook", d.ID))
	require.Equal(t, 0, e.count(t, "knowledge_chunks"), "a document's chunks and vectors go with it")
	err = e.ks.DeleteDocument(ctx, "acme", "handbook", d.ID)
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)

	_, err = e.ks.Put(ctx, e.emb, "acme", "handbook", doc, text)
	require.NoError(t, err)
	require.NoError(t, e.ks.DeleteCollection(ctx, "acme", "handbook"))
	for _, table := range []string{"knowledge_collections", "knowledge_documents", "knowledge_chunks"} {
		require.Zero(t, e.count(t, table), table)
	}
}

func TestPutIdempotent(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	e.collection(t, "acme", "kb")
	text := "The warranty lasts two years."
	first, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{Title: "Warranty"}, text)
	require.NoError(t, err)
	embedded := e.srv.Embedded()

	again, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{Title: "Warranty, again"}, text)
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, first.Document, again.Document, "the stored document, unchanged")
	require.Equal(t, embedded, e.srv.Embedded(), "a stored text is not embedded again")

	// A retried write after the embedding (the activity's retry after a
	// lost reply) stores nothing twice either.
	doc, chunks, err := e.ks.Prepare(agent.Document{Title: "Warranty"}, text)
	require.NoError(t, err)
	vecs := [][]float32{scripted.Embedding(chunks[0].Text, scripted.EmbeddingDims)}
	stored, created, err := e.ks.Write(ctx, "acme", "kb", doc, chunks, vecs)
	require.NoError(t, err)
	require.False(t, created)
	require.Equal(t, first.Document, stored)
	require.Equal(t, 1, e.count(t, "knowledge_documents"))
	require.Equal(t, 1, e.count(t, "knowledge_chunks"))

	// Puts of one new text at once: one stores it, the others find it.
	var g errgroup.Group
	won := make([]bool, 4)
	for i := range won {
		g.Go(func() error {
			res, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{}, "Racing writers store one copy.")
			won[i] = res.Created
			return err
		})
	}
	require.NoError(t, g.Wait())
	n := 0
	for _, c := range won {
		if c {
			n++
		}
	}
	require.Equal(t, 1, n)
	require.Equal(t, 2, e.count(t, "knowledge_documents"))
	require.Equal(t, 2, e.count(t, "knowledge_chunks"))
}

// TestHybrid: a fixture where each ranker alone misses one of the two
// relevant chunks in its top 2. Full text ranks the chunk that shares
// two stems ("parcels", "arrive") first and the land parcels second;
// the scripted embedding shares no whole word with the misspelt
// "Shiped" and ranks "shipping" first. Fused, both relevant chunks lead.
func TestHybrid(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	e.collection(t, "acme", "kb")
	docs := map[string]string{
		"stemmed":   "Orders are shipping tomorrow.",
		"misspelt":  "Shiped parcels arrive in three days.",
		"unrelated": "The office cat sleeps all day.",
		"other":     "Invoices are due at the end of the month.",
		"noise":     "Parcels of land are sold by the county.",
	}
	ids := map[string]string{}
	for name, text := range docs {
		// Untitled: a chunk starts with its document's title, and these
		// names are the test's, not words of the documents.
		res, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{}, text)
		require.NoError(t, err)
		ids[res.Document.ID] = name
	}
	search := func(mode knowledge.Mode, k int) []string {
		hits, _, err := e.ks.Search(ctx, e.emb, "acme", "kb", knowledge.Query{Text: "when are shipped parcels arriving", Mode: mode, TopK: k})
		require.NoError(t, err)
		var names []string
		for _, h := range hits {
			names = append(names, ids[h.Chunk.DocumentID])
		}
		return names
	}
	text, vec, hybrid := search(knowledge.ModeText, 2), search(knowledge.ModeVector, 2), search(knowledge.ModeHybrid, 2)
	t.Logf("text %v, vector %v, hybrid %v", text, vec, hybrid)
	require.Equal(t, []string{"misspelt", "noise"}, text)
	require.Equal(t, []string{"stemmed", "noise"}, vec)
	require.ElementsMatch(t, []string{"stemmed", "misspelt"}, hybrid, "hybrid finds both")
	recall := func(got []string) int {
		n := 0
		for _, g := range got {
			if g == "stemmed" || g == "misspelt" {
				n++
			}
		}
		return n
	}
	require.GreaterOrEqual(t, recall(hybrid), recall(text))
	require.GreaterOrEqual(t, recall(hybrid), recall(vec))
	require.Less(t, min(recall(text), recall(vec)), 2, "one ranker alone misses")
}

func TestSearchFilter(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	e.collection(t, "acme", "kb")
	for _, lang := range []string{"en", "fr"} {
		_, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{Title: lang, Metadata: map[string]string{"lang": lang}}, "Returns policy in "+lang)
		require.NoError(t, err)
	}
	for _, mode := range []knowledge.Mode{knowledge.ModeHybrid, knowledge.ModeText, knowledge.ModeVector} {
		hits, _, err := e.ks.Search(ctx, e.emb, "acme", "kb", knowledge.Query{Text: "returns policy", Mode: mode, Filter: map[string]string{"lang": "fr"}})
		require.NoError(t, err)
		require.Len(t, hits, 1, mode)
		require.Equal(t, "fr", hits[0].DocumentTitle, mode)
	}
}

func TestTenantIsolation(t *testing.T) {
	e := newEnv(t, knowledge.Options{})
	ctx := context.Background()
	e.collection(t, "acme", "kb")
	res, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{Title: "secret"}, "Acme's launch code is 1234.")
	require.NoError(t, err)

	notFound := func(err error) {
		t.Helper()
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
		require.NotContains(t, err.Error(), "acme")
	}
	_, err = e.ks.Collection(ctx, "globex", "kb")
	notFound(err)
	_, _, err = e.ks.Search(ctx, e.emb, "globex", "kb", knowledge.Query{Text: "launch code"})
	notFound(err)
	_, err = e.ks.Document(ctx, "globex", "kb", res.Document.ID)
	notFound(err)
	_, err = e.ks.Documents(ctx, "globex", "kb", "", 0)
	notFound(err)
	_, err = e.ks.Put(ctx, e.emb, "globex", "kb", agent.Document{}, "x")
	notFound(err)
	notFound(e.ks.DeleteDocument(ctx, "globex", "kb", res.Document.ID))
	notFound(e.ks.DeleteCollection(ctx, "globex", "kb"))
	cols, err := e.ks.Collections(ctx, "globex")
	require.NoError(t, err)
	require.Empty(t, cols)

	// The same name in another tenant is another collection.
	e.collection(t, "globex", "kb")
	hits, _, err := e.ks.Search(ctx, e.emb, "globex", "kb", knowledge.Query{Text: "launch code"})
	require.NoError(t, err)
	require.Empty(t, hits)
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, knowledge.Options{MaxDocumentBytes: 1 << 10})
	ctx := context.Background()
	e.collection(t, "acme", "kb")
	for _, tc := range []struct {
		name       string
		collection string
		doc        agent.Document
		text       string
		code       agent.Code
		want       string
	}{
		{"unknown collection", "nope", agent.Document{}, "text", agent.CodeNotFound, `collection "nope" not found`},
		{"bad collection name", "No Such", agent.Document{}, "text", agent.CodeInvalid, "collection name"},
		{"empty text", "kb", agent.Document{}, " \n ", agent.CodeInvalid, "document text is empty"},
		{"over the limit", "kb", agent.Document{}, strings.Repeat("x", 1<<10+1), agent.CodeInvalid, "document is 1025 bytes; the limit is 1024"},
		{"not utf-8", "kb", agent.Document{}, "bad \xff", agent.CodeInvalid, "not valid UTF-8"},
		{"nul byte", "kb", agent.Document{}, "bad \x00", agent.CodeInvalid, "not valid UTF-8"},
		{"bad metadata", "kb", agent.Document{Metadata: map[string]string{"a b": "x"}}, "text", agent.CodeInvalid, `metadata key "a b"`},
	} {
		_, err := e.ks.Put(ctx, e.emb, "acme", tc.collection, tc.doc, tc.text)
		require.True(t, agent.IsCode(err, tc.code), "%s: %v", tc.name, err)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}

	// An embedding provider that is down: a retryable error, nothing stored.
	e.srv.FailEmbeddings(503, 1, 0)
	_, err := e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{}, "fine text")
	var le *llm.Error
	require.ErrorAs(t, err, &le)
	require.True(t, le.Retryable)

	// Vectors that do not match the collection's: refused whole.
	_, err = e.ks.Put(ctx, e.emb, "acme", "kb", agent.Document{}, "first text")
	require.NoError(t, err)
	doc, chunks, err := e.ks.Prepare(agent.Document{}, "second text")
	require.NoError(t, err)
	_, _, err = e.ks.Write(ctx, "acme", "kb", doc, chunks, [][]float32{{1, 0, 0}})
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.Contains(t, err.Error(), "collection \"kb\" has 256 dims")
	require.Equal(t, 1, e.count(t, "knowledge_documents"))
	require.Equal(t, 1, e.count(t, "knowledge_chunks"))

	for _, q := range []knowledge.Query{{}, {Text: "x", TopK: 101}, {Text: "x", Mode: "fuzzy"}, {Text: "x", Filter: map[string]string{"": "y"}}} {
		_, _, err := e.ks.Search(ctx, e.emb, "acme", "kb", q)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%+v: %v", q, err)
	}
}
