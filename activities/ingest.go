package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/metered"
)

// ingestDoc is a document of a page on its way to the store.
type ingestDoc struct {
	ord    int
	doc    agent.Document
	chunks []agent.Chunk
}

// IngestPage stores one page of a batch into its collection: each
// document read (inline, or by ref), parsed (knowledge.Extract), split;
// those the collection does not hold yet embedded together (in the
// collection's model's batches) and written one transaction each. It
// heartbeats after each document written, with the page's progress, so
// that a retry after a worker's death goes on from there; a document
// written before the heartbeat is found by its content hash and not
// stored again. Its embeddings pass the tenant's budgets, the provider
// governor and the usage ledger (metered): a spent budget fails the page
// with BudgetExceeded before any of its documents is written. A document that cannot be read or parsed is counted
// failed, with why, and nothing of it is stored; a collection that is
// gone, or an embedding endpoint that fails, fails the page (the
// latter retried by the workflow's policy).
func (a *Activities) IngestPage(ctx context.Context, in contract.IngestPageInput) (contract.IngestPageResult, error) {
	if a.knowledge == nil || a.embedder == nil {
		return contract.IngestPageResult{}, agent.Errorf(agent.CodeInvalid, "ingest: this worker has no knowledge store or embedder")
	}
	var res contract.IngestPageResult
	done := 0 // documents of the page written or judged, in order
	if activity.HasHeartbeatDetails(ctx) {
		var hb ingestHeartbeat
		if err := activity.GetHeartbeatDetails(ctx, &hb); err == nil {
			res, done = hb.Result, hb.Done
		}
	}
	coll, err := a.knowledge.Collection(ctx, in.TenantID, in.Collection)
	if err != nil {
		return res, err
	}
	raw, _, err := a.store.TenantBlob(ctx, in.TenantID, in.Ref)
	if err != nil {
		return res, fmt.Errorf("ingest page %d: read manifest: %w", in.Page, err)
	}
	var page contract.IngestPageManifest
	if err := json.Unmarshal(raw, &page); err != nil {
		return res, agent.Errorf(agent.CodeInvalid, "ingest page %d: the manifest %s does not decode: %v", in.Page, in.Ref, err)
	}
	stop := keepAlive(ctx, ingestKeepAlive, ingestHeartbeat{Done: done, Result: res})
	todo, err := a.prepareIngest(ctx, in, coll, page, done, &res)
	stop()
	if err != nil {
		return res, err
	}
	var texts []string
	for _, d := range todo {
		for _, c := range d.chunks {
			texts = append(texts, c.Text)
		}
	}
	// The page's embeddings are charged to the tenant under a key of the
	// page and the document it starts from: an attempt that embeds the same
	// documents again is counted once; one that goes on from a later
	// document makes other calls, counted as such.
	key := fmt.Sprintf("ingest:%s:%d:%d", in.BatchID, in.Page, done)
	ectx := withScope(ctx, metered.Scope{TenantID: in.TenantID, Key: key}, func() {
		activity.RecordHeartbeat(ctx, ingestHeartbeat{Done: done, Result: res})
	})
	vecs, usage, err := knowledge.EmbedAll(ectx, a.embedder, coll, texts)
	if err != nil {
		return res, fmt.Errorf("ingest page %d: embed %d chunks: %w", in.Page, len(texts), err)
	}
	res.Embeddings += len(texts)
	res.Tokens += usage.TotalTokens
	at := 0
	for _, d := range todo {
		v := vecs[at : at+len(d.chunks)]
		at += len(d.chunks)
		stored, created, err := a.knowledge.Write(ctx, in.TenantID, in.Collection, d.doc, d.chunks, v)
		if err != nil {
			return res, fmt.Errorf("ingest page %d: write document %d: %w", in.Page, d.ord, err)
		}
		if created {
			res.Stored++
			res.Chunks += len(d.chunks)
		} else {
			res.Existing++
		}
		res.DocumentIDs = append(res.DocumentIDs, stored.ID)
		done = d.ord - page.First + 1
		activity.RecordHeartbeat(ctx, ingestHeartbeat{Done: done, Result: res})
	}
	return res, nil
}

// ingestHeartbeat is a page's progress: its first Done documents are
// counted in Result.
type ingestHeartbeat struct {
	Done   int                       `json:"done"`
	Result contract.IngestPageResult `json:"result"`
}

// ingestKeepAlive is how often a page heartbeats while its documents are
// read: a third of the workflow's heartbeat timeout.
const ingestKeepAlive = 10 * time.Second

// prepareIngest reads and splits the page's documents from the skip-th,
// counting the ones that fail and those the collection holds already;
// it returns the ones left to embed and write.
func (a *Activities) prepareIngest(ctx context.Context, in contract.IngestPageInput, coll agent.Collection,
	page contract.IngestPageManifest, skip int, res *contract.IngestPageResult) ([]ingestDoc, error) {
	var todo []ingestDoc
	for i := skip; i < len(page.Documents); i++ {
		src := page.Documents[i]
		ord := page.First + i
		doc, chunks, err := a.readIngestDoc(ctx, in.TenantID, src)
		if err != nil {
			if !agent.IsCode(err, agent.CodeInvalid) && !agent.IsCode(err, agent.CodeNotFound) {
				return nil, fmt.Errorf("ingest page %d: document %d: %w", in.Page, ord, err)
			}
			res.Failed++
			if len(res.Errors) < contract.IngestMaxErrors {
				res.Errors = append(res.Errors, contract.IngestError{Document: ord, Title: src.Title, Message: err.Error()})
			}
			a.log(ctx).Info("ingest document refused", zap.String("batch", in.BatchID), zap.Int("document", ord), zap.Error(err))
			continue
		}
		if stored, err := a.knowledge.Document(ctx, in.TenantID, coll.Name, doc.ID); err == nil {
			res.Existing++
			res.DocumentIDs = append(res.DocumentIDs, stored.ID)
			continue
		} else if !agent.IsCode(err, agent.CodeNotFound) {
			return nil, fmt.Errorf("ingest page %d: look up document %d: %w", in.Page, ord, err)
		}
		todo = append(todo, ingestDoc{ord: ord, doc: doc, chunks: chunks})
	}
	return todo, nil
}

// readIngestDoc reads a document's text, inline or by ref, and prepares
// it (knowledge.Store.Prepare).
func (a *Activities) readIngestDoc(ctx context.Context, tenant string, src contract.IngestDocument) (agent.Document, []agent.Chunk, error) {
	data, contentType := []byte(src.Text), src.ContentType
	if src.Ref != "" {
		var err error
		if data, err = a.store.Data(ctx, tenant, src.Ref); err != nil {
			return agent.Document{}, nil, err
		}
		if contentType == "" && strings.HasPrefix(src.Ref, "cas://") {
			if info, err := a.store.TenantBlobInfo(ctx, tenant, src.Ref); err == nil {
				contentType = info.ContentType
			}
		}
		if contentType == "" && strings.HasPrefix(src.Ref, "artifact://") {
			// A result's data is JSON: its text as a string, or data.
			var s string
			if json.Unmarshal(data, &s) == nil {
				data = []byte(s)
			}
		}
	}
	text, err := knowledge.Extract(contentType, data)
	if err != nil {
		return agent.Document{}, nil, err
	}
	doc := agent.Document{Title: src.Title, Source: cmp.Or(src.Source, src.Ref), Metadata: src.Metadata}
	return a.knowledge.Prepare(doc, text)
}
