// Package knowledgeapi serves a tenant's knowledge collections, over gRPC
// (KnowledgeService, with the core's memory methods beside them) and over
// HTTP/JSON (/v1/collections, /v1/ingests). A service API, apart from
// the core as package gateway's doc says (it also reaches Temporal
// through an interface below).
package knowledgeapi

import (
	"context"
	"crypto/rand"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/metered"
)

// Knowledge: a tenant's collections and their documents, over HTTP/JSON
// and over gRPC (KnowledgeService, grpc.go); internal/knowledge
// stores and searches them, the Ingest workflow stores documents. Both
// doors are thin adapters over core, which holds the rules:
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
// authorized as its KnowledgeService method (the core's methodRoles): creating and
// deleting collections needs the admin role, the rest the user role.
//
// An ingest's documents are checked whole before anything is stored:
// each inline text parsed (knowledge.Extract; a PDF only by ref) and bounded
// (MaxDocumentBytes), each ref well-formed; a body over the upload limit
// (the core's HTTPOptions.MaxUploadBytes, as a file's) is refused before it is read (larger documents go to /v1/files first,
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

// Store keeps and searches a tenant's collections (knowledge.Store).
type Store interface {
	CreateCollection(ctx context.Context, c agent.Collection) (agent.Collection, error)
	Collection(ctx context.Context, tenant, name string) (agent.Collection, error)
	Collections(ctx context.Context, tenant string) ([]agent.Collection, error)
	DeleteCollection(ctx context.Context, tenant, name string) error
	// Prepare checks that the store takes a document's text.
	Prepare(doc agent.Document, text string) (agent.Document, []agent.Chunk, error)
	Document(ctx context.Context, tenant, collection, id string) (agent.Document, error)
	Documents(ctx context.Context, tenant, collection, after string, limit int) ([]agent.Document, error)
	DeleteDocument(ctx context.Context, tenant, collection, id string) error
	Search(ctx context.Context, emb knowledge.Embedder, tenant, collection string, q knowledge.Query) ([]agent.Hit, agent.Usage, error)
}

// Blobs keeps an ingest's pages as the tenant's blobs (store.Store).
type Blobs interface {
	PutTenantBlob(ctx context.Context, tenantID string, data []byte, contentType string) (string, error)
}

// Workflows starts the Ingest workflow and asks it its status
// (client.Client).
type Workflows interface {
	ExecuteWorkflow(ctx context.Context, options client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error)
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args ...any) (converter.EncodedValue, error)
}

// Core is what the API needs of the gateway's core on every door: the
// tenant of a request's credential, and an error as the call's status
// (gateway.Status, which never leaks an internal error's text).
type Core interface {
	TenantOf(ctx context.Context) string
	StatusOf(ctx context.Context, err error) error
}

// Memories is the core's memory API (the caller's own long-term
// memories), which KnowledgeService serves beside the collections; every
// error is a domain error.
type Memories interface {
	List(ctx context.Context, agentID, before string, limit int) (memories []agent.MemoryRecord, next string, err error)
	Forget(ctx context.Context, agentID, id string) error
	// Erase deletes the caller's memories, or those of the user that
	// subject and issuer, or name, name (an admin's erase).
	Erase(ctx context.Context, agentID, subject, issuer, name string) (int, error)
}

// Options make an API.
type Options struct {
	// Store keeps the collections; nil: the HTTP API has no knowledge
	// routes, and KnowledgeService's collection methods answer
	// Unavailable.
	Store Store
	// Embedder embeds search queries (a metered.Embedder over the
	// llm.Router: each query charged to its tenant, governed and counted);
	// nil: vector and hybrid search are refused, text search works.
	Embedder  knowledge.Embedder
	Blobs     Blobs
	Workflows Workflows
	TaskQueue string
	Core      Core
	Memories  Memories
}

// API is the knowledge API: KnowledgeService (RegisterGRPC) and the
// HTTP routes (RegisterHTTP).
type API struct {
	// knowledge is nil without a store.
	knowledge *core
	c         Core
	memories  Memories
}

// New returns the knowledge API of o.
func New(o Options) *API {
	a := &API{c: o.Core, memories: o.Memories}
	if o.Store != nil {
		a.knowledge = &core{c: o.Core, ks: o.Store, emb: o.Embedder, blobs: o.Blobs, wf: o.Workflows, taskQueue: o.TaskQueue}
	}
	return a
}

// core is the knowledge API, whatever the door: the caller's tenant is
// the context's (Core.TenantOf), and every error is a domain error the
// door renders.
type core struct {
	c         Core
	ks        Store
	emb       knowledge.Embedder
	blobs     Blobs
	wf        Workflows
	taskQueue string
}

// errNoKnowledge answers the knowledge API of a gateway without a store.
var errNoKnowledge = agent.Errorf(agent.CodeUnavailable, "knowledge collections are not configured on this gateway")

// collection is the caller's tenant's collection name.
func (k *core) collection(ctx context.Context, name string) (agent.Collection, error) {
	if err := agent.ValidateCollectionName(name); err != nil {
		return agent.Collection{}, err
	}
	return k.ks.Collection(ctx, k.c.TenantOf(ctx), name)
}

// collectionRequest is what a collection is created from (the body of
// POST /v1/collections).
type collectionRequest struct {
	Name           string `json:"name"`
	Description    string `json:"description"`
	EmbeddingModel string `json:"embedding_model"`
	Dims           int    `json:"dims"`
}

func (k *core) createCollection(ctx context.Context, in collectionRequest) (agent.Collection, error) {
	c := agent.Collection{Tenant: k.c.TenantOf(ctx), Name: in.Name, Description: in.Description, EmbeddingModel: in.EmbeddingModel, Dims: in.Dims}
	if err := c.Validate(); err != nil {
		return agent.Collection{}, err
	}
	return k.ks.CreateCollection(ctx, c)
}

func (k *core) collections(ctx context.Context) ([]agent.Collection, error) {
	list, err := k.ks.Collections(ctx, k.c.TenantOf(ctx))
	if list == nil {
		list = []agent.Collection{}
	}
	return list, err
}

func (k *core) deleteCollection(ctx context.Context, name string) error {
	if err := agent.ValidateCollectionName(name); err != nil {
		return err
	}
	return k.ks.DeleteCollection(ctx, k.c.TenantOf(ctx), name)
}

// documents is a page of a collection's documents after the id after:
// limit of them (0: knowledge.MaxList), and next, the after of the next
// page when there may be one.
func (k *core) documents(ctx context.Context, name, after string, limit int) (docs []agent.Document, next string, err error) {
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

func (k *core) document(ctx context.Context, name, id string) (agent.Document, error) {
	c, err := k.collection(ctx, name)
	if err != nil {
		return agent.Document{}, err
	}
	return k.ks.Document(ctx, c.Tenant, c.Name, id)
}

func (k *core) deleteDocument(ctx context.Context, name, id string) error {
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

func (k *core) search(ctx context.Context, channel, name string, in searchRequest) ([]agent.Hit, agent.Usage, error) {
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
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid, "mode %s: want hybrid, text or vector", intake.Clip(in.Mode))
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
