package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentflow/agentflow/internal/contract"
)

// ingestDocuments is how many documents the ingest trial stores: 2,000
// in full, 200 in the short run.
func (e *env) ingestDocuments() int {
	if e.short {
		return 200
	}
	return 2000
}

// ingestEmbedDelay slows each embedding request of the ingest trial, so
// that the kill lands while pages are being embedded and written.
const ingestEmbedDelay = 300 * time.Millisecond

// ingestKill ingests a batch of documents over the HTTP API, SIGKILLs
// the worker running one of its pages (after a third of the documents
// in the full run), and checks that the ingest completes with every
// document stored once: the counts say so, and so do the tables.
func ingestKill(ctx context.Context, e *env, job string) error {
	e.embedDelay.Store(int64(ingestEmbedDelay))
	defer e.embedDelay.Store(0)
	n := e.ingestDocuments()
	api := "http://" + e.top.Gateways[0].HTTPAPIAddr
	id, err := startIngest(ctx, api, job, n)
	if err != nil {
		return err
	}
	for !e.short {
		st, err := ingestStatus(ctx, api, id)
		if err != nil {
			return err
		}
		if st.Done >= n/3 {
			break
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	p, err := e.activityWorker(ctx, contract.IngestWorkflowID(tenant, id))
	if err != nil {
		return err
	}
	before, err := ingestStatus(ctx, api, id)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	e.note(fmt.Sprintf("killed %s with %d of %d documents done", p.Name, before.Done, n))
	time.Sleep(500 * time.Millisecond)
	if err := p.Start(ctx); err != nil {
		return err
	}
	var st contract.IngestStatus
	for {
		if st, err = ingestStatus(ctx, api, id); err != nil {
			return err
		}
		if st.State != contract.IngestRunning {
			break
		}
		if err := pause(ctx, time.Second); err != nil {
			return fmt.Errorf("ingest not done (%d of %d): %w", st.Done, n, err)
		}
	}
	if st.State != contract.IngestCompleted || st.Done != n || st.Stored+st.Existing != n || st.Failed != 0 {
		return fmt.Errorf("ingest ended %s with %+v", st.State, st.IngestCounts)
	}
	return e.checkIngestStored(ctx, job, n, st)
}

// startIngest creates the collection job and starts the ingest of n
// documents into it, each its own text; it returns the ingest's id.
func startIngest(ctx context.Context, api, job string, n int) (string, error) {
	if _, err := ingestCall(ctx, "POST", api+"/v1/collections", map[string]any{"name": job, "embedding_model": "openai:text-embedding-3-small"},
		http.StatusCreated, nil); err != nil {
		return "", err
	}
	docs := make([]map[string]any, n)
	for i := range docs {
		docs[i] = map[string]any{"title": fmt.Sprintf("note %d", i), "content_type": "text/markdown",
			"text": fmt.Sprintf("# Note %d of %s\n\nThe depot numbered %d keeps %d crates of lamp oil.\n\n## Keeper\n\nIts keeper rings the bell %d times at dusk.",
				i, job, i, 7*i+3, i%13+1)}
	}
	var started struct {
		ID string `json:"id"`
	}
	if _, err := ingestCall(ctx, "POST", api+"/v1/collections/"+job+"/documents", map[string]any{"id": job, "documents": docs},
		http.StatusAccepted, &started); err != nil {
		return "", err
	}
	return started.ID, nil
}

// ingestStatus reads the status of the ingest id. A status read is a query
// the workflow's worker answers: while the killed worker still holds the
// workflow's sticky queue, the server gives up on it and the gateway
// answers a retryable 503, which a client reads again, as this one does
// for up to a minute.
func ingestStatus(ctx context.Context, api, id string) (contract.IngestStatus, error) {
	var st contract.IngestStatus
	deadline := time.Now().Add(time.Minute)
	for {
		data, err := ingestCall(ctx, "GET", api+"/v1/ingests/"+id, nil, http.StatusOK, &st)
		if err == nil || !retryable(data) || time.Now().After(deadline) {
			return st, err
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return st, err
		}
	}
}

// checkIngestStored checks the tables after the ingest st of n documents
// into the collection job: every document stored once, with its chunks.
func (e *env) checkIngestStored(ctx context.Context, job string, n int, st contract.IngestStatus) error {
	var docCount, hashes, chunks, chunkSum int
	if err := e.db.QueryRow(ctx, `SELECT count(*), count(DISTINCT d.content_hash), coalesce(sum(d.chunks), 0),
		(SELECT count(*) FROM knowledge_chunks k WHERE k.collection_id = c.id)
		FROM knowledge_collections c JOIN knowledge_documents d ON d.collection_id = c.id
		WHERE c.tenant_id = $1 AND c.name = $2 GROUP BY c.id`, tenant, job).Scan(&docCount, &hashes, &chunkSum, &chunks); err != nil {
		return fmt.Errorf("count stored documents: %w", err)
	}
	if docCount != n || hashes != n || chunks != chunkSum {
		return fmt.Errorf("stored %d documents (%d texts) and %d chunks of %d; want %d documents, each once", docCount, hashes, chunks, chunkSum, n)
	}
	e.note(fmt.Sprintf("%d documents, %d chunks, each once; %d found stored already after the kill", n, chunks, st.Existing))
	return nil
}

// ingestCall calls the HTTP API as the chaos tenant and decodes its
// answer into out, when given; another status than want is an error.
func ingestCall(ctx context.Context, method, url string, body any, want int, out any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient().Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		return data, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, data)
	}
	if out != nil {
		return data, json.Unmarshal(data, out)
	}
	return data, nil
}

// retryable reports whether an error answer of the HTTP API says a later
// try may succeed.
func retryable(data []byte) bool {
	var problem struct {
		Retryable bool `json:"retryable"`
	}
	return json.Unmarshal(data, &problem) == nil && problem.Retryable
}
