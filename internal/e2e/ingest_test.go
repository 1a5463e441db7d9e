package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// corpusDocument and corpusQuestion are the shipped corpus's
// (testdata/corpus, written by its gen program).
type corpusDocument struct {
	Title       string            `json:"title"`
	ContentType string            `json:"content_type"`
	Text        string            `json:"text"`
	Metadata    map[string]string `json:"metadata"`
}

type corpusQuestion struct {
	Question string `json:"question"`
	Answer   string `json:"answer"`
	Document string `json:"document"`
}

func loadCorpus(t testing.TB) ([]corpusDocument, []corpusQuestion) {
	t.Helper()
	var docs []corpusDocument
	var qs []corpusQuestion
	for name, v := range map[string]any{"documents.json": &docs, "questions.json": &qs} {
		data, err := os.ReadFile(filepath.Join("testdata", "corpus", name))
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, v))
	}
	return docs, qs
}

// knowledgeClient calls the knowledge routes of an HTTP API.
type knowledgeClient struct {
	t   testing.TB
	api string
}

func (k knowledgeClient) do(method, path, token string, body any) (int, []byte) {
	k.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		require.NoError(k.t, err)
		r = bytes.NewReader(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, k.api+path, r)
	require.NoError(k.t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if b, ok := body.([]byte); ok && len(b) > 1<<20 {
		// Refused on its length, the body is never sent.
		req.Header.Set("Expect", "100-continue")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(k.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(k.t, err)
	return resp.StatusCode, data
}

// ingest starts an ingest and waits for its end, answering its status.
func (k knowledgeClient) ingest(token, collection string, body any) contract.IngestStatus {
	k.t.Helper()
	code, data := k.do("POST", "/v1/collections/"+collection+"/documents", token, body)
	require.Equal(k.t, http.StatusAccepted, code, "%s", data)
	var started struct {
		ID        string `json:"id"`
		Documents int    `json:"documents"`
		Status    string `json:"status_url"`
	}
	require.NoError(k.t, json.Unmarshal(data, &started))
	return k.wait(token, started.Status)
}

func (k knowledgeClient) wait(token, statusURL string) contract.IngestStatus {
	k.t.Helper()
	var st contract.IngestStatus
	require.Eventually(k.t, func() bool {
		code, data := k.do("GET", statusURL, token, nil)
		if code == http.StatusServiceUnavailable && bytes.Contains(data, []byte(`"retryable":true`)) {
			// The status is a query of the ingest's workflow, which a
			// loaded worker may not answer in time: the answer says to
			// ask again, as a client does.
			return false
		}
		require.Equal(k.t, http.StatusOK, code, "%s", data)
		require.NoError(k.t, json.Unmarshal(data, &st))
		return st.State != contract.IngestRunning
	}, 2*time.Minute, 100*time.Millisecond)
	return st
}

func (k knowledgeClient) documents(token, collection string) []agent.Document {
	k.t.Helper()
	code, data := k.do("GET", "/v1/collections/"+collection+"/documents", token, nil)
	require.Equal(k.t, http.StatusOK, code, "%s", data)
	var out struct {
		Documents []agent.Document `json:"documents"`
	}
	require.NoError(k.t, json.Unmarshal(data, &out))
	return out.Documents
}

func (k knowledgeClient) search(token, collection, query, mode string, topK int) []agent.Hit {
	k.t.Helper()
	code, data := k.do("POST", "/v1/collections/"+collection+"/search", token, map[string]any{"query": query, "mode": mode, "top_k": topK})
	require.Equal(k.t, http.StatusOK, code, "%s", data)
	var out struct {
		Hits []agent.Hit `json:"hits"`
	}
	require.NoError(k.t, json.Unmarshal(data, &out))
	return out.Hits
}

// ingestScript: no turn runs here; the scripted model serves embeddings.
const ingestScript = `
rules:
  - name: answer
    reply: {text: 'ok'}
`

// TestIngestCorpus: the shipped corpus ingested over HTTP is stored whole
// (every document once, its pages' counts exact) and reads back: listed,
// and found by its questions; an ingest of the same documents again
// stores and embeds nothing; the same POST again is the same ingest;
// another tenant finds neither the collection nor the ingest.
func TestIngestCorpus(t *testing.T) {
	admin, other := "secret-"+testserver.RandomID(), "secret-"+testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: ingestScript, HTTPAPI: true,
		Tokens: map[string]string{admin: "acme:admin+user:ann", other: "rival:admin+user:oto"}})
	k := knowledgeClient{t: t, api: "http://" + srv.HTTPAPIAddr()}
	docs, questions := loadCorpus(t)

	code, data := k.do("POST", "/v1/collections", admin, map[string]any{"name": "corpus", "embedding_model": "openai:text-embedding-3-small"})
	require.Equal(t, http.StatusCreated, code, "%s", data)

	body := map[string]any{"documents": docs}
	st := k.ingest(admin, "corpus", body)
	require.Equal(t, contract.IngestCompleted, st.State, "%+v", st)
	require.Equal(t, len(docs), st.Documents)
	require.Equal(t, len(docs), st.Done)
	require.Equal(t, len(docs), st.Stored)
	require.Zero(t, st.Existing+st.Failed)
	require.Equal(t, st.Chunks, st.Embeddings)
	stored := k.documents(admin, "corpus")
	require.Len(t, stored, len(docs))
	// The recorded history of an ingest (workflows/testdata) replays.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := &env{Server: srv, t: t}
	e.replayEvents(testserver.History(ctx, t, srv.Client(), contract.IngestWorkflowID("acme", st.ID), ""), "ingest_corpus")
	titles := map[string]bool{}
	for _, d := range stored {
		titles[d.Title] = true
	}
	require.Len(t, titles, len(docs), "every document once")

	// Every question's document is among the hybrid search's top 5 for
	// most questions (the scripted embeddings hash words: names match).
	found := 0
	for _, q := range questions[:60] {
		for _, h := range k.search(admin, "corpus", q.Question, "hybrid", 5) {
			if h.DocumentTitle == q.Document {
				found++
				break
			}
		}
	}
	require.GreaterOrEqual(t, found, 57, "of 60 questions")

	// Embeddings are model calls on the tenant's ledger: the ingest's and
	// each search's query, apart from chat calls (group_by kind).
	code, data = k.do("GET", "/v1/usage?since_duration=1h&group_by=kind", admin, nil)
	require.Equal(t, http.StatusOK, code, "%s", data)
	var usage pb.GetUsageResponse
	require.NoError(t, protojson.Unmarshal(data, &usage))
	calls := map[string]int64{}
	for _, r := range usage.GetRows() {
		calls[r.GetKey()] = r.GetCalls()
		require.Positive(t, r.GetInputTokens(), "%s calls count their tokens", r.GetKey())
	}
	require.Equal(t, []string{"embedding"}, slices.Collect(maps.Keys(calls)), "this tenant made no chat call")
	require.GreaterOrEqual(t, calls["embedding"], int64(60+1), "one per search, and the ingest's")

	embedded := srv.Model.Embedded()
	again := k.ingest(admin, "corpus", map[string]any{"id": "again-" + testserver.RandomID(), "documents": docs})
	require.Equal(t, contract.IngestCompleted, again.State)
	require.Equal(t, len(docs), again.Existing)
	require.Zero(t, again.Stored+again.Embeddings+again.Chunks)
	require.Equal(t, embedded, srv.Model.Embedded(), "a re-ingest embeds nothing")
	require.Len(t, k.documents(admin, "corpus"), len(docs))

	code, data = k.do("POST", "/v1/collections/corpus/documents", admin, body)
	require.Equal(t, http.StatusAccepted, code, "%s", data)
	require.Contains(t, string(data), `"id":"`+st.ID+`"`, "the same POST is the same ingest")

	for _, path := range []string{"/v1/collections/corpus", "/v1/collections/corpus/documents", "/v1/ingests/" + st.ID,
		"/v1/collections/corpus/documents/" + stored[0].ID} {
		code, data = k.do("GET", path, other, nil)
		require.Equal(t, http.StatusNotFound, code, "%s: %s", path, data)
	}
	code, _ = k.do("POST", "/v1/collections/corpus/search", other, map[string]any{"query": "goat"})
	require.Equal(t, http.StatusNotFound, code)
	code, _ = k.do("DELETE", "/v1/collections/corpus/documents/"+stored[0].ID, other, nil)
	require.Equal(t, http.StatusNotFound, code)
	code, _ = k.do("DELETE", "/v1/collections/corpus", other, nil)
	require.Equal(t, http.StatusNotFound, code)
	require.Len(t, k.documents(admin, "corpus"), len(docs))
}

// TestIngestBadInput: an unknown collection, a 50 MiB document, a
// document that does not parse, a ref to nothing and an embedding
// endpoint that is down each end with an error that says what is wrong,
// and none stores part of anything: the collection holds what it held.
func TestIngestBadInput(t *testing.T) {
	admin := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: ingestScript, HTTPAPI: true,
		Tokens: map[string]string{admin: "acme:admin+user:ann"}})
	k := knowledgeClient{t: t, api: "http://" + srv.HTTPAPIAddr()}
	code, data := k.do("POST", "/v1/collections", admin, map[string]any{"name": "notes", "embedding_model": "openai:text-embedding-3-small"})
	require.Equal(t, http.StatusCreated, code, "%s", data)
	st := k.ingest(admin, "notes", map[string]any{"documents": []map[string]any{{"title": "first", "text": "The first note."}}})
	require.Equal(t, 1, st.Stored)
	problem := func(code int, data []byte, status int, detail string) {
		t.Helper()
		require.Equal(t, status, code, "%s", data)
		var p struct {
			Detail string `json:"detail"`
		}
		require.NoError(t, json.Unmarshal(data, &p), "%s", data)
		require.Contains(t, p.Detail, detail)
	}

	code, data = k.do("POST", "/v1/collections/nowhere/documents", admin, map[string]any{"documents": []map[string]any{{"text": "x"}}})
	problem(code, data, http.StatusNotFound, "nowhere")

	huge := fmt.Sprintf(`{"documents":[{"title":"huge","text":"%s"}]}`, strings.Repeat("a", 50<<20))
	code, data = k.do("POST", "/v1/collections/notes/documents", admin, []byte(huge))
	problem(code, data, http.StatusRequestEntityTooLarge, "nothing was stored")

	code, data = k.do("POST", "/v1/collections/notes/documents", admin, map[string]any{"documents": []map[string]any{
		{"title": "fine", "text": "A fine note."}, {"title": "scan", "content_type": "application/pdf", "text": "%PDF-1.7"}}})
	problem(code, data, http.StatusBadRequest, "documents[1]: content type application/pdf")
	code, data = k.do("POST", "/v1/collections/notes/documents", admin, map[string]any{"documents": []map[string]any{{"title": "blank", "text": "  \n"}}})
	problem(code, data, http.StatusBadRequest, "documents[0]: the document has no text")
	code, data = k.do("POST", "/v1/collections/notes/documents", admin, map[string]any{"documents": []map[string]any{{"text": "x", "colour": "red"}}})
	problem(code, data, http.StatusBadRequest, "unknown field")
	require.Len(t, k.documents(admin, "notes"), 1, "nothing of a refused ingest is stored")

	// A ref that names nothing is found out by the workflow: that
	// document fails, saying why, and the others are stored.
	st = k.ingest(admin, "notes", map[string]any{"documents": []map[string]any{
		{"title": "gone", "ref": "cas://sha256:" + strings.Repeat("0", 64)}, {"title": "second", "text": "The second note."}}})
	require.Equal(t, contract.IngestCompleted, st.State)
	require.Equal(t, 1, st.Stored)
	require.Equal(t, 1, st.Failed)
	require.Len(t, st.Errors, 1)
	require.Equal(t, 0, st.Errors[0].Document)
	require.Contains(t, st.Errors[0].Message, "not found")
	require.Len(t, k.documents(admin, "notes"), 2)

	// The embedding endpoint down for a moment: the page is retried and
	// stored once. Down for good: the ingest fails saying so, and
	// stores nothing.
	srv.Model.FailEmbeddings(http.StatusServiceUnavailable, 2, 0)
	st = k.ingest(admin, "notes", map[string]any{"documents": []map[string]any{{"title": "third", "text": "The third note."}}})
	require.Equal(t, contract.IngestCompleted, st.State, "%+v", st)
	require.Equal(t, 1, st.Stored)
	require.Len(t, k.documents(admin, "notes"), 3)
	srv.Model.FailEmbeddings(http.StatusServiceUnavailable, 1000, 0)
	st = k.ingest(admin, "notes", map[string]any{"documents": []map[string]any{{"title": "fourth", "text": "The fourth note."}}})
	srv.Model.FailEmbeddings(0, 0, 0)
	require.Equal(t, contract.IngestFailed, st.State, "%+v", st)
	require.Contains(t, st.Error, "embed")
	require.Len(t, k.documents(admin, "notes"), 3)
}
