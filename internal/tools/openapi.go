package tools

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/openapi"
	"github.com/agentflow/agentflow/internal/secrets"
)

// openapi_action's limits and defaults.
const (
	defaultOpenAPIResponseBytes = 1 << 20
	maxOpenAPIResponseBytes     = 10 << 20 // the egress client's cap
	defaultOpenAPITimeout       = 30 * time.Second
	maxOpenAPITimeoutSec        = 30 // the egress client's cap
	// maxSpecBytes bounds a document fetched from spec_url.
	maxSpecBytes = 4 << 20
	// maxPinnedSpec bounds the document pinned in the tool's config, once
	// narrowed to the granted operations. The config travels with the
	// agent's version, into each turn's LoadAgent result: keep it well
	// under Temporal's payload limits.
	maxPinnedSpec = 256 << 10
)

// openapiDescription is the kind's description; Resolve replaces it with
// one that lists the document's operations.
const openapiDescription = "Call operations of an HTTP API described by an OpenAPI document."

// openapiApproval is the kind's approval policy: every call needs approval
// (the policy is true; the comment is for people reading it). Resolve
// replaces it, in an entry that kept it, with a policy over the document's
// operations: those other than GET and HEAD need approval.
const openapiApproval = "true // openapi_action: calls of operations other than GET and HEAD, from the document when the catalog is applied"

const openapiParameters = `{"type":"object","additionalProperties":false,"required":["operation_id"],"properties":{` +
	`"operation_id":{"type":"string","description":"the operation to call"},` +
	`"params":{"type":"object","description":"the operation's parameters by name (path, query, header and cookie parameters)"},` +
	`"body":{"description":"the request body, for operations that take one"}}}`

const openapiConfigSchema = `{"type":"object","additionalProperties":false,` +
	`"oneOf":[{"required":["spec"]},{"required":["spec_url"]}],"properties":{` +
	`"spec":{"type":"object","description":"the OpenAPI 3 document, inline"},` +
	`"spec_url":{"type":"string","pattern":"^https?://","description":"where to fetch the OpenAPI 3 document (JSON or YAML) when the catalog is applied, through the tenant's egress allowlist; the document is pinned with the catalog"},` +
	`"server":{"type":"string","pattern":"^https?://","description":"the base URL of calls (default: the document's first server)"},` +
	`"operations":{"type":"array","uniqueItems":true,"items":{"type":"string","minLength":1},"description":"the operation ids the tool may call (default: all)"},` +
	`"auth":{"type":"array","description":"credentials added to every call, from secret references","items":{"type":"object","additionalProperties":false,"required":["type","secret"],"properties":{` +
	`"type":{"enum":["api_key","bearer","basic"]},` +
	`"in":{"enum":["header","query","cookie"],"description":"api_key: where the key goes (default header)"},` +
	`"name":{"type":"string","minLength":1,"description":"api_key: the header, query parameter or cookie"},` +
	`"secret":{"type":"string","pattern":"^[a-z]+:","description":"a secret reference, e.g. env:CRM_KEY (basic: user:password)"}}}},` +
	`"max_response_bytes":{"type":"integer","minimum":1,"maximum":10485760,"description":"the largest answer read (default 1048576)"},` +
	`"timeout_sec":{"type":"integer","minimum":1,"maximum":30,"description":"the longest a call may take (default 30)"}}}`

// openapiConfig is openapi_action's config.
type openapiConfig struct {
	// Spec is the document, inline; Resolve puts the one from SpecURL
	// here, narrowed to Operations.
	Spec       json.RawMessage `json:"spec,omitempty"`
	SpecURL    string          `json:"spec_url,omitempty"`
	Server     string          `json:"server,omitempty"`
	Operations []string        `json:"operations,omitempty"`
	Auth       []authProfile   `json:"auth,omitempty"`

	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	TimeoutSec       int   `json:"timeout_sec,omitempty"`
}

// authProfile adds a credential to every call (seed 004 Appendix B). The
// secret is named by reference and resolved when a call is made.
type authProfile struct {
	Type   string `json:"type"`           // api_key | bearer | basic
	In     string `json:"in,omitempty"`   // api_key: header (default) | query | cookie
	Name   string `json:"name,omitempty"` // api_key: the header, parameter or cookie
	Secret string `json:"secret"`         // env:NAME
}

// OpenAPIAction returns the openapi_action kind (seed 004 §5.4): one tool
// per catalog entry that calls the operations of an HTTP API described by
// an OpenAPI 3 document, given inline (spec) or fetched when the catalog
// is applied (spec_url, through the tenant's egress allowlist). Resolve
// pins the document, narrowed to the granted operations, in the tool's
// config, and tells the model the operations in the tool's description
// and parameters. A call names an operation_id with its params and body;
// both are checked against the document before anything is sent (see
// internal/openapi), credentials from the entry's auth are added, and the
// answer is checked against the document too: a difference is reported
// to the model with the answer, not as an error, since the call has been
// made. Unless the entry says otherwise, calls of operations other than
// GET and HEAD wait for a person's approval.
func OpenAPIAction() Kind {
	return Kind{
		Name:        "openapi_action",
		Description: openapiDescription,
		Parameters:  json.RawMessage(openapiParameters),
		Config:      json.RawMessage(openapiConfigSchema),
		Build:       buildOpenAPI,
		Approval:    openapiApproval,
		// Resolve turns the default into the document's own rule: calls of
		// operations other than GET and HEAD.
		RefinesApproval: true,
		Resolve:         resolveOpenAPI,
	}
}

// decodeOpenAPIConfig reads and checks a config, without I/O.
func decodeOpenAPIConfig(raw json.RawMessage) (openapiConfig, error) {
	var cfg openapiConfig
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			return cfg, agent.Errorf(agent.CodeInvalid, "openapi_action config: %v", err)
		}
	}
	bad := func(format string, args ...any) (openapiConfig, error) {
		return cfg, agent.Errorf(agent.CodeInvalid, "openapi_action config: "+format, args...)
	}
	hasSpec := len(bytes.TrimSpace(cfg.Spec)) > 0 && string(bytes.TrimSpace(cfg.Spec)) != "null"
	switch {
	case hasSpec == (cfg.SpecURL != ""):
		return bad("give the document inline (spec) or by URL (spec_url), one of them")
	case cfg.MaxResponseBytes < 0 || cfg.MaxResponseBytes > maxOpenAPIResponseBytes:
		return bad("max_response_bytes must be from 1 to %d", maxOpenAPIResponseBytes)
	case cfg.TimeoutSec < 0 || cfg.TimeoutSec > maxOpenAPITimeoutSec:
		return bad("timeout_sec must be from 1 to %d (the egress time limit)", maxOpenAPITimeoutSec)
	}
	if cfg.SpecURL != "" {
		if err := checkHTTPURL(cfg.SpecURL); err != nil {
			return bad("spec_url: %v", err)
		}
	}
	if cfg.Server != "" {
		if err := checkHTTPURL(cfg.Server); err != nil {
			return bad("server: %v", err)
		}
	}
	for i, id := range cfg.Operations {
		if strings.TrimSpace(id) == "" {
			return bad("operations[%d] is empty", i)
		}
	}
	for i, a := range cfg.Auth {
		switch a.Type {
		case "api_key":
			switch {
			case a.Name == "":
				return bad("auth[%d]: an api_key needs the name of its header, query parameter or cookie", i)
			case a.In != "" && a.In != "header" && a.In != "query" && a.In != "cookie":
				return bad("auth[%d].in %q: want header, query or cookie", i, a.In)
			}
		case "bearer", "basic":
			if a.In != "" || a.Name != "" {
				return bad("auth[%d]: a %s credential goes in the Authorization header: leave out in and name", i, a.Type)
			}
		default:
			return bad("auth[%d].type %q: want api_key, bearer or basic", i, a.Type)
		}
		if err := secrets.ValidateRef(a.Secret); err != nil {
			return bad("auth[%d].secret: %v", i, err)
		}
		// The host comes from the document; the rest is checked now.
		if err := a.credential("api.example").Check(); err != nil {
			return bad("auth[%d]: %v", i, err)
		}
	}
	return cfg, nil
}

// credential is a as the egress client adds it, to the requests to host.
func (a authProfile) credential(host string) egress.Credential {
	c := egress.Credential{Host: host, Secret: a.Secret}
	switch a.Type {
	case "bearer":
		c.In, c.Name, c.Prefix = egress.InHeader, "Authorization", "Bearer "
	case "basic":
		c.In = egress.InBasic
	default:
		c.In, c.Name = egress.Place(cmp.Or(a.In, "header")), a.Name
	}
	return c
}

// checkHTTPURL checks an absolute http or https URL without credentials.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http or https URL", raw)
	case u.Host == "":
		return fmt.Errorf("%q: the URL has no host", raw)
	case u.User != nil:
		return errors.New("the URL must not carry credentials: use auth")
	}
	return nil
}

func buildOpenAPI(spec agent.Tool, deps Deps) (Tool, error) {
	cfg, err := decodeOpenAPIConfig(spec.Config)
	if err != nil {
		return nil, err
	}
	t := &openapiTool{cfg: cfg, deps: deps, timeout: defaultOpenAPITimeout, maxBytes: defaultOpenAPIResponseBytes}
	if cfg.TimeoutSec > 0 {
		t.timeout = time.Duration(cfg.TimeoutSec) * time.Second
	}
	if cfg.MaxResponseBytes > 0 {
		t.maxBytes = cfg.MaxResponseBytes
	}
	if cfg.SpecURL != "" {
		return t, nil // fetched when the catalog is applied (Resolve)
	}
	if t.doc, t.base, err = loadOpenAPI(context.Background(), cfg, normalizeSpec(cfg.Spec), nil); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "openapi_action config: spec: %v", err)
	}
	return t, nil
}

// loadOpenAPI loads a document, narrows it to the config's operations and
// finds its base URL.
func loadOpenAPI(ctx context.Context, cfg openapiConfig, data []byte, from *url.URL) (*openapi.Document, *url.URL, error) {
	doc, err := openapi.Load(ctx, data)
	if err != nil {
		return nil, nil, err
	}
	if err := doc.Keep(cfg.Operations); err != nil {
		return nil, nil, err
	}
	if len(doc.Operations()) == 0 {
		return nil, nil, agent.Errorf(agent.CodeInvalid, "the document has no operations")
	}
	base, err := doc.BaseURL(cfg.Server, from)
	if err != nil {
		return nil, nil, err
	}
	return doc, base, nil
}

// normalizeSpec reads `openapi: 3.1` of an inline YAML document, which
// YAML makes a number, as the string it stands for.
func normalizeSpec(spec json.RawMessage) json.RawMessage {
	var top map[string]json.RawMessage
	if json.Unmarshal(spec, &top) != nil {
		return spec
	}
	v, ok := top["openapi"]
	if !ok || len(v) == 0 || v[0] == '"' {
		return spec
	}
	var n json.Number
	if json.Unmarshal(v, &n) != nil {
		return spec
	}
	version := n.String()
	if !strings.Contains(version, ".") {
		version += ".0" // `openapi: 3.0` reads as 3
	}
	top["openapi"], _ = json.Marshal(version)
	out, err := json.Marshal(top)
	if err != nil {
		return spec
	}
	return out
}

// resolveOpenAPI fetches the entry's document when it is given by URL,
// checks it and the operations the entry grants, and returns the entry's
// tool with the document pinned in its config and the operations in its
// description and parameters.
func resolveOpenAPI(ctx context.Context, spec agent.Tool, env ResolveEnv) ([]agent.Tool, error) {
	cfg, err := decodeOpenAPIConfig(spec.Config)
	if err != nil {
		return nil, err
	}
	data, what := normalizeSpec(cfg.Spec), "spec"
	var from *url.URL
	if cfg.SpecURL != "" {
		what = "spec_url " + shownURL(cfg.SpecURL)
		if data, err = fetchSpec(ctx, env, cfg.SpecURL); err != nil {
			if agent.IsCode(err, agent.CodeUnavailable) && env.AllowUnreachable {
				return nil, nil
			}
			return nil, err
		}
		from, _ = url.Parse(cfg.SpecURL) // checked by decodeOpenAPIConfig
	}
	doc, base, err := loadOpenAPI(ctx, cfg, data, from)
	if err != nil {
		return nil, agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
	}
	pinned, err := doc.JSON()
	if err != nil {
		return nil, err
	}
	if len(pinned) > maxPinnedSpec {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: the document is %d bytes once narrowed to the granted operations; the limit is %d: grant fewer with operations", what, len(pinned), maxPinnedSpec)
	}
	cfg.Spec, cfg.SpecURL, cfg.Server = pinned, "", base.String()
	out := spec
	if out.Config, err = json.Marshal(cfg); err != nil {
		return nil, fmt.Errorf("encode the config: %w", err)
	}
	intro := spec.Description
	if intro == openapiDescription {
		intro = doc.Title()
	}
	var marked func(*openapi.Operation) bool
	if spec.Approval == openapiApproval {
		out.Approval = operationsPolicy(doc)
		marked = func(op *openapi.Operation) bool { return !op.Safe() }
	}
	out.Description = doc.Description(intro, marked, "Needs a person's approval.")
	if bytes.Equal(spec.Parameters, json.RawMessage(openapiParameters)) {
		out.Parameters = doc.Parameters()
	}
	return []agent.Tool{out}, nil
}

// operationsPolicy is the approval policy of a document's calls: those of
// operations other than GET and HEAD need approval. A call of an operation
// the document does not have is refused when it runs.
func operationsPolicy(doc *openapi.Document) string {
	var ids []string
	for _, op := range doc.Operations() {
		if !op.Safe() {
			// JSON string escapes are CEL string escapes.
			q, _ := json.Marshal(op.ID)
			ids = append(ids, string(q))
		}
	}
	if len(ids) == 0 {
		return agent.ApprovalNever
	}
	return "has(args.operation_id) && args.operation_id in [" + strings.Join(ids, ", ") + "]"
}

// fetchSpec reads a document from spec_url through the tenant's egress.
func fetchSpec(ctx context.Context, env ResolveEnv, raw string) ([]byte, error) {
	shown := shownURL(raw)
	if env.HTTP == nil {
		return nil, agent.Errorf(agent.CodeInvalid, "spec_url %s: no egress is configured", shown)
	}
	ctx, cancel := context.WithTimeout(ctx, defaultOpenAPITimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "spec_url %s: %v", shown, err)
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	resp, err := env.HTTP.Do(req)
	if err != nil {
		return nil, sendError("spec_url "+shown, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := agent.CodeInvalid
		if retryable(resp.StatusCode) {
			code = agent.CodeUnavailable
		}
		return nil, agent.Errorf(code, "spec_url %s answered %s", shown, resp.Status)
	}
	data, err := readLimited(resp.Body, maxSpecBytes)
	if errors.Is(err, errTooLarge) {
		return nil, agent.Errorf(agent.CodeInvalid, "spec_url %s: the document is larger than %d bytes", shown, maxSpecBytes)
	}
	if err != nil {
		return nil, sendError("spec_url "+shown, err)
	}
	return data, nil
}

// openapiTool is a built openapi_action tool.
type openapiTool struct {
	cfg      openapiConfig
	deps     Deps
	doc      *openapi.Document // nil until the catalog is applied (spec_url)
	base     *url.URL
	timeout  time.Duration
	maxBytes int64
}

func (t *openapiTool) Run(ctx context.Context, call Call) (Output, error) {
	if t.doc == nil {
		return Output{}, agent.Errorf(agent.CodeInvalid, "the API's document was never fetched: the catalog must be applied again")
	}
	args, err := openapi.DecodeArgs(call.Args)
	if err != nil {
		return Output{}, err
	}
	c, err := t.doc.NewRequest(ctx, t.base, args)
	if err != nil {
		return Output{}, err
	}
	op, req := c.Op, c.Request
	shown := op.Method + " " + shownURL(req.URL.String())
	// The egress client adds the credentials to the requests to the API's
	// host only, on their way out: no request object, message or redirect
	// of ours holds them.
	creds, err := t.credentials()
	if err != nil {
		return Output{}, err
	}
	if err := creds.Resolve(ctx); err != nil {
		return Output{}, fmt.Errorf("auth: %w", err) // before anything is sent
	}
	if !op.Safe() && call.CallID != "" && req.Header.Get("Idempotency-Key") == "" {
		// A retried attempt sends the same key: an API that honours it
		// does not act twice on one call.
		sum := sha256.Sum256([]byte(call.TenantID + "\x00" + call.JobID + "\x00" + call.CallID))
		req.Header.Set("Idempotency-Key", hex.EncodeToString(sum[:16]))
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req = req.WithContext(ctx)
	call.Progress("calling " + op.ID + ": " + shown)
	resp, err := creds.Client(call.HTTP).Do(req)
	if err != nil {
		var redirect *egress.RedirectError
		switch {
		case parent.Err() != nil:
			return Output{}, parent.Err() // the call was cancelled: not the API's doing
		case errors.As(err, &redirect):
			return Output{}, agent.Errorf(agent.CodeInvalid, "%s answered %s, a redirect to %s, which the tool does not follow to another host", op.ID, redirect.Status, redirect.To)
		}
		return Output{}, sendError(op.ID+": "+shown, err)
	}
	defer resp.Body.Close()
	body, err := readLimited(resp.Body, t.maxBytes)
	if errors.Is(err, errTooLarge) {
		return Output{}, agent.Errorf(agent.CodeInvalid, "%s: the answer is larger than %d bytes (max_response_bytes): ask for less, with a filter or a page", op.ID, t.maxBytes)
	}
	if err != nil {
		return Output{}, sendError(op.ID+": "+shown, err)
	}
	status := fmt.Sprintf("%s answered %s", op.ID, resp.Status)
	switch {
	case resp.StatusCode >= 300 && resp.StatusCode <= 399:
		// Not followed by the client: no Location, or not a redirect (304).
		return Output{}, agent.Errorf(agent.CodeInvalid, "%s, which the tool cannot follow: %s", status, snippet(body))
	case retryable(resp.StatusCode):
		return Output{}, agent.Errorf(agent.CodeUnavailable, "%s: %s", status, snippet(body))
	case resp.StatusCode >= 400:
		// The model reads what the API said and may call again.
		return Output{}, agent.Errorf(agent.CodeInvalid, "%s: %s", status, snippet(body))
	}
	mismatch := c.CheckResponse(ctx, resp.StatusCode, resp.Header, body)
	if mismatch != "" {
		t.deps.Logger.Warn("answer does not match the OpenAPI document",
			zap.String("tenant", call.TenantID), zap.String("operation", op.ID), zap.String("problem", mismatch))
	}
	return answer(status, resp.Header.Get("Content-Type"), body, mismatch), nil
}

// answer is what the model reads of a successful call: JSON as data,
// text as text, other media types only named.
func answer(status, contentType string, body []byte, mismatch string) Output {
	var out Output
	mt, _, _ := mime.ParseMediaType(contentType)
	trimmed := bytes.TrimSpace(body)
	switch {
	case len(trimmed) == 0:
		out.Text = status + "."
	case (mt == "" || mt == "application/json" || strings.HasSuffix(mt, "+json")) && json.Valid(trimmed):
		var buf bytes.Buffer
		if json.Compact(&buf, trimmed) == nil {
			trimmed = buf.Bytes()
		}
		out.Text, out.Data, out.ShowData = status+": "+jsonShape(trimmed)+".", trimmed, true
	case mt == "" || strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+xml") || mt == "application/xml":
		out.Text = status + " (" + cmp.Or(mt, "text") + "):\n" + string(body)
	default:
		out.Text = fmt.Sprintf("%s with %d bytes of %s, which the tool does not pass on.", status, len(body), mt)
	}
	if mismatch != "" {
		out.Text += "\nNote: the answer does not match the API's document: " + mismatch
	}
	return out
}

// jsonShape says what a JSON document is: "a list of 3 items".
func jsonShape(data []byte) string {
	switch data[0] {
	case '[':
		var items []json.RawMessage
		if json.Unmarshal(data, &items) == nil {
			return count(len(items), "item") + " in a list"
		}
	case '{':
		var fields map[string]json.RawMessage
		if json.Unmarshal(data, &fields) == nil {
			return "an object of " + count(len(fields), "field")
		}
	}
	return "a JSON value"
}

// credentials are the entry's auth, for the API's host and port.
func (t *openapiTool) credentials() (*egress.Credentials, error) {
	host := egress.HostPort(t.base)
	list := make([]egress.Credential, len(t.cfg.Auth))
	for i, a := range t.cfg.Auth {
		list[i] = a.credential(host)
	}
	creds, err := egress.NewCredentials(t.deps.Secrets, list)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "openapi_action config: auth: %v", err)
	}
	return creds, nil
}

// sendError classifies an error of sending a request or reading its
// answer: a refusal of the egress policy is the catalog's (or the
// model's) to fix; a timeout or a failed connection may pass.
func sendError(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its message repeats the URL, query and all
	}
	var ae *agent.Error
	if errors.As(err, &ae) {
		return &agent.Error{Code: ae.Code, Message: what + ": " + ae.Message}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return agent.Errorf(agent.CodeUnavailable, "%s: no answer in time", what)
	}
	return agent.Errorf(agent.CodeUnavailable, "%s: %v", what, err)
}

// retryable reports whether a status says to try again later.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

var errTooLarge = errors.New("too large")

// readLimited reads at most limit bytes; more is errTooLarge.
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// shownURL is a URL for messages: no user info, no query (where keys go).
func shownURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL that cannot be read)"
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment = nil, "", false, ""
	return u.String()
}

// snippet is the start of an answer, for a message.
func snippet(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if s == "" {
		return "(no body)"
	}
	return clip(s, 1000)
}
