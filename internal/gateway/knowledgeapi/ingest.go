package knowledgeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/words"
)

// filesPath is where a larger document goes first (the core's
// FilesPath), to be named by ref.
const filesPath = "/v1/files"

// Limits of an ingest request.
const (
	// MaxIngestDocuments bounds the documents of one ingest.
	MaxIngestDocuments = 10000
)

// ingestRequest is an ingest's documents (the body of POST …/documents).
type ingestRequest struct {
	ID        string                    `json:"id"`
	Documents []contract.IngestDocument `json:"documents"`
}

// ingestAnswer is the answer to an ingest's start.
type ingestAnswer struct {
	ID         string `json:"id"`
	Collection string `json:"collection"`
	Documents  int    `json:"documents"`
	WorkflowID string `json:"workflow_id"`
	// Status is where its progress is read.
	Status string `json:"status_url"`
}

// ingest checks an ingest into c, the caller's collection, stores its
// pages and starts its workflow.
func (k *core) ingest(ctx context.Context, c agent.Collection, in ingestRequest) (ingestAnswer, error) {
	if err := checkIngest(in, k.prepare); err != nil {
		return ingestAnswer{}, err
	}
	if in.ID == "" {
		id, err := derivedIngestID(c, in.Documents)
		if err != nil {
			return ingestAnswer{}, err
		}
		in.ID = id
	}
	pages, err := k.writePages(ctx, c.Tenant, in.Documents)
	if err != nil {
		return ingestAnswer{}, err
	}
	input := contract.IngestInput{TenantID: c.Tenant, Collection: c.Name, BatchID: in.ID, Pages: pages, Documents: len(in.Documents)}
	if err := k.startIngest(ctx, input); err != nil {
		return ingestAnswer{}, err
	}
	return ingestAnswer{ID: in.ID, Collection: c.Name, Documents: len(in.Documents), WorkflowID: contract.IngestWorkflowID(c.Tenant, in.ID),
		Status: "/v1/ingests/" + in.ID}, nil
}

// derivedIngestID is the id of an ingest of docs into c that names none:
// the hash of the collection and of the documents' JSON (one encoding
// whatever the door), so that the same documents sent again are the same
// ingest. The collection's creation time is part of it: a collection
// deleted and made again is another, whose ingest of the same documents
// is another too.
func derivedIngestID(c agent.Collection, docs []contract.IngestDocument) (string, error) {
	data, err := json.Marshal(docs)
	if err != nil {
		return "", fmt.Errorf("encode ingest documents: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n", c.Name, c.Created.UnixNano())
	h.Write(data)
	return "ing_" + hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// ingestBodyTooLarge is the error of an ingest's body over limit,
// answered 413.
func ingestBodyTooLarge(limit int64) error {
	return agent.Errorf(agent.CodeInvalid,
		"the ingest's body is over %d bytes (AGENTFLOW_MAX_UPLOAD_BYTES) and a document over %d bytes of text is refused: nothing was stored",
		limit, knowledge.DefaultMaxDocumentBytes)
}

// prepare checks that the store takes a document's text.
func (k *core) prepare(d agent.Document, text string) error {
	_, _, err := k.ks.Prepare(d, text)
	return err
}

// checkIngest checks every document of an ingest before anything is
// stored, naming the first that is wrong; prepare is the store's check
// of a text.
func checkIngest(in ingestRequest, prepare func(agent.Document, string) error) error {
	if in.ID != "" {
		if err := agent.ValidateID("id", in.ID); err != nil {
			return err
		}
	}
	if len(in.Documents) == 0 {
		return agent.Errorf(agent.CodeInvalid, "documents is empty: give at least one {\"text\"} or {\"ref\"}")
	}
	if len(in.Documents) > MaxIngestDocuments {
		return agent.Errorf(agent.CodeInvalid, "%d documents: an ingest takes at most %d", len(in.Documents), MaxIngestDocuments)
	}
	for i, d := range in.Documents {
		if err := checkIngestDocument(d, prepare); err != nil {
			return agent.Errorf(agent.CodeInvalid, "documents[%d]: %s", i, words.Clip(err.Error(), 300))
		}
	}
	return nil
}

func checkIngestDocument(d contract.IngestDocument, prepare func(agent.Document, string) error) error {
	if err := (agent.Document{Title: d.Title, Source: d.Source, Metadata: d.Metadata}).Validate(); err != nil {
		return err
	}
	switch {
	case d.Text != "" && d.Ref != "":
		return errors.New("give text or ref, not both")
	case d.Ref != "":
		if !strings.HasPrefix(d.Ref, "cas://") && !strings.HasPrefix(d.Ref, "artifact://") {
			return fmt.Errorf("ref %s: want cas://… (a file from %s, a tool's data) or artifact://… (a turn's result)", intake.Clip(d.Ref), filesPath)
		}
		if len(d.Ref) > 200 {
			return errors.New("ref is too long")
		}
		return nil
	case d.Text == "":
		return errors.New("text or ref is required")
	}
	if mt, _, _ := mime.ParseMediaType(d.ContentType); mt == knowledge.TypePDF {
		// A JSON string holds text, not a PDF's bytes.
		return fmt.Errorf("content type %s is read from a file: upload the PDF to %s and give its cas:// ref", mt, filesPath)
	}
	if len(d.Text) > knowledge.DefaultMaxDocumentBytes {
		return fmt.Errorf("the text is %d bytes; a document may have %d", len(d.Text), knowledge.DefaultMaxDocumentBytes)
	}
	text, err := knowledge.Extract(d.ContentType, []byte(d.Text))
	if err != nil {
		return err
	}
	return prepare(agent.Document{Title: d.Title, Source: d.Source, Metadata: d.Metadata}, text)
}

// writePages stores the documents as pages of the tenant's blobs and
// answers their refs. Blobs are content-addressed: a retried request
// stores nothing twice.
func (k *core) writePages(ctx context.Context, tenant string, docs []contract.IngestDocument) ([]string, error) {
	var refs []string
	for first := 0; first < len(docs); {
		end, size := first, 0
		for end < len(docs) && end-first < contract.IngestPageDocuments &&
			(end == first || size+len(docs[end].Text) <= contract.IngestPageBytes) {
			size += len(docs[end].Text)
			end++
		}
		data, err := json.Marshal(contract.IngestPageManifest{First: first, Documents: docs[first:end]})
		if err != nil {
			return nil, fmt.Errorf("encode ingest page: %w", err)
		}
		ref, err := k.blobs.PutTenantBlob(ctx, tenant, data, "application/json")
		if err != nil {
			return nil, fmt.Errorf("store ingest page: %w", err)
		}
		refs = append(refs, ref)
		first = end
	}
	return refs, nil
}

// startIngest starts the Ingest workflow, or finds the one of the same id
// that runs or has run: an ingest's id is taken for good, and one that
// names another collection is a Conflict.
func (k *core) startIngest(ctx context.Context, in contract.IngestInput) error {
	opts := client.StartWorkflowOptions{
		ID:                       contract.IngestWorkflowID(in.TenantID, in.BatchID),
		TaskQueue:                k.taskQueue,
		StaticSummary:            fmt.Sprintf("ingest %s: %d documents into %s", in.BatchID, in.Documents, in.Collection),
		TypedSearchAttributes:    temporal.NewSearchAttributes(contract.SearchTenant.ValueSet(in.TenantID)),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	_, err := k.wf.ExecuteWorkflow(ctx, opts, contract.Ingest, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err == nil {
		return nil
	}
	if !errors.As(err, &started) {
		return fmt.Errorf("start ingest %s: %w", opts.ID, err)
	}
	st, err := k.ingestStatus(ctx, in.BatchID)
	if err != nil {
		return err
	}
	if st.Collection != in.Collection {
		return agent.Errorf(agent.CodeConflict, "ingest id %q names an ingest into another collection; use a new id", in.BatchID)
	}
	return nil
}

// ingestStatus queries the caller's tenant's ingest of id.
func (k *core) ingestStatus(ctx context.Context, id string) (contract.IngestStatus, error) {
	if err := agent.ValidateID("id", id); err != nil || id == "" {
		return contract.IngestStatus{}, agent.Errorf(agent.CodeInvalid, "ingest id %s: want the id the ingest's start answered", intake.Clip(id))
	}
	wid := contract.IngestWorkflowID(k.c.TenantOf(ctx), id)
	v, err := k.wf.QueryWorkflow(ctx, wid, "", contract.QueryIngestStatus)
	// A workflow whose first task has not run yet cannot answer: a
	// moment later it can.
	var notReady *serviceerror.WorkflowNotReady
	for wait := 50 * time.Millisecond; errors.As(err, &notReady) && wait < 2*time.Second; wait *= 2 {
		select {
		case <-ctx.Done():
			return contract.IngestStatus{}, ctx.Err()
		case <-time.After(wait):
		}
		v, err = k.wf.QueryWorkflow(ctx, wid, "", contract.QueryIngestStatus)
	}
	if _, ok := errors.AsType[*serviceerror.NotFound](err); ok {
		return contract.IngestStatus{}, agent.Errorf(agent.CodeNotFound, "ingest %q not found", id)
	}
	if err != nil {
		if ctx.Err() == nil {
			// The worker did not answer in time (the server gives up on
			// a query after a while): the ingest goes on, and a later
			// read finds it.
			return contract.IngestStatus{}, agent.WithCode(agent.CodeUnavailable, fmt.Errorf("query ingest %s: %w", wid, err))
		}
		return contract.IngestStatus{}, fmt.Errorf("query ingest %s: %w", wid, err)
	}
	var st contract.IngestStatus
	if err := v.Get(&st); err != nil {
		return contract.IngestStatus{}, fmt.Errorf("decode ingest %s: %w", wid, err)
	}
	return st, nil
}
