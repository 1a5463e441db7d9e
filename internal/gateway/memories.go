package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Memories: the caller's long-term memories (agent.MemoryRecord), which
// agents write with the remember tool or extract after a conversation.
//
//	GET    /v1/memories[?agent_id=&before=&limit=]  the caller's, newest first
//	DELETE /v1/memories/{id}                        one of the caller's
//	DELETE /v1/memories[?agent_id=]                 all of the caller's (erase)
//
// The user is the credential's (agent.Caller.Principal), never the
// request's: a caller sees and deletes only its own memories, and
// another user's id is not found, as one of nothing. An erase deletes the
// rows and vectors in one transaction and answers how many there were.
// A caller with the admin role may erase a named user's of its tenant:
// DELETE /v1/memories?subject=S[&issuer=I] (issuer default: the
// gateway's static tokens), or ?name=N for a caller known by name alone.
// Reading is authorized as GetResult (role user), the erase of another's
// as UpsertCatalog (role admin).
const (
	MemoriesPath = "/v1/memories"
	memoryPath   = "/v1/memories/{id}"
)

// MemoryStore keeps long-term memories (internal/knowledge.Memories).
type MemoryStore interface {
	List(ctx context.Context, scope agent.MemoryScope, before string, limit int) ([]agent.MemoryRecord, error)
	Forget(ctx context.Context, scope agent.MemoryScope, id string) error
	Erase(ctx context.Context, scope agent.MemoryScope) (int, error)
}

// MemoryList is the answer to GET /v1/memories: Next, when set, is the
// before of the next page.
type MemoryList struct {
	Memories []agent.MemoryRecord `json:"memories"`
	Next     string               `json:"next,omitempty"`
}

// MemoryErase is the answer to DELETE /v1/memories.
type MemoryErase struct {
	Deleted int `json:"deleted"`
}

// defaultMemoryPage is a page of GET /v1/memories without limit.
const defaultMemoryPage = 100

func (a *HTTPAPI) registerMemories(mux *http.ServeMux, ms MemoryStore) {
	h := memoryRoutes{a: a, ms: ms}
	mux.HandleFunc("GET "+MemoriesPath, h.list)
	mux.HandleFunc("DELETE "+MemoriesPath, h.erase)
	mux.HandleFunc("DELETE "+memoryPath, h.forget)
	a.RefuseOtherMethods(mux, MemoriesPath, memoryPath)
}

type memoryRoutes struct {
	a  *HTTPAPI
	ms MemoryStore
}

// scope authorizes r and returns the caller's own scope, narrowed to the
// query's agent_id when it names one; params are the other query
// parameters the route takes.
func (h memoryRoutes) scope(w http.ResponseWriter, r *http.Request, method string, params ...string) (*http.Request, agent.MemoryScope, bool) {
	r, ok := h.a.Authorized(w, r, method)
	if !ok {
		return nil, agent.MemoryScope{}, false
	}
	q := r.URL.Query()
	if err := onlyParams(q, append(params, "agent_id")...); err != nil {
		h.a.Refuse(w, r, err)
		return nil, agent.MemoryScope{}, false
	}
	if h.ms == nil {
		h.a.Refuse(w, r, agent.Errorf(agent.CodeUnavailable, "long-term memory is not configured on this gateway"))
		return nil, agent.MemoryScope{}, false
	}
	caller := CallerOf(r.Context())
	scope := agent.MemoryScope{Tenant: caller.Tenant, AgentID: q.Get("agent_id"), User: caller.Caller().Principal()}
	return r, scope, true
}

// onlyParams refuses a query parameter not in allowed, or one given twice.
func onlyParams(q url.Values, allowed ...string) error {
	for key, vals := range q {
		known := false
		for _, k := range allowed {
			known = known || k == key
		}
		switch {
		case !known:
			return agent.Errorf(agent.CodeInvalid, "unknown query parameter %s", Clip(key))
		case len(vals) > 1:
			return agent.Errorf(agent.CodeInvalid, "query parameter %s is given %d times: give it once", Clip(key), len(vals))
		}
	}
	return nil
}

func (h memoryRoutes) list(w http.ResponseWriter, r *http.Request) {
	r, scope, ok := h.scope(w, r, pb.AgentService_GetResult_FullMethodName, "before", "limit")
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := defaultMemoryPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			h.a.Refuse(w, r, agent.Errorf(agent.CodeInvalid, "limit %q: want 1 to 1000", Clip(v)))
			return
		}
		limit = n
	}
	ms, err := h.ms.List(r.Context(), scope, q.Get("before"), limit)
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	out := MemoryList{Memories: ms}
	if out.Memories == nil {
		out.Memories = []agent.MemoryRecord{}
	}
	if len(ms) == limit {
		out.Next = ms[len(ms)-1].ID
	}
	WriteJSON(w, http.StatusOK, out)
}

func (h memoryRoutes) forget(w http.ResponseWriter, r *http.Request) {
	r, scope, ok := h.scope(w, r, pb.AgentService_GetResult_FullMethodName)
	if !ok {
		return
	}
	if err := h.ms.Forget(r.Context(), scope, r.PathValue("id")); err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h memoryRoutes) erase(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	named := q.Has("subject") || q.Has("issuer") || q.Has("name")
	method := pb.AgentService_GetResult_FullMethodName
	if named {
		method = pb.CatalogService_UpsertCatalog_FullMethodName // an admin's
	}
	r, scope, ok := h.scope(w, r, method, "subject", "issuer", "name")
	if !ok {
		return
	}
	if named {
		user, err := namedUser(q)
		if err != nil {
			h.a.Refuse(w, r, err)
			return
		}
		scope.User = user
	}
	n, err := h.ms.Erase(r.Context(), scope)
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, MemoryErase{Deleted: n})
}

// namedUser is the user an admin's erase names: by subject (and issuer,
// default the static tokens'), or by name alone.
func namedUser(q url.Values) (string, error) {
	subject, issuer, name := q.Get("subject"), q.Get("issuer"), q.Get("name")
	switch {
	case name != "" && (subject != "" || issuer != ""):
		return "", agent.Errorf(agent.CodeInvalid, "name a user by subject (and issuer) or by name, not both")
	case name != "":
		return (&agent.Caller{Name: name}).Principal(), nil
	case subject == "":
		return "", agent.Errorf(agent.CodeInvalid, "subject is required to erase another user's memories")
	case len(subject) > agent.MaxSubjectLength || len(issuer) > agent.MaxIssuerLength:
		return "", agent.Errorf(agent.CodeInvalid, "subject or issuer is too long")
	}
	if issuer == "" {
		issuer = agent.IssuerStaticToken
	}
	return (&agent.Caller{Issuer: issuer, Subject: subject}).Principal(), nil
}
