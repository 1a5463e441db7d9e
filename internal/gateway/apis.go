package gateway

import (
	"context"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/knowledgeapi"
	"github.com/agentflow/agentflow/internal/knowledge"
)

// The APIs of their own (internal/gateway/knowledgeapi, evalapi, …) reach the core
// through the adapters below: each takes the narrow interfaces it
// declares, never the Service, so that what an API may do with the core
// is what its interfaces say.

// KnowledgeOptions give the gateway its knowledge routes and
// KnowledgeService: the Store and Embedder of knowledgeapi.Options,
// which says what each does and what their absence means.
type KnowledgeOptions struct {
	Store    *knowledge.Store
	Embedder knowledge.Embedder
}

// newKnowledge is the knowledge API of s, over o's stores and client.
func newKnowledge(s *Service, o Options) *knowledgeapi.API {
	ko := knowledgeapi.Options{Embedder: o.Knowledge.Embedder, Workflows: o.Client, TaskQueue: o.TaskQueue, Core: apiCore{s},
		Memories: knowledgeMemories{memoryCore{ms: o.Memories}}}
	// A nil pointer in an interface is not a nil interface: the API
	// tells "no store" by the interface.
	if o.Knowledge.Store != nil {
		ko.Store = o.Knowledge.Store
	}
	if o.Store != nil {
		ko.Blobs = o.Store
	}
	return knowledgeapi.New(ko)
}

// apiCore is the core as every API sees it: the caller's tenant, and an
// error as the call's status.
type apiCore struct{ s *Service }

func (c apiCore) TenantOf(ctx context.Context) string           { return TenantOf(ctx) }
func (c apiCore) StatusOf(ctx context.Context, err error) error { return c.s.StatusOf(ctx, err) }
func (c apiCore) NewJobID() string                              { return NewJobID() }
func (c apiCore) ClientIDs(ctx context.Context, fieldIDs ...string) error {
	return clientIDs(ctx, fieldIDs...)
}

// apiHTTP is the HTTP API as an API's routes see it.
type apiHTTP struct{ *HTTPAPI }

// WriteJSON answers v as JSON (the core's WriteJSON).
func (apiHTTP) WriteJSON(w http.ResponseWriter, status int, v any) { WriteJSON(w, status, v) }

// RefuseStatus answers err as a problem with status instead of its code's.
func (h apiHTTP) RefuseStatus(w http.ResponseWriter, r *http.Request, status int, err error) {
	h.Refuse(w, r, WithHTTPStatus(status, err))
}

// ReadBody reads r's body, bounded as every body is, or by max bytes
// when max is not 0.
func (h apiHTTP) ReadBody(r *http.Request, max int64) ([]byte, error) {
	if max != 0 {
		allowBody(r, max)
	}
	return ReadBody(r)
}

// knowledgeMemories is memoryCore as KnowledgeService's memory methods
// call it.
type knowledgeMemories struct{ m memoryCore }

func (k knowledgeMemories) List(ctx context.Context, agentID, before string, limit int) ([]agent.MemoryRecord, string, error) {
	list, err := k.m.list(ctx, agentID, before, limit)
	return list.Memories, list.Next, err
}

func (k knowledgeMemories) Forget(ctx context.Context, agentID, id string) error {
	return k.m.forget(ctx, agentID, id)
}

func (k knowledgeMemories) Erase(ctx context.Context, agentID, subject, issuer, name string) (int, error) {
	return k.m.erase(ctx, agentID, namedUserQuery{subject: subject, issuer: issuer, name: name})
}
