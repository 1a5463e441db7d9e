package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
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
	"github.com/agentflow/agentflow/internal/metered"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Knowledge: a tenant's collections and their documents, over HTTP/JSON
// and over gRPC (KnowledgeService, knowledge_grpc.go); internal/knowledge
// stores and searches them, the Ingest workflow stores documents. Both
// doors are thin adapters over knowledgeCore, which holds the rules:
// validation, an ingest's pages and derived id, the search.
//
//	POST   /v1/collections                          create (admin)
//	GET    /v1/collections                          list
//	GET    /v1/collections/{name}                   one
//	DELETE /v1/collections/{name}                   delete, with its documents (admin)
//	POST   /v1/collections/{name}/documents         start an ingest: 202 and its id
//	GET    /v1/collections/{name}/documents         list (?after=<id>&limit=N)
//	GET    /v1/collections/{name}/documents/{id}    one
//	DELETE /v1/collections/{name}/documents/{id}    delete, with its chunks
//	POST   /v1/collections/{name}/search            search (hybrid, text or vector)
//	GET    /v1/ingests/{id}                         an ingest's status and counts
//
// Everything is the caller's tenant's: another tenant's collection or
// ingest is NotFound, as one that does not exist. Each route is
// authorized as its KnowledgeService method (methodRoles): creating and
// deleting collections needs the admin role, the rest the user role.
//
// An ingest's documents are checked whole before anything is stored:
// each inline text parsed (knowledge.Extract; a PDF only by ref) and bounded
// (MaxDocumentBytes), each ref well-formed; a body over the upload limit
// (HTTPOptions.MaxUploadBytes, as a file's) is refused before it is read (larger documents go to /v1/files first,
// and are named by ref). The documents are then written as pages
// (contract.IngestPageManifest) to the tenant's blobs, and the Ingest
// workflow is started with their refs. An ingest's id is the request's
// "id", else derived from the collection (its name and creation) and the
// documents, so that a request retried, on either door, is the same
// ingest.
const (
	collectionsPath = "/v1/collections"
	collectionPath  = "/v1/collections/{name}"
	documentsPath   = "/v1/collections/{name}/documents"
	documentPath    = "/v1/collections/{name}/documents/{id}"
	searchPath      = "/v1/collections/{name}/search"
	ingestPath      = "/v1/ingests/{id}"
)

// Limits of an ingest request.
const (
	// MaxIngestDocuments bounds the documents of one ingest.
	MaxIngestDocuments = 10000
)

// KnowledgeOptions give the gateway its knowledge routes and
// KnowledgeService; without a Store it has none.
type KnowledgeOptions struct {
	Store *knowledge.Store
	// Embedder embeds search queries (a metered.Embedder over the
	// llm.Router: each query charged to its tenant, governed and counted);
	// nil: vector and hybrid search are refused, text search works.
	Embedder knowledge.Embedder
}

// knowledgeCore is the knowledge API of a Service, whatever the door: the
// caller's tenant is the context's (TenantOf), and every error is a
// domain error the door renders.
type knowledgeCore struct {
	s   *Service
	ks  *knowledge.Store
	emb knowledge.Embedder
}

// errNoKnowledge answers the knowledge API of a gateway without a store.
var errNoKnowledge = agent.Errorf(agent.CodeUnavailable, "knowledge collections are not configured on this gateway")

// collection is the caller's tenant's collection name.
func (k *knowledgeCore) collection(ctx context.Context, name string) (agent.Collection, error) {
	if err := agent.ValidateCollectionName(name); err != nil {
		return agent.Collection{}, err
	}
	return k.ks.Collection(ctx, TenantOf(ctx), name)
}

// collectionRequest is what a collection is created from (the body of
// POST /v1/collections).
type collectionRequest struct {
	Name           string `json:"name"`
	Description    string `json:"description"`
	EmbeddingModel string `json:"embedding_model"`
	Dims           int    `json:"dims"`
}

func (k *knowledgeCore) createCollection(ctx context.Context, in collectionRequest) (agent.Collection, error) {
	c := agent.Collection{Tenant: TenantOf(ctx), Name: in.Name, Description: in.Description, EmbeddingModel: in.EmbeddingModel, Dims: in.Dims}
	if err := c.Validate(); err != nil {
		return agent.Collection{}, err
	}
	return k.ks.CreateCollection(ctx, c)
}

func (k *knowledgeCore) collections(ctx context.Context) ([]agent.Collection, error) {
	list, err := k.ks.Collections(ctx, TenantOf(ctx))
	if list == nil {
		list = []agent.Collection{}
	}
	return list, err
}

func (k *knowledgeCore) deleteCollection(ctx context.Context, name string) error {
	if err := agent.ValidateCollectionName(name); err != nil {
		return err
	}
	return k.ks.DeleteCollection(ctx, TenantOf(ctx), name)
}

// documents is a page of a collection's documents after the id after:
// limit of them (0: knowledge.MaxList), and next, the after of the next
// page when there may be one.
func (k *knowledgeCore) documents(ctx context.Context, name, after string, limit int) (docs []agent.Document, next string, err error) {
	switch {
	case limit == 0:
		limit = knowledge.MaxList
	case limit < 0 || limit > knowledge.MaxList:
		return nil, "", agent.Errorf(agent.CodeInvalid, "limit %d: want 1 to %d", limit, knowledge.MaxList)
	}
	c, err := k.collection(ctx, name)
	if err != nil {
		return nil, "", err
	}
	docs, err = k.ks.Documents(ctx, c.Tenant, c.Name, after, limit)
	if err != nil {
		return nil, "", err
	}
	if docs == nil {
		docs = []agent.Document{}
	}
	if len(docs) == limit {
		next = docs[len(docs)-1].ID
	}
	return docs, next, nil
}

func (k *knowledgeCore) document(ctx context.Context, name, id string) (agent.Document, error) {
	c, err := k.collection(ctx, name)
	if err != nil {
		return agent.Document{}, err
	}
	return k.ks.Document(ctx, c.Tenant, c.Name, id)
}

func (k *knowledgeCore) deleteDocument(ctx context.Context, name, id string) error {
	c, err := k.collection(ctx, name)
	if err != nil {
		return err
	}
	return k.ks.DeleteDocument(ctx, c.Tenant, c.Name, id)
}

// searchRequest is a search of a collection (the body of POST …/search).
type searchRequest struct {
	Query  string            `json:"query"`
	Mode   string            `json:"mode"`
	TopK   int               `json:"top_k"`
	Filter map[string]string `json:"filter"`
}

func (k *knowledgeCore) search(ctx context.Context, channel, name string, in searchRequest) ([]agent.Hit, agent.Usage, error) {
	c, err := k.collection(ctx, name)
	if err != nil {
		return nil, agent.Usage{}, err
	}
	mode := knowledge.Mode(in.Mode)
	switch mode {
	case "":
		mode = knowledge.ModeHybrid
	case knowledge.ModeHybrid, knowledge.ModeText, knowledge.ModeVector:
	default:
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid, "mode %s: want hybrid, text or vector", Clip(in.Mode))
	}
	if mode != knowledge.ModeText && k.emb == nil {
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid, "mode %s needs an embedding model, and this gateway has none: search with mode text", mode)
	}
	// The query's embedding is charged to the tenant, under a key of its
	// own: a client's retry is another search, another call.
	ctx = metered.WithScope(ctx, metered.Scope{TenantID: c.Tenant, Key: "search:" + rand.Text(), Channel: channel})
	hits, usage, err := k.ks.Search(ctx, k.emb, c.Tenant, c.Name,
		knowledge.Query{Text: in.Query, Mode: mode, TopK: in.TopK, Filter: in.Filter})
	if hits == nil {
		hits = []agent.Hit{}
	}
	return hits, usage, err
}

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
func (k *knowledgeCore) ingest(ctx context.Context, c agent.Collection, in ingestRequest) (ingestAnswer, error) {
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

// ingestBodyTooLarge is the error of an ingest's body over limit: 413.
func ingestBodyTooLarge(limit int64) error {
	return WithHTTPStatus(http.StatusRequestEntityTooLarge, agent.Errorf(agent.CodeInvalid,
		"the ingest's body is over %d bytes (AGENTFLOW_MAX_UPLOAD_BYTES) and a document over %d bytes of text is refused: nothing was stored",
		limit, knowledge.DefaultMaxDocumentBytes))
}

// prepare checks that the store takes a document's text.
func (k *knowledgeCore) prepare(d agent.Document, text string) error {
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
			return agent.Errorf(agent.CodeInvalid, "documents[%d]: %s", i, agent.Clip(err.Error(), 300))
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
			return fmt.Errorf("ref %s: want cas://… (a file from %s, a tool's data) or artifact://… (a turn's result)", Clip(d.Ref), FilesPath)
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
		return fmt.Errorf("content type %s is read from a file: upload the PDF to %s and give its cas:// ref", mt, FilesPath)
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
func (k *knowledgeCore) writePages(ctx context.Context, tenant string, docs []contract.IngestDocument) ([]string, error) {
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
		ref, err := k.s.store.PutTenantBlob(ctx, tenant, data, "application/json")
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
func (k *knowledgeCore) startIngest(ctx context.Context, in contract.IngestInput) error {
	s := k.s
	opts := client.StartWorkflowOptions{
		ID:                       contract.IngestWorkflowID(in.TenantID, in.BatchID),
		TaskQueue:                s.taskQueue,
		StaticSummary:            fmt.Sprintf("ingest %s: %d documents into %s", in.BatchID, in.Documents, in.Collection),
		TypedSearchAttributes:    temporal.NewSearchAttributes(contract.SearchTenant.ValueSet(in.TenantID)),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	_, err := s.client.ExecuteWorkflow(ctx, opts, contract.Ingest, in)
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
func (k *knowledgeCore) ingestStatus(ctx context.Context, id string) (contract.IngestStatus, error) {
	if err := agent.ValidateID("id", id); err != nil || id == "" {
		return contract.IngestStatus{}, agent.Errorf(agent.CodeInvalid, "ingest id %s: want the id the ingest's start answered", Clip(id))
	}
	s := k.s
	wid := contract.IngestWorkflowID(TenantOf(ctx), id)
	v, err := s.client.QueryWorkflow(ctx, wid, "", contract.QueryIngestStatus)
	// A workflow whose first task has not run yet cannot answer: a
	// moment later it can.
	var notReady *serviceerror.WorkflowNotReady
	for wait := 50 * time.Millisecond; errors.As(err, &notReady) && wait < 2*time.Second; wait *= 2 {
		select {
		case <-ctx.Done():
			return contract.IngestStatus{}, ctx.Err()
		case <-time.After(wait):
		}
		v, err = s.client.QueryWorkflow(ctx, wid, "", contract.QueryIngestStatus)
	}
	var notFound *serviceerror.NotFound
	if errors.As(err, &notFound) {
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

// knowledgeAPI serves the knowledge routes for an HTTPAPI: each reads
// its request, calls knowledgeCore and writes the answer.
type knowledgeAPI struct {
	a *HTTPAPI
	k *knowledgeCore
}

func (a *HTTPAPI) registerKnowledge(mux *http.ServeMux) {
	if a.svc.knowledge == nil {
		return
	}
	k := &knowledgeAPI{a: a, k: a.svc.knowledge}
	mux.HandleFunc("POST "+collectionsPath, k.createCollection)
	mux.HandleFunc("GET "+collectionsPath, serve(k, pb.KnowledgeService_ListCollections_FullMethodName, http.StatusOK,
		func(r *http.Request) (any, error) {
			list, err := k.k.collections(r.Context())
			return map[string]any{"collections": list}, err
		}))
	mux.HandleFunc("GET "+collectionPath, serve(k, pb.KnowledgeService_GetCollection_FullMethodName, http.StatusOK,
		func(r *http.Request) (agent.Collection, error) {
			return k.k.collection(r.Context(), r.PathValue("name"))
		}))
	mux.HandleFunc("DELETE "+collectionPath, serve(k, pb.KnowledgeService_DeleteCollection_FullMethodName, http.StatusNoContent,
		func(r *http.Request) (any, error) { return nil, k.k.deleteCollection(r.Context(), r.PathValue("name")) }))
	mux.HandleFunc("POST "+documentsPath, k.postDocuments)
	mux.HandleFunc("GET "+documentsPath, serve(k, pb.KnowledgeService_ListDocuments_FullMethodName, http.StatusOK, k.listDocuments))
	mux.HandleFunc("GET "+documentPath, serve(k, pb.KnowledgeService_GetDocument_FullMethodName, http.StatusOK,
		func(r *http.Request) (agent.Document, error) {
			return k.k.document(r.Context(), r.PathValue("name"), r.PathValue("id"))
		}))
	mux.HandleFunc("DELETE "+documentPath, serve(k, pb.KnowledgeService_DeleteDocument_FullMethodName, http.StatusNoContent,
		func(r *http.Request) (any, error) {
			return nil, k.k.deleteDocument(r.Context(), r.PathValue("name"), r.PathValue("id"))
		}))
	mux.HandleFunc("POST "+searchPath, serve(k, pb.KnowledgeService_SearchCollection_FullMethodName, http.StatusOK, k.search))
	mux.HandleFunc("GET "+ingestPath, serve(k, pb.KnowledgeService_GetIngest_FullMethodName, http.StatusOK,
		func(r *http.Request) (any, error) { return k.k.ingestStatus(r.Context(), r.PathValue("id")) }))
	a.RefuseOtherMethods(mux, collectionsPath, collectionPath, documentsPath, documentPath, searchPath, ingestPath)
}

func (k *knowledgeAPI) createCollection(w http.ResponseWriter, r *http.Request) {
	r, ok := k.a.Authorized(w, r, pb.KnowledgeService_CreateCollection_FullMethodName)
	if !ok {
		return
	}
	var in collectionRequest
	if err := decodeJSONBody(r, "the collection", &in); err != nil {
		k.a.Refuse(w, r, err)
		return
	}
	c, err := k.k.createCollection(r.Context(), in)
	if err != nil {
		k.a.Refuse(w, r, err)
		return
	}
	w.Header().Set("Location", collectionsPath+"/"+c.Name)
	WriteJSON(w, http.StatusCreated, c)
}

func (k *knowledgeAPI) listDocuments(r *http.Request) (any, error) {
	q := r.URL.Query()
	for key := range q {
		if key != "after" && key != "limit" {
			return nil, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: the list takes after and limit", Clip(key))
		}
	}
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, agent.Errorf(agent.CodeInvalid, "limit %s: want 1 to %d", Clip(s), knowledge.MaxList)
		}
		limit = n
	}
	docs, next, err := k.k.documents(r.Context(), r.PathValue("name"), q.Get("after"), limit)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"documents": docs}
	if next != "" {
		out["next_after"] = next
	}
	return out, nil
}

func (k *knowledgeAPI) search(r *http.Request) (any, error) {
	var in searchRequest
	if err := decodeJSONBody(r, "the search", &in); err != nil {
		return nil, err
	}
	hits, usage, err := k.k.search(r.Context(), agent.ChannelHTTP, r.PathValue("name"), in)
	return map[string]any{"hits": hits, "usage": usage}, err
}

// serve answers a knowledge route: the caller authorized as method, then
// do's answer as JSON with status (none for 204), or its error refused.
func serve[T any](k *knowledgeAPI, method string, status int, do func(*http.Request) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, ok := k.a.Authorized(w, r, method)
		if !ok {
			return
		}
		out, err := do(r)
		switch {
		case err != nil:
			k.a.Refuse(w, r, err)
		case status == http.StatusNoContent:
			w.WriteHeader(status)
		default:
			WriteJSON(w, status, out)
		}
	}
}

func (k *knowledgeAPI) postDocuments(w http.ResponseWriter, r *http.Request) {
	r, ok := k.a.Authorized(w, r, pb.KnowledgeService_IngestDocuments_FullMethodName)
	if !ok {
		return
	}
	c, err := k.k.collection(r.Context(), r.PathValue("name"))
	if err != nil {
		k.a.Refuse(w, r, err)
		return
	}
	limit := k.a.maxUpload
	if r.ContentLength > limit {
		k.a.Refuse(w, r, ingestBodyTooLarge(limit))
		return
	}
	allowBody(r, limit)
	data, err := ReadBody(r)
	if err != nil {
		var e *intake.Error
		if errors.As(err, &e) && e.Status == http.StatusRequestEntityTooLarge {
			err = ingestBodyTooLarge(limit)
		}
		k.a.Refuse(w, r, err)
		return
	}
	var in ingestRequest
	if err := decodeJSON("the ingest", data, &in); err != nil {
		k.a.Refuse(w, r, err)
		return
	}
	answer, err := k.k.ingest(r.Context(), c, in)
	if err != nil {
		k.a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusAccepted, answer)
}

// decodeJSONBody reads a request's body (bounded as every body is) as
// one JSON object into v, strictly.
func decodeJSONBody(r *http.Request, what string, v any) error {
	data, err := ReadBody(r)
	if err != nil {
		return err
	}
	return decodeJSON(what, data, v)
}

// decodeJSON decodes data, one JSON object with known members only, into
// v; an error says what is wrong where.
func decodeJSON(what string, data []byte, v any) error {
	if JSONKind(data) != '{' {
		return agent.Errorf(agent.CodeInvalid, "%s: want a JSON object", what)
	}
	if err := OneJSONValue(data); err != nil {
		return agent.Errorf(agent.CodeInvalid, "%s: %s", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return agent.Errorf(agent.CodeInvalid, "%s: %s: want %s", what, te.Field, te.Type)
		}
		return agent.Errorf(agent.CodeInvalid, "%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}
