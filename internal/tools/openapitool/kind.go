package openapitool

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/openapi"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// openapi_action's limits and defaults.
const (
	defaultOpenAPIResponseBytes = 1 << 20
	maxOpenAPIResponseBytes     = 10 << 20 // the egress client's cap
	defaultOpenAPITimeout       = 30 * time.Second
	maxOpenAPITimeoutSec        = 30 // the egress client's cap
	// DefaultMaxSpecBytes bounds a document read from spec_url or
	// openapi_url unless the operator says otherwise
	// (kind.Deps.OpenAPIMaxSpecBytes): GitHub's REST description is
	// 13 MB, Stripe's 7 MB as JSON and more as YAML.
	DefaultMaxSpecBytes = 64 << 20
	// EnvMaxSpecBytes is the operator's setting of that bound, which is
	// at most MaxSpecBytes.
	EnvMaxSpecBytes = "AGENTFLOW_OPENAPI_MAX_SPEC_BYTES"
	MaxSpecBytes    = 1 << 30
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
// its document (url.go). A call names an operation_id with its
// params and body; both are checked against the document before anything
// is sent (see internal/openapi), credentials from the entry's auth and
// the call's auth_profile are added, and the answer is checked against
// the document too: a difference is reported to the model with the
// answer, not as an error, since the call has been made. Unless the entry
// says otherwise, calls of operations other than GET and HEAD wait for a
// person's approval (with openapi_url, every call, unless methods allows
// only GET and HEAD).
//
// The documents calls name by URL are kept in a cache of the kind's own:
// one per OpenAPIAction, which the tools built from it share.
func OpenAPIAction() kind.Kind {
	docs := newDocuments()
	return kind.Kind{
		Name:        "openapi_action",
		Description: openapiDescription,
		Parameters:  json.RawMessage(openapiParameters),
		Config:      json.RawMessage(openapiConfigSchema),
		Build: func(spec agent.Tool, deps kind.Deps) (kind.Tool, error) {
			return build(spec, deps, docs)
		},
		Approval: openapiApproval,
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
		if err := kind.DecodeConfig(raw, &cfg, "openapi_action"); err != nil {
			return cfg, err
		}
	}
	bad := func(format string, args ...any) (openapiConfig, error) {
		return cfg, configError(format, args...)
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
		if err := checkURLDocuments(cfg, u); err != nil {
			return cfg, err
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
	if err := checkAuthProfiles(cfg.AuthProfiles); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// configError is an error of an openapi_action config, for the catalog.
func configError(format string, args ...any) error {
	return agent.Errorf(agent.CodeInvalid, "openapi_action config: "+format, args...)
}

// checkURLDocuments checks the openapi_url of cfg, an entry whose calls
// name their document, and what goes with it.
func checkURLDocuments(cfg openapiConfig, u *urlDocuments) error {
	switch {
	case cfg.Server != "":
		return configError("server: calls that name their document (openapi_url) go to the document's own server")
	case len(cfg.Auth) > 0:
		return configError("auth: with openapi_url, give credentials in auth_profiles, each with the host it is for")
	case len(u.AllowedHosts) == 0:
		return configError("openapi_url.allowed_hosts: name the hosts documents may come from")
	case u.TTLSec < 0 || u.TTLSec > 86400:
		return configError("openapi_url.ttl_sec must be from 1 to 86400")
	}
	if _, err := egress.ParsePolicy(u.AllowedHosts); err != nil {
		var ee *egress.EntryError
		if errors.As(err, &ee) {
			return configError("openapi_url.allowed_hosts[%d] %q: %v", ee.Index, ee.Entry, ee.Err)
		}
		return configError("openapi_url.allowed_hosts: %v", err)
	}
	return nil
}

// openapiMethods are the methods an entry's methods may name.
var openapiMethods = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"}

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

// build makes an entry's tool, which keeps the documents its calls name
// by URL in docs.
func build(spec agent.Tool, deps kind.Deps, docs *documents) (kind.Tool, error) {
	cfg, err := decodeOpenAPIConfig(spec.Config)
	if err != nil {
		return nil, err
	}
	t := &openapiTool{cfg: cfg, deps: deps, docs: docs, timeout: defaultOpenAPITimeout, maxBytes: defaultOpenAPIResponseBytes}
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

// resolveOpenAPI fetches the entry's document when it is given by URL,
// checks it and the operations the entry grants, and returns the entry's
// tool with the document, narrowed to those operations and what they
// use, pinned in its config and the operations in its description and
// parameters. An entry whose calls name their document is only described.
func resolveOpenAPI(ctx context.Context, spec agent.Tool, env kind.ResolveEnv) ([]agent.Tool, error) {
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
		if src, err = fetchDocument(ctx, env.HTTP, cfg.SpecURL, maxSpecBytes(env.Deps), what); err != nil {
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

// maxSpecBytes is the bound of a document read from spec_url or
// openapi_url: the operator's, else DefaultMaxSpecBytes.
func maxSpecBytes(d kind.Deps) int64 {
	return agent.OrDefault(d.OpenAPIMaxSpecBytes, DefaultMaxSpecBytes)
}
