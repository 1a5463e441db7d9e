package tools

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/openapi"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// openapi_action's limits and defaults.
const (
	defaultOpenAPIResponseBytes = 1 << 20
	maxOpenAPIResponseBytes     = 10 << 20 // the egress client's cap
	defaultOpenAPITimeout       = 30 * time.Second
	maxOpenAPITimeoutSec        = 30 // the egress client's cap
	// DefaultOpenAPIMaxSpecBytes bounds a document read from spec_url or
	// openapi_url unless the operator says otherwise
	// (Deps.OpenAPIMaxSpecBytes): GitHub's REST description is 13 MB,
	// Stripe's 7 MB as JSON and more as YAML.
	DefaultOpenAPIMaxSpecBytes = 64 << 20
	// EnvOpenAPIMaxSpecBytes is the operator's setting of that bound,
	// which is at most MaxOpenAPISpecBytes.
	EnvOpenAPIMaxSpecBytes = "AGENTFLOW_OPENAPI_MAX_SPEC_BYTES"
	MaxOpenAPISpecBytes    = 1 << 30
	// maxPinnedSpec bounds the document pinned in the tool's config, once
	// narrowed to the granted operations, as it is stored: the config
	// travels with the agent's version, into each turn's LoadAgent
	// result, so keep it well under Temporal's payload limits. A pinned
	// document larger than pinInlineBytes is stored gzip-compressed
	// (spec_gzip): Stripe's operations each narrow to some 300 KB of
	// schemas, which compress to a tenth of that.
	maxPinnedSpec  = 256 << 10
	pinInlineBytes = 64 << 10
	// maxUnzippedSpec bounds a pinned document once uncompressed.
	maxUnzippedSpec = 16 << 20
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

// openapiCredentialSchema is the schema of a credential.
const openapiCredentialSchema = `{"type":"object","additionalProperties":false,"required":["type","secret"],"properties":{` +
	`"type":{"enum":["api_key","bearer","basic"]},` +
	`"in":{"enum":["header","query","cookie"],"description":"api_key: where the key goes (default header)"},` +
	`"name":{"type":"string","minLength":1,"description":"api_key: the header, query parameter or cookie"},` +
	`"secret":{"type":"string","pattern":"^[a-z]+:","description":"a secret reference, e.g. env:CRM_KEY (basic: user:password)"}}}`

const openapiConfigSchema = `{"type":"object","additionalProperties":false,` +
	`"oneOf":[{"required":["spec"]},{"required":["spec_url"]},{"required":["openapi_url"]}],"properties":{` +
	`"spec":{"type":"object","description":"the OpenAPI 3 (or Swagger 2.0) document, inline"},` +
	`"spec_url":{"type":"string","pattern":"^https?://","description":"where to fetch the OpenAPI 3 (or Swagger 2.0) document (JSON or YAML) when the catalog is applied, through the tenant's egress allowlist; the document, narrowed to the operations granted, is pinned with the catalog"},` +
	`"openapi_url":{"type":"object","additionalProperties":false,"required":["allowed_hosts"],"description":"calls name the API's document by URL (their openapi_url argument), fetched when called through the tenant's egress allowlist","properties":{` +
	`"allowed_hosts":{"type":"array","minItems":1,"uniqueItems":true,"items":{"type":"string","minLength":1},"description":"the hosts documents may come from, as egress entries: a host, host:port, *.domain, an IP or a CIDR"},` +
	`"ttl_sec":{"type":"integer","minimum":1,"maximum":86400,"description":"how long a fetched document is used before it is fetched again (default 300)"}}},` +
	`"server":{"type":"string","pattern":"^https?://","description":"the base URL of calls (default: the document's first server); not with openapi_url"},` +
	`"operations":{"type":"array","uniqueItems":true,"items":{"type":"string","minLength":1},"description":"the operation ids the tool may call (default: all)"},` +
	`"methods":{"type":"array","uniqueItems":true,"items":{"enum":["GET","HEAD","POST","PUT","PATCH","DELETE","OPTIONS","TRACE"]},"description":"the HTTP methods of the operations the tool may call (default: all)"},` +
	`"auth":{"type":"array","description":"credentials added to every call, from secret references; not with openapi_url","items":` + openapiCredentialSchema + `},` +
	`"auth_profiles":{"type":"object","description":"named credentials a call may choose with its auth_profile argument, each for the API host it is for","propertyNames":{"pattern":"^[A-Za-z0-9_.-]{1,64}$"},"additionalProperties":{"type":"object","additionalProperties":false,"required":["host","auth"],"properties":{` +
	`"host":{"type":"string","minLength":1,"description":"the API's host (or host:port) the credentials go to, and only it"},` +
	`"auth":{"type":"array","minItems":1,"items":` + openapiCredentialSchema + `}}}},` +
	`"max_response_bytes":{"type":"integer","minimum":1,"maximum":10485760,"description":"the largest answer read (default 1048576)"},` +
	`"timeout_sec":{"type":"integer","minimum":1,"maximum":30,"description":"the longest a call may take (default 30)"}}}`

// openapiConfig is openapi_action's config.
type openapiConfig struct {
	// Spec is the document, inline; Resolve puts the one from SpecURL
	// here, narrowed to Operations.
	Spec    json.RawMessage `json:"spec,omitempty"`
	SpecURL string          `json:"spec_url,omitempty"`
	// SpecGzip is, instead of Spec, a document Resolve pinned
	// compressed (base64 in JSON); catalogs do not write it.
	SpecGzip []byte `json:"spec_gzip,omitempty"`
	// OpenAPIURL, instead of either, lets each call name its document.
	OpenAPIURL   *urlDocuments          `json:"openapi_url,omitempty"`
	Server       string                 `json:"server,omitempty"`
	Operations   []string               `json:"operations,omitempty"`
	Methods      []string               `json:"methods,omitempty"`
	Auth         []authCredential       `json:"auth,omitempty"`
	AuthProfiles map[string]authProfile `json:"auth_profiles,omitempty"`

	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
	TimeoutSec       int   `json:"timeout_sec,omitempty"`
}

// authCredential is a credential added to a call (seed 004 Appendix B).
// The secret is named by reference and resolved when a call is made.
type authCredential struct {
	Type   string `json:"type"`           // api_key | bearer | basic
	In     string `json:"in,omitempty"`   // api_key: header (default) | query | cookie
	Name   string `json:"name,omitempty"` // api_key: the header, parameter or cookie
	Secret string `json:"secret"`         // env:NAME
}

// authProfile is a named set of credentials a call may choose
// (auth_profile), for one API host: a document a call names cannot send
// them anywhere else.
type authProfile struct {
	Host string           `json:"host"`
	Auth []authCredential `json:"auth"`
}

// urlDocuments is what an entry whose calls name their document allows.
type urlDocuments struct {
	AllowedHosts []string `json:"allowed_hosts"`
	TTLSec       int      `json:"ttl_sec,omitempty"`
}

// defaultDocumentTTL is how long a document named by openapi_url is used
// before it is fetched again, unless the entry says.
const defaultDocumentTTL = 5 * time.Minute

func (u *urlDocuments) ttl() time.Duration {
	if u.TTLSec > 0 {
		return time.Duration(u.TTLSec) * time.Second
	}
	return defaultDocumentTTL
}

// OpenAPIAction returns the openapi_action kind (seed 004 §5.4): one tool
// per catalog entry that calls the operations of an HTTP API described by
// an OpenAPI 3 (or Swagger 2.0) document, given inline (spec) or fetched
// when the catalog is applied (spec_url, through the tenant's egress
// allowlist, up to the operator's AGENTFLOW_OPENAPI_MAX_SPEC_BYTES).
// Resolve pins the document, narrowed to the granted operations (by
// operations and methods) and the components they use, in the tool's
// config, and tells the model the operations in the tool's description
// and parameters. An entry with openapi_url instead lets each call name
// its document (openapi_url.go). A call names an operation_id with its
// params and body; both are checked against the document before anything
// is sent (see internal/openapi), credentials from the entry's auth and
// the call's auth_profile are added, and the answer is checked against
// the document too: a difference is reported to the model with the
// answer, not as an error, since the call has been made. Unless the entry
// says otherwise, calls of operations other than GET and HEAD wait for a
// person's approval (with openapi_url, every call, unless methods allows
// only GET and HEAD).
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
		if err := decodeConfig(raw, &cfg, "openapi_action"); err != nil {
			return cfg, err
		}
	}
	bad := func(format string, args ...any) (openapiConfig, error) {
		return cfg, agent.Errorf(agent.CodeInvalid, "openapi_action config: "+format, args...)
	}
	hasSpec := len(bytes.TrimSpace(cfg.Spec)) > 0 && string(bytes.TrimSpace(cfg.Spec)) != "null" || len(cfg.SpecGzip) > 0
	sources := 0
	for _, given := range []bool{hasSpec, cfg.SpecURL != "", cfg.OpenAPIURL != nil} {
		if given {
			sources++
		}
	}
	switch {
	case sources != 1:
		return bad("give the document inline (spec), by URL (spec_url), or let calls name it (openapi_url): one of them")
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
	if u := cfg.OpenAPIURL; u != nil {
		switch {
		case cfg.Server != "":
			return bad("server: calls that name their document (openapi_url) go to the document's own server")
		case len(cfg.Auth) > 0:
			return bad("auth: with openapi_url, give credentials in auth_profiles, each with the host it is for")
		case len(u.AllowedHosts) == 0:
			return bad("openapi_url.allowed_hosts: name the hosts documents may come from")
		case u.TTLSec < 0 || u.TTLSec > 86400:
			return bad("openapi_url.ttl_sec must be from 1 to 86400")
		}
		if _, err := egress.ParsePolicy(u.AllowedHosts); err != nil {
			var ee *egress.EntryError
			if errors.As(err, &ee) {
				return bad("openapi_url.allowed_hosts[%d] %q: %v", ee.Index, ee.Entry, ee.Err)
			}
			return bad("openapi_url.allowed_hosts: %v", err)
		}
	}
	for i, id := range cfg.Operations {
		if strings.TrimSpace(id) == "" {
			return bad("operations[%d] is empty", i)
		}
	}
	for i, m := range cfg.Methods {
		if !slices.Contains(openapiMethods, m) {
			return bad("methods[%d] %q: want one of %s", i, m, strings.Join(openapiMethods, ", "))
		}
	}
	if err := checkCredentials("auth", cfg.Auth); err != nil {
		return bad("%v", err)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthProfiles)) {
		p := cfg.AuthProfiles[name]
		at := fmt.Sprintf("auth_profiles.%s", name)
		switch {
		case !profileName.MatchString(name):
			return bad("auth_profiles: %q: a profile's name is letters, digits, '_', '.' and '-', at most 64", agent.Clip(name, 80))
		case len(p.Auth) == 0:
			return bad("%s.auth: give the profile's credentials", at)
		}
		if err := (egress.Credential{Host: p.Host, Name: "X", Secret: "env:X"}).Check(); err != nil {
			return bad("%s.host: %v", at, err)
		}
		if err := checkCredentials(at+".auth", p.Auth); err != nil {
			return bad("%v", err)
		}
	}
	return cfg, nil
}

// openapiMethods are the methods an entry's methods may name.
var openapiMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"}

var profileName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// checkCredentials checks a list of credentials, at says where it is.
func checkCredentials(at string, list []authCredential) error {
	for i, a := range list {
		switch a.Type {
		case "api_key":
			switch {
			case a.Name == "":
				return fmt.Errorf("%s[%d]: an api_key needs the name of its header, query parameter or cookie", at, i)
			case a.In != "" && a.In != "header" && a.In != "query" && a.In != "cookie":
				return fmt.Errorf("%s[%d].in %q: want header, query or cookie", at, i, a.In)
			}
		case "bearer", "basic":
			if a.In != "" || a.Name != "" {
				return fmt.Errorf("%s[%d]: a %s credential goes in the Authorization header: leave out in and name", at, i, a.Type)
			}
		default:
			return fmt.Errorf("%s[%d].type %q: want api_key, bearer or basic", at, i, a.Type)
		}
		if err := secrets.ValidateRef(a.Secret); err != nil {
			return fmt.Errorf("%s[%d].secret: %w", at, i, err)
		}
		// The host comes from the document or the profile; the rest is
		// checked now.
		if err := a.credential("api.example").Check(); err != nil {
			return fmt.Errorf("%s[%d]: %w", at, i, err)
		}
	}
	return nil
}

// credential is a as the egress client adds it, to the requests to host.
func (a authCredential) credential(host string) egress.Credential {
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
	if cfg.OpenAPIURL != nil {
		// Each call names its document, from these hosts (checked by
		// decodeOpenAPIConfig).
		t.allowed, _ = egress.ParsePolicy(cfg.OpenAPIURL.AllowedHosts)
		return t, nil
	}
	if cfg.SpecURL != "" {
		return t, nil // fetched when the catalog is applied (Resolve)
	}
	data, err := pinnedSpec(cfg)
	var src *openapi.Source
	if err == nil {
		src, err = openapi.ReadBytes(data)
	}
	if err == nil {
		t.doc, t.base, err = loadOpenAPI(context.Background(), cfg, src, nil)
	}
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "openapi_action config: spec: %v", err)
	}
	return t, nil
}

// loadOpenAPI narrows a document to the operations the config grants (by
// operations and methods) and what they use, loads that, and finds its
// base URL.
func loadOpenAPI(ctx context.Context, cfg openapiConfig, src *openapi.Source, from *url.URL) (*openapi.Document, *url.URL, error) {
	ids := cfg.Operations
	if len(cfg.Methods) > 0 {
		outline, err := src.Outline()
		if err != nil {
			return nil, nil, err
		}
		if ids, err = grantedByMethod(cfg, outline); err != nil {
			return nil, nil, err
		}
	}
	doc, err := openapi.LoadOperations(ctx, src, ids)
	if err != nil {
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

// grantedByMethod returns the ids of the operations the config grants,
// methods included: those operations names, each of a method methods
// allows, or without operations every operation of those methods.
func grantedByMethod(cfg openapiConfig, outline []openapi.OperationInfo) ([]string, error) {
	byID := map[string]openapi.OperationInfo{}
	var ids []string
	for _, op := range outline {
		byID[op.ID] = op
		if slices.Contains(cfg.Methods, op.Method) {
			ids = append(ids, op.ID)
		}
	}
	if len(cfg.Operations) == 0 {
		if len(ids) == 0 {
			return nil, agent.Errorf(agent.CodeInvalid, "methods: the document has no %s operation", strings.Join(cfg.Methods, " or "))
		}
		return ids, nil
	}
	for _, id := range cfg.Operations {
		if op, ok := byID[id]; ok && !slices.Contains(cfg.Methods, op.Method) {
			return nil, agent.Errorf(agent.CodeInvalid, "operations: %q is %s %s, and methods allows %s", id, op.Method, op.Path, strings.Join(cfg.Methods, ", "))
		}
	}
	return cfg.Operations, nil // one the document lacks is named when it is narrowed
}

// pinnedSpec is the config's document: inline, or pinned compressed.
func pinnedSpec(cfg openapiConfig) ([]byte, error) {
	if len(cfg.SpecGzip) == 0 {
		return normalizeSpec(cfg.Spec), nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(cfg.SpecGzip))
	if err != nil {
		return nil, fmt.Errorf("spec_gzip: %w", err)
	}
	data, err := readLimited(zr, maxUnzippedSpec)
	if err != nil {
		return nil, fmt.Errorf("spec_gzip: %w", err)
	}
	return data, nil
}

// gzipped is data compressed.
func gzipped(data []byte) []byte {
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	_, _ = zw.Write(data) // into memory: no error
	_ = zw.Close()
	return b.Bytes()
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
// tool with the document, narrowed to those operations and what they
// use, pinned in its config and the operations in its description and
// parameters. An entry whose calls name their document is only described.
func resolveOpenAPI(ctx context.Context, spec agent.Tool, env ResolveEnv) ([]agent.Tool, error) {
	cfg, err := decodeOpenAPIConfig(spec.Config)
	if err != nil {
		return nil, err
	}
	if cfg.OpenAPIURL != nil {
		return []agent.Tool{resolveURLEntry(spec, cfg)}, nil
	}
	var src *openapi.Source
	what := "spec"
	var from *url.URL
	if cfg.SpecURL != "" {
		what = "spec_url " + shownURL(cfg.SpecURL)
		if src, err = fetchDocument(ctx, env.HTTP, cfg.SpecURL, env.Deps.openAPIMaxSpecBytes(), what); err != nil {
			if agent.IsCode(err, agent.CodeUnavailable) && env.AllowUnreachable {
				return nil, nil
			}
			return nil, err
		}
		from, _ = url.Parse(cfg.SpecURL) // checked by decodeOpenAPIConfig
	} else {
		data, err := pinnedSpec(cfg)
		if err == nil {
			src, err = openapi.ReadBytes(data)
		}
		if err != nil {
			return nil, agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
		}
	}
	doc, base, err := loadOpenAPI(ctx, cfg, src, from)
	if err != nil {
		return nil, agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
	}
	if err := checkProfileHosts(cfg, base); err != nil {
		return nil, err
	}
	pinned, err := doc.JSON()
	if err != nil {
		return nil, err
	}
	cfg.Spec, cfg.SpecGzip, cfg.SpecURL, cfg.Server = pinned, nil, "", base.String()
	if len(pinned) > pinInlineBytes {
		cfg.Spec, cfg.SpecGzip = nil, gzipped(pinned)
		if stored := base64.StdEncoding.EncodedLen(len(cfg.SpecGzip)); stored > maxPinnedSpec {
			return nil, agent.Errorf(agent.CodeInvalid, "%s: the document is %d bytes once narrowed to the granted operations, %d as pinned (compressed); the limit is %d: grant fewer with operations, or let calls name the document (openapi_url)",
				what, len(pinned), stored, maxPinnedSpec)
		}
	}
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
	out.Description = doc.Description(intro, marked, "Needs a person's approval.") + profilesText(cfg)
	if bytes.Equal(spec.Parameters, json.RawMessage(openapiParameters)) {
		out.Parameters = withProfiles(doc.Parameters(), cfg)
	}
	return []agent.Tool{out}, nil
}

// checkProfileHosts checks, for an entry with a pinned document, that
// each auth profile is for the API's host: credentials go to their own
// host only, so one for another host would be a profile that never works.
func checkProfileHosts(cfg openapiConfig, base *url.URL) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthProfiles)) {
		p := cfg.AuthProfiles[name]
		if !p.carries(base) {
			return agent.Errorf(agent.CodeInvalid, "auth_profiles.%s.host %q: the API is at %s", name, p.Host, egress.HostPort(base))
		}
	}
	return nil
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

// fetchDocument reads an API's document from raw through client (the
// tenant's egress), at most limit bytes of it; what names it in errors.
// The document is streamed into an openapi.Source, never held whole.
func fetchDocument(ctx context.Context, client *http.Client, raw string, limit int64, what string) (*openapi.Source, error) {
	if client == nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: no egress is configured", what)
	}
	ctx, cancel := context.WithTimeout(ctx, defaultOpenAPITimeout)
	defer cancel()
	// The egress policy's cap on answers bounds what a call holds; a
	// document is narrowed as it is read, and bounded by the operator's
	// limit for documents instead.
	req, err := http.NewRequestWithContext(egress.Streamed(ctx, limit), http.MethodGet, raw, nil)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %v", what, err)
	}
	req.Header.Set("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return nil, documentError(what, limit, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := agent.CodeInvalid
		if retryable(resp.StatusCode) {
			code = agent.CodeUnavailable
		}
		return nil, agent.Errorf(code, "%s answered %s", what, resp.Status)
	}
	src, err := openapi.Read(resp.Body, limit)
	if err != nil {
		return nil, documentError(what, limit, err)
	}
	return src, nil
}

// documentError says what went wrong fetching a document: too large for
// the operator's limit, not a document, or not fetched.
func documentError(what string, limit int64, err error) error {
	var big *openapi.TooLargeError
	var bigAnswer *egress.TooLargeError
	switch {
	case errors.As(err, &big) && big.YAML:
		return agent.Errorf(agent.CodeInvalid, "%s: %v, twice the operator's limit (%s)", what, big, EnvOpenAPIMaxSpecBytes)
	case errors.As(err, &big), errors.As(err, &bigAnswer):
		return agent.Errorf(agent.CodeInvalid, "%s: the document is larger than %d bytes, the operator's limit (%s)", what, limit, EnvOpenAPIMaxSpecBytes)
	case agent.IsCode(err, agent.CodeInvalid) && !isTransport(err):
		return agent.WithCode(agent.CodeInvalid, fmt.Errorf("%s: %w", what, err))
	}
	return sendError(what, err)
}

// isTransport reports whether err came from sending a request (the
// egress policy's refusals among them) rather than from reading a document.
func isTransport(err error) bool {
	var ue *url.Error
	return errors.As(err, &ue)
}

// openapiTool is a built openapi_action tool.
type openapiTool struct {
	cfg      openapiConfig
	deps     Deps
	doc      *openapi.Document // nil until the catalog is applied (spec_url), or with openapi_url
	base     *url.URL
	allowed  egress.Policy // openapi_url.allowed_hosts
	timeout  time.Duration
	maxBytes int64
}

// arguments are the arguments the tool's calls take beside operation_id,
// params and body.
func (t *openapiTool) arguments() []string {
	var also []string
	if t.cfg.OpenAPIURL != nil {
		also = append(also, openapi.ArgOpenAPIURL)
	}
	if len(t.cfg.AuthProfiles) > 0 {
		also = append(also, openapi.ArgAuthProfile)
	}
	return also
}

func (t *openapiTool) Run(ctx context.Context, call Call) (Output, error) {
	args, err := openapi.DecodeArgs(call.Args, t.arguments()...)
	if err != nil {
		return Output{}, err
	}
	var profile *authProfile
	if args.AuthProfile != "" {
		p, ok := t.cfg.AuthProfiles[args.AuthProfile]
		if !ok {
			return Output{}, agent.Errorf(agent.CodeInvalid, "auth_profile %q: this tool's profiles are %s", agent.Clip(args.AuthProfile, 80),
				strings.Join(slices.Sorted(maps.Keys(t.cfg.AuthProfiles)), ", "))
		}
		profile = &p
	}
	doc, base := t.doc, t.base
	if t.cfg.OpenAPIURL != nil {
		if doc, base, err = t.document(ctx, call, args); err != nil {
			return Output{}, err
		}
	} else if doc == nil {
		return Output{}, agent.Errorf(agent.CodeInvalid, "the API's document was never fetched: the catalog must be applied again")
	}
	return t.send(ctx, call, doc, base, profile, args)
}

// send makes the call args names of doc's operation, at base, with the
// entry's credentials and profile's.
func (t *openapiTool) send(ctx context.Context, call Call, doc *openapi.Document, base *url.URL, profile *authProfile, args openapi.Args) (Output, error) {
	c, err := doc.NewRequest(ctx, base, args)
	if err != nil {
		return Output{}, err
	}
	op, req := c.Op, c.Request
	shown := op.Method + " " + shownURL(req.URL.String())
	// The egress client adds the credentials to the requests to their own
	// host only, on their way out: no request object, message or redirect
	// of ours holds them.
	creds, err := t.credentials(base, profile)
	if err != nil {
		return Output{}, err
	}
	if profile != nil && !creds.Carries(req.URL) {
		return Output{}, agent.Errorf(agent.CodeInvalid, "auth_profile %q is for %s, and %s is at %s: its credentials go nowhere else",
			args.AuthProfile, profile.Host, op.ID, egress.HostPort(req.URL))
	}
	if err := creds.Resolve(ctx); err != nil {
		return Output{}, fmt.Errorf("auth: %w", err) // before anything is sent
	}
	if !op.Safe() && call.CallID != "" && req.Header.Get("Idempotency-Key") == "" {
		// A retried attempt sends the same key: an API that honours it
		// does not act twice on one call.
		req.Header.Set("Idempotency-Key", CallKey(call.TenantID, call.JobID, call.CallID))
	}
	if op.DeclaresIdempotencyKey() {
		// The API deduplicates by the key, the same on every attempt:
		// a retry sends again (the delivery rule, delivery.go).
		ctx = effects.IdempotentHere(ctx)
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
		telemetry.Logger(ctx, t.deps.Logger).Warn("answer does not match the OpenAPI document",
			zap.String("operation", op.ID), zap.String("problem", mismatch))
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

// credentials are the entry's auth, for the API's host and port, and the
// profile's, for its own host.
func (t *openapiTool) credentials(base *url.URL, profile *authProfile) (*egress.Credentials, error) {
	host := egress.HostPort(base)
	var list []egress.Credential
	for _, a := range t.cfg.Auth {
		list = append(list, a.credential(host))
	}
	if profile != nil {
		for _, a := range profile.Auth {
			list = append(list, a.credential(profile.Host))
		}
	}
	creds, err := egress.NewCredentials(t.deps.Secrets, list)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "openapi_action config: auth: %v", err)
	}
	return creds, nil
}

// carries reports whether the profile's credentials go with a request
// to u, by the egress client's rule.
func (p authProfile) carries(u *url.URL) bool {
	var list []egress.Credential
	for _, a := range p.Auth {
		list = append(list, a.credential(p.Host))
	}
	creds, err := egress.NewCredentials(nil, list)
	return err == nil && creds.Carries(u)
}

// sendError classifies an error of sending a request or reading its
// answer: a refusal of the egress policy is the catalog's (or the
// model's) to fix; a timeout or a failed connection may pass.
func sendError(what string, err error) error {
	var held *effects.MaybeSentError
	if errors.As(err, &held) {
		return held // the runtime reports it as the call's unknown outcome
	}
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
	return agent.Clip(s, 1000)
}
