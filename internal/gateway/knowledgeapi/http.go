package knowledgeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/intake"
	"github.com/agentflow/agentflow/internal/knowledge"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// HTTP is what the routes need of the core's HTTP API: each request
// authorized as its KnowledgeService method before its body is read,
// errors answered as problems (RFC 9457, never an internal error's text),
// and bodies read within the core's bounds.
type HTTP interface {
	// Authorized is r with the context of a call of method by its
	// credential; a caller who may not make it is refused, and ok is false.
	Authorized(w http.ResponseWriter, r *http.Request, method string) (_ *http.Request, ok bool)
	// Refuse answers err as a problem.
	Refuse(w http.ResponseWriter, r *http.Request, err error)
	// RefuseStatus answers err as a problem with status instead of its
	// code's.
	RefuseStatus(w http.ResponseWriter, r *http.Request, status int, err error)
	// RefuseOtherMethods answers 405 on paths for the methods their
	// routes do not take.
	RefuseOtherMethods(mux *http.ServeMux, paths ...string)
	// ReadBody reads r's body, bounded as every body is, or by max
	// bytes when max is not 0 (an upload's).
	ReadBody(r *http.Request, max int64) ([]byte, error)
	// WriteJSON answers v as JSON.
	WriteJSON(w http.ResponseWriter, status int, v any)
}

// knowledgeAPI serves the knowledge routes: each reads its request,
// calls core and writes the answer.
type knowledgeAPI struct {
	h HTTP
	k *core
	// maxUpload bounds an ingest's body, as a file's.
	maxUpload int64
}

// RegisterHTTP adds the knowledge routes to mux, served through h; an
// ingest's body may be up to maxUpload bytes. Without a store there are
// none.
func (a *API) RegisterHTTP(mux *http.ServeMux, h HTTP, maxUpload int64) {
	if a.knowledge == nil {
		return
	}
	k := &knowledgeAPI{h: h, k: a.knowledge, maxUpload: maxUpload}
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
	h.RefuseOtherMethods(mux, collectionsPath, collectionPath, documentsPath, documentPath, searchPath, ingestPath)
}

func (k *knowledgeAPI) createCollection(w http.ResponseWriter, r *http.Request) {
	r, ok := k.h.Authorized(w, r, pb.KnowledgeService_CreateCollection_FullMethodName)
	if !ok {
		return
	}
	var in collectionRequest
	if err := k.decodeBody(r, "the collection", &in); err != nil {
		k.h.Refuse(w, r, err)
		return
	}
	c, err := k.k.createCollection(r.Context(), in)
	if err != nil {
		k.h.Refuse(w, r, err)
		return
	}
	w.Header().Set("Location", collectionsPath+"/"+c.Name)
	k.h.WriteJSON(w, http.StatusCreated, c)
}

func (k *knowledgeAPI) listDocuments(r *http.Request) (any, error) {
	q := r.URL.Query()
	for key := range q {
		if key != "after" && key != "limit" {
			return nil, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: the list takes after and limit", intake.Clip(key))
		}
	}
	limit := 0
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, agent.Errorf(agent.CodeInvalid, "limit %s: want 1 to %d", intake.Clip(s), knowledge.MaxList)
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
	if err := k.decodeBody(r, "the search", &in); err != nil {
		return nil, err
	}
	hits, usage, err := k.k.search(r.Context(), agent.ChannelHTTP, r.PathValue("name"), in)
	return map[string]any{"hits": hits, "usage": usage}, err
}

// serve answers a knowledge route: the caller authorized as method, then
// do's answer as JSON with status (none for 204), or its error refused.
func serve[T any](k *knowledgeAPI, method string, status int, do func(*http.Request) (T, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, ok := k.h.Authorized(w, r, method)
		if !ok {
			return
		}
		out, err := do(r)
		switch {
		case err != nil:
			k.h.Refuse(w, r, err)
		case status == http.StatusNoContent:
			w.WriteHeader(status)
		default:
			k.h.WriteJSON(w, status, out)
		}
	}
}

func (k *knowledgeAPI) postDocuments(w http.ResponseWriter, r *http.Request) {
	r, ok := k.h.Authorized(w, r, pb.KnowledgeService_IngestDocuments_FullMethodName)
	if !ok {
		return
	}
	c, err := k.k.collection(r.Context(), r.PathValue("name"))
	if err != nil {
		k.h.Refuse(w, r, err)
		return
	}
	limit := k.maxUpload
	if r.ContentLength > limit {
		k.h.RefuseStatus(w, r, http.StatusRequestEntityTooLarge, ingestBodyTooLarge(limit))
		return
	}
	data, err := k.h.ReadBody(r, limit)
	if err != nil {
		if e, ok := errors.AsType[*intake.Error](err); ok && e.Status == http.StatusRequestEntityTooLarge {
			k.h.RefuseStatus(w, r, http.StatusRequestEntityTooLarge, ingestBodyTooLarge(limit))
			return
		}
		k.h.Refuse(w, r, err)
		return
	}
	var in ingestRequest
	if err := decodeJSON("the ingest", data, &in); err != nil {
		k.h.Refuse(w, r, err)
		return
	}
	answer, err := k.k.ingest(r.Context(), c, in)
	if err != nil {
		k.h.Refuse(w, r, err)
		return
	}
	k.h.WriteJSON(w, http.StatusAccepted, answer)
}

// decodeBody reads a request's body (bounded as every body is) as one
// JSON object into v, strictly.
func (k *knowledgeAPI) decodeBody(r *http.Request, what string, v any) error {
	data, err := k.h.ReadBody(r, 0)
	if err != nil {
		return err
	}
	return decodeJSON(what, data, v)
}

// decodeJSON decodes data, one JSON object with known members only, into
// v; an error says what is wrong where.
func decodeJSON(what string, data []byte, v any) error {
	if intake.JSONKind(data) != '{' {
		return agent.Errorf(agent.CodeInvalid, "%s: want a JSON object", what)
	}
	if err := intake.OneJSONValue(data); err != nil {
		return agent.Errorf(agent.CodeInvalid, "%s: %s", what, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return agent.Errorf(agent.CodeInvalid, "%s: %s: want %s", what, te.Field, te.Type)
		}
		return agent.Errorf(agent.CodeInvalid, "%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}
