package openapitool

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/openapi"
	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/words"
)

// APIs chosen when called (seed 004 §5.4: "call any API without
// prebuild"). An openapi_action entry with openapi_url instead of a
// document lets each call name the API's document by URL, from the hosts
// the entry allows, and choose credentials by the name of one of the
// entry's auth_profiles, never by a secret. Everything the call may do is
// checked before any request to the API: the document's host against
// the entry's allowed_hosts (before it is fetched), the operation against
// the entry's operations (before it is fetched) and methods (once it is
// read), and the profile's host against the API's. The document is
// fetched through the tenant's egress client, as every call of the kind
// is, with the redirects it follows held to the allowed hosts too; it is
// kept for the entry's TTL per tenant and URL (documents), and
// each operation called is narrowed out of it and validated on its own.
// The call's approval policy reads openapi_url and auth_profile as
// arguments like any other.

// resolveURLEntry describes an entry whose calls name their document:
// how to call it, in its description and parameters, and, when it kept
// the kind's policy, which of its calls need approval: all but those of
// an entry whose methods only read.
func resolveURLEntry(spec agent.Tool, cfg openapiConfig) agent.Tool {
	out := spec
	intro := spec.Description
	if intro == openapiDescription {
		intro = "Call an operation of an HTTP API described by an OpenAPI document"
	}
	var b strings.Builder
	b.WriteString(strings.TrimSuffix(strings.TrimSpace(intro), "."))
	b.WriteString(`. Name the API's OpenAPI document by its URL in each call: {"openapi_url": "https://...", "operation_id": "...", "params": {"name": value}, "body": ...}. ` +
		"params holds path, query, header and cookie parameters by name; body is the request body, for operations that take one. " +
		"An operation_id the document lacks is answered with the operations it has.")
	fmt.Fprintf(&b, "\nDocuments are read from: %s.", strings.Join(cfg.OpenAPIURL.AllowedHosts, ", "))
	if len(cfg.Operations) > 0 {
		fmt.Fprintf(&b, "\nOperations allowed: %s.", strings.Join(cfg.Operations, ", "))
	}
	if len(cfg.Methods) > 0 {
		fmt.Fprintf(&b, "\nMethods allowed: %s.", strings.Join(cfg.Methods, ", "))
	}
	b.WriteString(profilesText(cfg))
	out.Description = b.String()
	if string(spec.Parameters) == openapiParameters {
		out.Parameters = urlParameters(cfg)
	}
	if spec.Approval == openapiApproval {
		out.Approval = agent.ApprovalAlways
		if len(cfg.Methods) > 0 && !slices.ContainsFunc(cfg.Methods, func(m string) bool { return m != "GET" && m != "HEAD" }) {
			out.Approval = agent.ApprovalNever
		}
	}
	return out
}

// urlParameters is the JSON Schema of the arguments of an entry whose
// calls name their document.
func urlParameters(cfg openapiConfig) json.RawMessage {
	opID := map[string]any{"type": "string", "description": `the operation to call: its operationId, or "METHOD /path" for one without`}
	if len(cfg.Operations) > 0 {
		opID["enum"] = cfg.Operations
	}
	schema := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{openapi.ArgOpenAPIURL, "operation_id"},
		"properties": map[string]any{
			openapi.ArgOpenAPIURL: map[string]any{"type": "string",
				"description": "the URL of the API's OpenAPI document (JSON or YAML), on " + strings.Join(cfg.OpenAPIURL.AllowedHosts, ", ")},
			"operation_id": opID,
			"params": map[string]any{"type": "object",
				"description": "the operation's parameters by name (path, query, header and cookie parameters)"},
			"body": map[string]any{"description": "the request body, for operations that take one"},
		},
	}
	return withProfiles(schemaJSON(schema), cfg)
}

// withProfiles adds auth_profile to a parameters schema when the entry
// has profiles.
func withProfiles(params json.RawMessage, cfg openapiConfig) json.RawMessage {
	if len(cfg.AuthProfiles) == 0 {
		return params
	}
	var schema map[string]any
	if err := json.Unmarshal(params, &schema); err != nil {
		return params
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		return params
	}
	props[openapi.ArgAuthProfile] = map[string]any{"type": "string", "enum": slices.Sorted(maps.Keys(cfg.AuthProfiles)),
		"description": "the named credentials to call the API with"}
	return schemaJSON(schema)
}

func schemaJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("tools: encode a schema: %v", err)) // maps of strings always encode
	}
	return data
}

// profilesText tells the model the entry's auth profiles.
func profilesText(cfg openapiConfig) string {
	if len(cfg.AuthProfiles) == 0 {
		return ""
	}
	var names []string
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthProfiles)) {
		names = append(names, name+" (for "+cfg.AuthProfiles[name].Host+")")
	}
	return "\nauth_profile names the credentials to call with: " + strings.Join(names, ", ") + "."
}

// document returns the document a call names, narrowed to the operation
// it calls, and where its calls go; everything the entry does not allow
// is refused before the API hears of it, and what can be refused before
// the document is fetched is.
func (t *openapiTool) document(ctx context.Context, call kind.Call, args openapi.Args) (*openapi.Document, *url.URL, error) {
	hosts := strings.Join(t.cfg.OpenAPIURL.AllowedHosts, ", ")
	raw := args.OpenAPIURL
	if raw == "" {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "openapi_url is required: the URL of the API's OpenAPI document, on %s", hosts)
	}
	if err := checkHTTPURL(raw); err != nil {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "openapi_url: %v", err)
	}
	from, _ := url.Parse(raw) // checked
	what := "openapi_url " + shownURL(raw)
	if !t.allowed.Admits(from) {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "%s: %s is not a host this tool reads documents from (%s)", what, from.Host, hosts)
	}
	if args.OperationID == "" {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "operation_id is required")
	}
	if len(t.cfg.Operations) > 0 && !slices.Contains(t.cfg.Operations, args.OperationID) {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "operation_id %q: this tool may call %s", words.Clip(args.OperationID, 80), strings.Join(t.cfg.Operations, ", "))
	}
	key := call.TenantID + "\x00" + strings.Join(t.cfg.OpenAPIURL.AllowedHosts, ",") + "\x00" + raw
	f, err := t.docs.fetch(ctx, t.deps.Now, key, t.cfg.OpenAPIURL.ttl(), func(ctx context.Context) (*openapi.Source, error) {
		return fetchDocument(ctx, t.documentClient(call.HTTP), raw, maxSpecBytes(t.deps), what)
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, nil, prefixed(what, err)
	}
	var allowed []string
	var op *openapi.OperationInfo
	for i, o := range f.ops {
		if t.grants(o) {
			allowed = append(allowed, o.ID)
		}
		if o.ID == args.OperationID {
			op = &f.ops[i]
		}
	}
	switch {
	case op == nil:
		return nil, nil, agent.Errorf(agent.CodeInvalid, "unknown operation_id %q; the operations of %s this tool may call are %s",
			words.Clip(args.OperationID, 80), shownURL(raw), openapi.ListIDs(allowed, 100))
	case !t.grants(*op):
		return nil, nil, agent.Errorf(agent.CodeInvalid, "%s is %s %s, and this tool may call %s operations only",
			op.ID, op.Method, op.Path, strings.Join(t.cfg.Methods, ", "))
	}
	doc, err := t.docs.operation(ctx, f, op.ID)
	if err != nil {
		return nil, nil, agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
	}
	base, err := doc.BaseURL("", from)
	if err != nil {
		return nil, nil, agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
	}
	return doc, base, nil
}

// prefixed is err with what before its message, unless it says it.
func prefixed(what string, err error) error {
	if strings.HasPrefix(err.Error(), what) {
		return err
	}
	return fmt.Errorf("%s: %w", what, err)
}

// grants reports whether the entry allows calls of op.
func (t *openapiTool) grants(op openapi.OperationInfo) bool {
	return (len(t.cfg.Operations) == 0 || slices.Contains(t.cfg.Operations, op.ID)) &&
		(len(t.cfg.Methods) == 0 || slices.Contains(t.cfg.Methods, op.Method))
}

// documentClient is the call's egress client, whose redirects, checked
// by its own rule, must also stay on the hosts documents may come from.
func (t *openapiTool) documentClient(base *http.Client) *http.Client {
	c := *base
	next := base.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !t.allowed.Admits(req.URL) {
			return agent.Errorf(agent.CodeInvalid, "a redirect to %s, which is not a host this tool reads documents from", shownURL(req.URL.String()))
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return agent.Errorf(agent.CodeInvalid, "too many redirects")
		}
		return nil
	}
	return &c
}

// Bounds of documents.
const (
	maxFetchedDocuments = 256
	maxLoadedOperations = 1024
)

// documents keeps, for a worker (one cache per OpenAPIAction), the documents
// openapi_action
// calls name by URL: each tenant's fetch of a URL is used until it is as
// old as the entry's TTL, concurrent calls that miss wait for one fetch,
// and the operations called are narrowed out of the document and loaded
// once per content hash (the same document fetched again, or under
// another URL, is not loaded again). A document is kept compressed
// (openapi.Source) with its list of operations. It is safe for
// concurrent use.
type documents struct {
	flights singleflight.Group

	mu      sync.Mutex
	fetched map[string]*fetchedDocument // by tenant, allowed hosts and URL
	loaded  map[string]*openapi.Document
}

type fetchedDocument struct {
	src *openapi.Source
	ops []openapi.OperationInfo
	at  time.Time
}

// newDocuments returns an empty cache.
func newDocuments() *documents {
	return &documents{fetched: map[string]*fetchedDocument{}, loaded: map[string]*openapi.Document{}}
}

// fresh returns the document under key if it is younger than ttl by now.
func (d *documents) fresh(now func() time.Time, key string, ttl time.Duration) *fetchedDocument {
	d.mu.Lock()
	defer d.mu.Unlock()
	f := d.fetched[key]
	if f == nil || now().Sub(f.at) >= ttl {
		return nil
	}
	return f
}

// fetch returns the document under key, fetched with get unless one
// younger than ttl is kept, telling time by now. A failed fetch is not
// kept.
func (d *documents) fetch(ctx context.Context, now func() time.Time, key string, ttl time.Duration, get func(context.Context) (*openapi.Source, error)) (*fetchedDocument, error) {
	if f := d.fresh(now, key, ttl); f != nil {
		return f, nil
	}
	ch := d.flights.DoChan("fetch\x00"+key, func() (any, error) {
		if f := d.fresh(now, key, ttl); f != nil {
			return f, nil // fetched while this call waited for the flight
		}
		// The fetch serves every call waiting for it: the first one's
		// cancellation is not theirs (fetchDocument bounds its time).
		src, err := get(context.WithoutCancel(ctx))
		if err != nil {
			return nil, err
		}
		ops, err := src.Outline()
		if err != nil {
			return nil, err
		}
		f := &fetchedDocument{src: src, ops: ops, at: now()}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.fetched) >= maxFetchedDocuments {
			d.evictOldest()
		}
		d.fetched[key] = f
		return f, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*fetchedDocument), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// evictOldest drops the document fetched longest ago; d.mu is held.
func (d *documents) evictOldest() {
	var oldest string
	var at time.Time
	for k, f := range d.fetched {
		if oldest == "" || f.at.Before(at) {
			oldest, at = k, f.at
		}
	}
	delete(d.fetched, oldest)
}

// operation returns f's document narrowed to the operation id, loaded and
// validated.
func (d *documents) operation(ctx context.Context, f *fetchedDocument, id string) (*openapi.Document, error) {
	key := f.src.Sum() + "\x00" + id
	d.mu.Lock()
	doc := d.loaded[key]
	d.mu.Unlock()
	if doc != nil {
		return doc, nil
	}
	v, err, _ := d.flights.Do("load\x00"+key, func() (any, error) {
		// For every call waiting, as a fetch is.
		doc, err := openapi.LoadOperations(context.WithoutCancel(ctx), f.src, []string{id})
		if err != nil {
			return nil, err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.loaded) >= maxLoadedOperations {
			clear(d.loaded) // loading one again costs a narrowing of its document
		}
		d.loaded[key] = doc
		return doc, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*openapi.Document), nil
}
