package gateway

import (
	"cmp"
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
// Each route is authorized as its KnowledgeService method (role user);
// the erase of another's needs the admin role besides. KnowledgeService
// serves the same over gRPC (ListMemories, DeleteMemory, EraseMemories).
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

// A page of memories: defaultMemoryPage without a limit, at most
// maxMemoryPage.
const (
	defaultMemoryPage = 100
	maxMemoryPage     = 1000
)

// memoryCore is the memory API of a Service, whatever the door (the
// routes below, KnowledgeService's memory methods): the user is the
// context's credential's, and every error is a domain error the door
// renders.
type memoryCore struct{ ms MemoryStore }

// scope is the caller's own scope, narrowed to agentID when it names one.
func (m memoryCore) scope(ctx context.Context, agentID string) (agent.MemoryScope, error) {
	if m.ms == nil {
		return agent.MemoryScope{}, agent.Errorf(agent.CodeUnavailable, "long-term memory is not configured on this gateway")
	}
	caller := CallerOf(ctx)
	return agent.MemoryScope{Tenant: caller.Tenant, AgentID: agentID, User: caller.Caller().Principal()}, nil
}

// list is a page of the caller's memories before the id before: limit of
// them (0: defaultMemoryPage).
func (m memoryCore) list(ctx context.Context, agentID, before string, limit int) (MemoryList, error) {
	switch {
	case limit == 0:
		limit = defaultMemoryPage
	case limit < 0 || limit > maxMemoryPage:
		return MemoryList{}, agent.Errorf(agent.CodeInvalid, "limit %d: want 1 to %d", limit, maxMemoryPage)
	}
	scope, err := m.scope(ctx, agentID)
	if err != nil {
		return MemoryList{}, err
	}
	ms, err := m.ms.List(ctx, scope, before, limit)
	if err != nil {
		return MemoryList{}, err
	}
	out := MemoryList{Memories: ms}
	if out.Memories == nil {
		out.Memories = []agent.MemoryRecord{}
	}
	if len(ms) == limit {
		out.Next = ms[len(ms)-1].ID
	}
	return out, nil
}

func (m memoryCore) forget(ctx context.Context, agentID, id string) error {
	scope, err := m.scope(ctx, agentID)
	if err != nil {
		return err
	}
	return m.ms.Forget(ctx, scope, id)
}

// namedUserQuery names another user of the tenant, whose memories an
// admin erases: by subject (and issuer) or by name.
type namedUserQuery struct{ subject, issuer, name string }

func (q namedUserQuery) named() bool { return q.subject != "" || q.issuer != "" || q.name != "" }

// erase deletes the caller's memories, or those of the user q names,
// which needs the admin role.
func (m memoryCore) erase(ctx context.Context, agentID string, q namedUserQuery) (int, error) {
	scope, err := m.scope(ctx, agentID)
	if err != nil {
		return 0, err
	}
	need, whose := RoleUser, "one's own memories"
	if q.named() {
		need, whose = RoleAdmin, "another user's memories"
	}
	if caller := CallerOf(ctx); !caller.Has(need) {
		return 0, agent.Errorf(agent.CodePermissionDenied, "token %s has the roles %s; erasing %s needs the role %s",
			caller.Name, roleList(caller.Roles), whose, need)
	}
	if q.named() {
		if scope.User, err = namedUser(q); err != nil {
			return 0, err
		}
	}
	return m.ms.Erase(ctx, scope)
}

func (a *HTTPAPI) registerMemories(mux *http.ServeMux) {
	h := memoryRoutes{a: a, m: memoryCore{ms: a.svc.memories}}
	mux.HandleFunc("GET "+MemoriesPath, h.list)
	mux.HandleFunc("DELETE "+MemoriesPath, h.erase)
	mux.HandleFunc("DELETE "+memoryPath, h.forget)
	a.RefuseOtherMethods(mux, MemoriesPath, memoryPath)
}

// memoryRoutes serve /v1/memories: each reads its request, calls
// memoryCore and writes the answer.
type memoryRoutes struct {
	a *HTTPAPI
	m memoryCore
}

// query authorizes r as method and checks its query parameters: params
// and agent_id, each at most once.
func (h memoryRoutes) query(w http.ResponseWriter, r *http.Request, method string, params ...string) (*http.Request, url.Values, bool) {
	r, ok := h.a.Authorized(w, r, method)
	if !ok {
		return nil, nil, false
	}
	q := r.URL.Query()
	if err := onlyParams(q, append(params, "agent_id")...); err != nil {
		h.a.Refuse(w, r, err)
		return nil, nil, false
	}
	return r, q, true
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
	r, q, ok := h.query(w, r, pb.KnowledgeService_ListMemories_FullMethodName, "before", "limit")
	if !ok {
		return
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxMemoryPage {
			h.a.Refuse(w, r, agent.Errorf(agent.CodeInvalid, "limit %s: want 1 to %d", Clip(v), maxMemoryPage))
			return
		}
		limit = n
	}
	out, err := h.m.list(r.Context(), q.Get("agent_id"), q.Get("before"), limit)
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, out)
}

func (h memoryRoutes) forget(w http.ResponseWriter, r *http.Request) {
	r, q, ok := h.query(w, r, pb.KnowledgeService_DeleteMemory_FullMethodName)
	if !ok {
		return
	}
	if err := h.m.forget(r.Context(), q.Get("agent_id"), r.PathValue("id")); err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h memoryRoutes) erase(w http.ResponseWriter, r *http.Request) {
	r, q, ok := h.query(w, r, pb.KnowledgeService_EraseMemories_FullMethodName, "subject", "issuer", "name")
	if !ok {
		return
	}
	n, err := h.m.erase(r.Context(), q.Get("agent_id"), namedUserQuery{subject: q.Get("subject"), issuer: q.Get("issuer"), name: q.Get("name")})
	if err != nil {
		h.a.Refuse(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, MemoryErase{Deleted: n})
}

// namedUser is the user an admin's erase names: by subject (and issuer,
// default the static tokens'), or by name alone.
func namedUser(q namedUserQuery) (string, error) {
	subject, issuer, name := q.subject, q.issuer, q.name
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
	issuer = cmp.Or(issuer, agent.IssuerStaticToken)
	return (&agent.Caller{Issuer: issuer, Subject: subject}).Principal(), nil
}
