package openapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Document is a validated OpenAPI 3 document and its operations. It is
// safe for concurrent use once loaded (Keep changes it: call it first).
type Document struct {
	doc  *openapi3.T
	ops  []*Operation // by path, then method
	byID map[string]*Operation
}

// Operation is one operation of a document.
type Operation struct {
	// ID is the operationId, or "METHOD /path" when the document gives none.
	ID     string
	Method string
	Path   string
	// Summary is the operation's summary, or its description's first line.
	Summary string
	// Params are the operation's parameters, the path item's included, in
	// the document's order; Keys are the names the arguments give them by
	// (a parameter's name, or "in:name" when two share a name).
	Params []*openapi3.Parameter
	Keys   []string
	Body   *openapi3.RequestBody // nil: the operation takes none

	route *routers.Route
}

// Safe reports whether the operation only reads: GET or HEAD.
func (op *Operation) Safe() bool {
	return op.Method == http.MethodGet || op.Method == http.MethodHead
}

// DeclaresIdempotencyKey reports whether the operation declares an
// Idempotency-Key header parameter: the API deduplicates the requests
// that carry one.
func (op *Operation) DeclaresIdempotencyKey() bool {
	return slices.ContainsFunc(op.Params, func(p *openapi3.Parameter) bool {
		return p != nil && p.In == openapi3.ParameterInHeader && http.CanonicalHeaderKey(p.Name) == "Idempotency-Key"
	})
}

// methods is the order an operation's methods are listed in.
var methods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodOptions, http.MethodTrace, http.MethodConnect, "QUERY"}

// Load reads and validates an OpenAPI 3 document, JSON or YAML; a
// Swagger 2.0 document is converted to OpenAPI 3 first (kin-openapi's
// openapi2conv). Errors are agent.CodeInvalid: the document is the
// catalog's to fix.
func Load(ctx context.Context, data []byte) (*Document, error) {
	loader := &openapi3.Loader{Context: ctx}
	// A custom reader owns the access policy (see ReadFromURIFunc): it
	// refuses everything, so that loading never reads a file or the network.
	loader.ReadFromURIFunc = func(_ *openapi3.Loader, u *url.URL) ([]byte, error) {
		return nil, fmt.Errorf("$ref to %s: the document must be self-contained (bundle it into one file)", u.Redacted())
	}
	var doc *openapi3.T
	var err error
	swagger, isSwagger := swaggerJSON(data)
	if isSwagger {
		if doc, err = fromSwagger(loader, swagger); err != nil {
			return nil, err
		}
	} else if doc, err = loader.LoadFromData(data); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "load the OpenAPI document: %v", err)
	}
	if doc.OpenAPI == "" {
		return nil, agent.Errorf(agent.CodeInvalid, "not an OpenAPI document: it has no openapi field (3.0.x or 3.1.x)")
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		return nil, agent.Errorf(agent.CodeInvalid, "openapi %q: want an OpenAPI 3 document (3.0 or 3.1)", doc.OpenAPI)
	}
	if err := doc.Validate(ctx, openapi3.DisableExamplesValidation()); err != nil {
		if isSwagger {
			return nil, agent.Errorf(agent.CodeInvalid, "the Swagger 2.0 document, converted to OpenAPI 3, is not valid: %v", err)
		}
		return nil, agent.Errorf(agent.CodeInvalid, "the OpenAPI document is not valid: %v", err)
	}
	d := &Document{doc: doc}
	if err := d.index(); err != nil {
		return nil, err
	}
	return d, nil
}

// LoadOperations narrows src to the operations ids names (none: every
// operation) and what they use (Source.Narrow), then loads and validates
// that. Only what is left is held in memory as kin-openapi's tree, and
// only it is validated.
func LoadOperations(ctx context.Context, src *Source, ids []string) (*Document, error) {
	data, err := src.Narrow(ids)
	if err != nil {
		return nil, err
	}
	d, err := Load(ctx, data)
	if err != nil {
		return nil, err
	}
	if err := d.Keep(ids); err != nil {
		return nil, err
	}
	return d, nil
}

// index lists the document's operations and their parameters.
func (d *Document) index() error {
	d.ops, d.byID = nil, map[string]*Operation{}
	if d.doc.Paths == nil {
		return nil
	}
	paths := d.doc.Paths.Keys()
	slices.Sort(paths)
	for _, path := range paths {
		item := d.doc.Paths.Value(path)
		if item == nil {
			continue
		}
		all := item.Operations()
		for _, m := range sortedMethods(all) {
			op, err := newOperation(d.doc, path, item, m, all[m])
			if err != nil {
				return err
			}
			if _, dup := d.byID[op.ID]; dup {
				return agent.Errorf(agent.CodeInvalid, "two operations are named %q", op.ID)
			}
			d.byID[op.ID] = op
			d.ops = append(d.ops, op)
		}
	}
	return nil
}

func sortedMethods(ops map[string]*openapi3.Operation) []string {
	rank := func(m string) int {
		if i := slices.Index(methods, m); i >= 0 {
			return i
		}
		return len(methods) // any other method after these
	}
	return slices.SortedFunc(maps.Keys(ops), func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
}

func newOperation(doc *openapi3.T, path string, item *openapi3.PathItem, method string, o *openapi3.Operation) (*Operation, error) {
	op := &Operation{ID: o.OperationID, Method: strings.ToUpper(method), Path: path, Summary: o.Summary}
	op.ID = cmp.Or(op.ID, op.Method+" "+path)
	if op.Summary == "" {
		op.Summary, _, _ = strings.Cut(strings.TrimSpace(o.Description), "\n")
	}
	// The operation's parameters override the path item's of the same
	// name and location.
	for _, ref := range item.Parameters {
		if p := ref.Value; p != nil && o.Parameters.GetByInAndName(p.In, p.Name) == nil {
			op.Params = append(op.Params, p)
		}
	}
	for _, ref := range o.Parameters {
		if ref.Value != nil {
			op.Params = append(op.Params, ref.Value)
		}
	}
	names := map[string]int{}
	for _, p := range op.Params {
		names[p.Name]++
	}
	for _, p := range op.Params {
		key := p.Name
		if names[p.Name] > 1 {
			key = p.In + ":" + p.Name
		}
		op.Keys = append(op.Keys, key)
	}
	if o.RequestBody != nil {
		op.Body = o.RequestBody.Value
	}
	// Credentials are added by the caller: the copy the checks see asks for
	// none, so that a document's security requirements are not checked
	// against a request that does not carry them yet.
	checked := *o
	checked.Security = &openapi3.SecurityRequirements{}
	op.route = &routers.Route{Spec: doc, Path: path, PathItem: item, Method: op.Method, Operation: &checked}
	return op, nil
}

// Operations returns the document's operations, by path and method.
func (d *Document) Operations() []*Operation { return d.ops }

// Operation returns the operation with the given id.
func (d *Document) Operation(id string) (*Operation, bool) {
	op, ok := d.byID[id]
	return op, ok
}

// IDs returns the ids of the document's operations, by path and method.
func (d *Document) IDs() []string {
	out := make([]string, len(d.ops))
	for i, op := range d.ops {
		out[i] = op.ID
	}
	return out
}

// Title is the document's info.title.
func (d *Document) Title() string {
	if d.doc.Info == nil {
		return ""
	}
	return d.doc.Info.Title
}

// Keep drops every operation but those named by ids (none: keep all),
// and path items left without operations. An id the document does not
// have is an agent.CodeInvalid error that lists those it has.
func (d *Document) Keep(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	var unknown []string
	for _, id := range ids {
		if _, ok := d.byID[id]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", id))
		}
	}
	if len(unknown) > 0 {
		return agent.Errorf(agent.CodeInvalid, "operations %s: the document has no such operation; it has %s",
			strings.Join(unknown, ", "), ListIDs(d.IDs(), 50))
	}
	for _, op := range d.ops {
		if slices.Contains(ids, op.ID) {
			continue
		}
		item := d.doc.Paths.Value(op.Path)
		item.SetOperation(op.Method, nil)
		if len(item.Operations()) == 0 {
			d.doc.Paths.Delete(op.Path)
		}
	}
	return d.index()
}

// JSON returns the document as JSON, references kept.
func (d *Document) JSON() ([]byte, error) {
	data, err := d.doc.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode the OpenAPI document: %w", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, fmt.Errorf("encode the OpenAPI document: %w", err)
	}
	return buf.Bytes(), nil
}

// BaseURL returns where the operations' paths are appended: server when it
// is given (an absolute http or https URL), else the document's first
// server with its variables at their defaults, resolved against from (the
// URL the document was read from; nil for a document given inline). A
// relative server with nothing to resolve it against is an
// agent.CodeInvalid error. Operation and path item servers are not used.
func (d *Document) BaseURL(server string, from *url.URL) (*url.URL, error) {
	if server != "" {
		return absoluteURL("server", server)
	}
	raw := "/"
	if len(d.doc.Servers) > 0 && d.doc.Servers[0] != nil {
		s := d.doc.Servers[0]
		raw = s.URL
		for name, v := range s.Variables {
			if v != nil {
				raw = strings.ReplaceAll(raw, "{"+name+"}", v.Default)
			}
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "the document's server %q: %v", raw, err)
	}
	if !u.IsAbs() {
		if from == nil {
			return nil, agent.Errorf(agent.CodeInvalid, "the document's server %q is relative and the document was given inline: set server", raw)
		}
		u = from.ResolveReference(u)
	}
	return absoluteURL("the document's server", u.String())
}

// absoluteURL checks an http or https URL without query or fragment and
// returns it with no trailing slash.
func absoluteURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, agent.Errorf(agent.CodeInvalid, "%s %q: %v", what, raw, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, agent.Errorf(agent.CodeInvalid, "%s %q: want an http or https URL", what, raw)
	case u.Host == "":
		return nil, agent.Errorf(agent.CodeInvalid, "%s %q: the URL has no host", what, raw)
	case u.User != nil:
		return nil, agent.Errorf(agent.CodeInvalid, "%s: the URL must not carry credentials; use auth", what)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, agent.Errorf(agent.CodeInvalid, "%s %q: the URL must have no query or fragment", what, raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = strings.TrimSuffix(u.RawPath, "/")
	return u, nil
}

// ListIDs lists operation ids for an error message, at most n of them.
func ListIDs(ids []string, n int) string {
	if len(ids) == 0 {
		return "no operations"
	}
	more := ""
	if len(ids) > n {
		more = fmt.Sprintf(" and %d more", len(ids)-n)
		ids = ids[:n]
	}
	return strings.Join(ids, ", ") + more
}

// errNoOperation is the error of a call of an operation the document does
// not have.
func (d *Document) errNoOperation(id string) error {
	if id == "" {
		return agent.Errorf(agent.CodeInvalid, "operation_id is required; the operations are %s", ListIDs(d.IDs(), 100))
	}
	return agent.Errorf(agent.CodeInvalid, "unknown operation_id %q; the operations are %s", words.Clip(id, 80), ListIDs(d.IDs(), 100))
}

// swaggerJSON reports whether data (JSON or YAML) is a Swagger 2.0
// document, and returns it as JSON.
func swaggerJSON(data []byte) (json.RawMessage, bool) {
	var head struct {
		Swagger any `json:"swagger"`
	}
	if json.Unmarshal(data, &head) == nil {
		return data, head.Swagger != nil
	}
	var v any
	if yaml.Unmarshal(data, &v) != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok || m["swagger"] == nil {
		return nil, false
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return out, true
}

// fromSwagger converts a Swagger 2.0 document to OpenAPI 3, resolving its
// references with loader (which reads nothing outside the document).
func fromSwagger(loader *openapi3.Loader, data json.RawMessage) (*openapi3.T, error) {
	var doc2 openapi2.T
	if err := json.Unmarshal(data, &doc2); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "load the Swagger 2.0 document: %v", err)
	}
	if doc2.Swagger != "2.0" {
		return nil, agent.Errorf(agent.CodeInvalid, "swagger %q: want a Swagger 2.0 document, or OpenAPI 3", doc2.Swagger)
	}
	doc, err := openapi2conv.ToV3WithLoader(&doc2, loader, nil)
	if err != nil {
		if where := swaggerCulprit(&doc2); where != "" {
			return nil, agent.Errorf(agent.CodeInvalid, "the Swagger 2.0 document does not convert to OpenAPI 3: %s: %v", where, err)
		}
		return nil, agent.Errorf(agent.CodeInvalid, "the Swagger 2.0 document does not convert to OpenAPI 3: %v", err)
	}
	return doc, nil
}

// swaggerCulprit names the part of a Swagger 2.0 document that does not
// convert — a security definition, or an operation by method, path and
// id — since the converter's errors name neither: each is converted on
// its own until one fails. "" when none fails alone.
func swaggerCulprit(doc2 *openapi2.T) string {
	for _, name := range slices.Sorted(maps.Keys(doc2.SecurityDefinitions)) {
		if _, err := openapi2conv.ToV3SecurityScheme(doc2.SecurityDefinitions[name]); err != nil {
			return "securityDefinitions." + name
		}
	}
	for _, path := range slices.Sorted(maps.Keys(doc2.Paths)) {
		item := doc2.Paths[path]
		if item == nil {
			continue
		}
		ops := item.Operations()
		for _, method := range slices.Sorted(maps.Keys(ops)) {
			one := *doc2
			one.SecurityDefinitions = nil
			alone := &openapi2.PathItem{Parameters: item.Parameters}
			alone.SetOperation(method, ops[method])
			one.Paths = map[string]*openapi2.PathItem{path: alone}
			if _, err := openapi2conv.ToV3(&one); err != nil {
				where := method + " " + path
				if id := ops[method].OperationID; id != "" {
					where += " (" + id + ")"
				}
				return where
			}
		}
	}
	return ""
}
