package mcptool

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/words"
)

// mcpConfig is the mcp kind's config. A catalog entry names a server (url
// or command) and the tools to grant; Resolve turns it into one spec per
// server tool, whose config is the same server plus Tool.
type mcpConfig struct {
	// URL is a Streamable HTTP endpoint, reached through the tenant's
	// egress policy.
	URL string `json:"url,omitempty"`
	// Command runs a local server over stdio: an executable the worker
	// allows (Deps.MCPCommands) and its arguments.
	Command []string `json:"command,omitempty"`
	// Tools grants only these of the server's tools; default all.
	Tools []string `json:"tools,omitempty"`
	// Headers are added to every HTTP request, from secret references.
	Headers []mcpHeader `json:"headers,omitempty"`
	// Env adds variables to a stdio server's environment, from secret
	// references.
	Env []mcpEnv `json:"env,omitempty"`
	// TimeoutSec bounds one call (and, when applying the catalog,
	// listing the tools). Default mcpDefaultTimeout.
	TimeoutSec int `json:"timeout_sec,omitempty"`
	// Tool is the server's name of the one tool a resolved spec calls. It
	// is set by Resolve, never in a catalog.
	Tool string `json:"tool,omitempty"`
}

// mcpHeader is a header whose value is a secret, named by reference.
type mcpHeader struct {
	Name   string `json:"name"`
	Prefix string `json:"prefix,omitempty"`
	Secret string `json:"secret"`
}

// mcpEnv is an environment variable whose value is a secret.
type mcpEnv struct {
	Name   string `json:"name"`
	Secret string `json:"secret"`
}

const (
	// mcpDefaultTimeout is a call's time limit when the config sets none.
	mcpDefaultTimeout = 60
	// mcpCallMargin is what a server's time limit leaves of the tool
	// call's own (agent.Tool.CallTimeout: the entry's timeout_sec, 120 s
	// by default), so that a slow call ends as the call's error, not the
	// activity's.
	mcpCallMargin = 10
	// mcpMaxTools bounds what one server may offer: the registry bounds a
	// tenant's tools anyway; this keeps a listing from running away.
	mcpMaxTools = 1000
	// mcpMaxSchemaBytes bounds one tool's input schema.
	mcpMaxSchemaBytes = 64 << 10
	// mcpMaxDescription bounds a tool's description (what providers take).
	mcpMaxDescription = 1024
	// mcpMaxArgs bounds a stdio command's arguments.
	mcpMaxArgs = 64
)

const mcpConfigSchema = `{"type":"object","additionalProperties":false,` +
	`"oneOf":[{"required":["url"]},{"required":["command"]}],"properties":{` +
	`"url":{"type":"string","pattern":"^https?://","description":"the server's Streamable HTTP endpoint, reached through the tenant's egress allowlist; give url or command"},` +
	`"command":{"type":"array","minItems":1,"maxItems":64,"items":{"type":"string","minLength":1},` +
	`"description":"a local server run over stdio on the worker: an executable the worker allows (AGENTFLOW_MCP_COMMANDS) and its arguments"},` +
	`"tools":{"type":"array","uniqueItems":true,"items":{"type":"string","minLength":1,"maxLength":128},"description":"grant only these of the server's tools (default: all)"},` +
	`"headers":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["name","secret"],"properties":{` +
	`"name":{"type":"string","minLength":1},"prefix":{"type":"string","description":"e.g. \"Bearer \""},` +
	`"secret":{"type":"string","pattern":"^[a-z]+:","description":"a secret reference, e.g. env:GH_TOKEN"}}},"description":"headers of every request, from secrets"},` +
	`"env":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["name","secret"],"properties":{` +
	`"name":{"type":"string","pattern":"^[A-Za-z_][A-Za-z0-9_]*$"},` +
	`"secret":{"type":"string","pattern":"^[a-z]+:","description":"a secret reference, e.g. env:FILES_TOKEN"}}},"description":"variables added to a stdio server's environment, from secrets"},` +
	`"timeout_sec":{"type":"integer","minimum":1,"maximum":3590,"description":"the time limit of one call (default 60), at most the entry's timeout_sec less 10"}}}`

// MCP returns the mcp kind: the tools of an MCP server (Model Context
// Protocol, official Go SDK), over Streamable HTTP or stdio. A catalog
// entry names the server; when the catalog is applied, Resolve lists the
// server's tools and the entry becomes one tool per server tool, named
// <entry>_<tool>, with the server's description and input schema. Each
// call is a tools/call in the ExecuteTool activity, bounded by the
// entry's timeout_sec. A server that cannot be reached fails the attempt
// (agent.CodeUnavailable) and the activity is retried; a tool's error and
// arguments the server refuses are the model's to read (agent.CodeInvalid).
//
// MCP tools can do anything the server does, so they ask for approval
// unless the catalog says otherwise (`approval: never`, or a policy).
func MCP() kind.Kind {
	return kind.Kind{
		Name:        "mcp",
		Description: "A tool of an MCP server.",
		Parameters:  json.RawMessage(`{"type": "object"}`),
		Config:      json.RawMessage(mcpConfigSchema),
		Build:       buildMCP,
		Resolve:     resolveMCP,
		Approval:    agent.ApprovalAlways,
	}
}

func buildMCP(spec agent.Tool, deps kind.Deps) (kind.Tool, error) {
	if spec.Execution == agent.ToolLocal {
		return nil, agent.Errorf(agent.CodeInvalid, "mcp: execution must be activity: calls reach a server and may take long")
	}
	cfg, err := decodeMCPConfig(spec.Config, deps, spec.CallTimeout(0))
	if err != nil {
		return nil, err
	}
	if cfg.Tool != "" && spec.Source == "" {
		return nil, agent.Errorf(agent.CodeInvalid, "mcp config: tool is set when the catalog is applied; grant a server's tools with tools")
	}
	return &mcpTool{cfg: cfg, entry: spec.Entry(), deps: deps}, nil
}

// decodeMCPConfig reads and checks a config, with no I/O: one of url and
// command, a command the worker allows, well-formed names and secret
// references.
func decodeMCPConfig(raw json.RawMessage, deps kind.Deps, call time.Duration) (mcpConfig, error) {
	var cfg mcpConfig
	if len(bytes.TrimSpace(raw)) == 0 {
		return cfg, agent.Errorf(agent.CodeInvalid, "mcp config: give the server's url or command")
	}
	if err := kind.DecodeConfig(raw, &cfg, "mcp"); err != nil {
		return cfg, err
	}
	bad := func(format string, args ...any) (mcpConfig, error) {
		return cfg, agent.Errorf(agent.CodeInvalid, "mcp config: "+format, args...)
	}
	switch {
	case cfg.URL == "" && len(cfg.Command) == 0:
		return bad("give the server's url (Streamable HTTP) or command (stdio)")
	case cfg.URL != "" && len(cfg.Command) > 0:
		return bad("give url or command, not both")
	case cfg.URL != "":
		if err := checkMCPURL(cfg.URL); err != nil {
			return bad("url: %v", err)
		}
		if len(cfg.Env) > 0 {
			return bad("env is for stdio servers (command); an HTTP server gets headers")
		}
	default:
		if err := checkMCPCommand(cfg.Command, deps.MCPCommands); err != nil {
			return bad("command: %v", err)
		}
		if len(cfg.Headers) > 0 {
			return bad("headers are for HTTP servers (url); a stdio server gets env")
		}
	}
	if most := int(call/time.Second) - mcpCallMargin; cfg.TimeoutSec < 0 || cfg.TimeoutSec > most {
		return bad("timeout_sec %d: want 1 to %d seconds (the call's own limit, the entry's timeout_sec of %d s, less %d s); raise the entry's timeout_sec for a longer one",
			cfg.TimeoutSec, most, int(call/time.Second), mcpCallMargin)
	}
	seen := map[string]bool{}
	for i, name := range cfg.Tools {
		if err := checkMCPToolName(name); err != nil {
			return bad("tools[%d]: %v", i, err)
		}
		if seen[name] {
			return bad("tools[%d]: %q is listed twice", i, name)
		}
		seen[name] = true
	}
	if cfg.Tool != "" {
		if err := checkMCPToolName(cfg.Tool); err != nil {
			return bad("tool: %v", err)
		}
	}
	for i, h := range cfg.Headers {
		if err := checkMCPHeader(h); err != nil {
			return bad("headers[%d]: %v", i, err)
		}
	}
	seen = map[string]bool{}
	for i, e := range cfg.Env {
		switch {
		case !envNameRE.MatchString(e.Name):
			return bad("env[%d].name %q: want an environment variable name (letters, digits and _)", i, e.Name)
		case reservedEnv(e.Name):
			return bad("env[%d].name %q: the worker sets that variable, or it changes how programs load", i, e.Name)
		case seen[e.Name]:
			return bad("env[%d].name %q is given twice", i, e.Name)
		}
		seen[e.Name] = true
		if err := secrets.ValidateRef(e.Secret); err != nil {
			return bad("env[%d].secret: %v", i, err)
		}
	}
	return cfg, nil
}

func checkMCPURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	case u.Host == "":
		return errors.New("no host")
	case u.User != nil:
		return errors.New("credentials in the URL are not allowed: give them in headers, by secret reference")
	case u.Fragment != "":
		return errors.New("no fragment (#…) allowed")
	}
	return nil
}

// checkMCPCommand checks a stdio command against what the worker allows:
// the executable exactly as an allowlist entry gives it.
func checkMCPCommand(cmd []string, allowed []string) error {
	exe := cmd[0]
	if err := CheckExecutable(exe); err != nil {
		return err
	}
	if len(cmd)-1 > mcpMaxArgs {
		return fmt.Errorf("%d arguments; the limit is %d", len(cmd)-1, mcpMaxArgs)
	}
	for i, a := range cmd[1:] {
		if strings.ContainsRune(a, 0) {
			return fmt.Errorf("argument %d holds a NUL byte", i+1)
		}
	}
	if !slices.Contains(allowed, exe) {
		if len(allowed) == 0 {
			return fmt.Errorf("%q may not run: this worker allows no stdio MCP servers (AGENTFLOW_MCP_COMMANDS is empty)", exe)
		}
		return fmt.Errorf("%q may not run: this worker allows %s (AGENTFLOW_MCP_COMMANDS)", exe, strings.Join(allowed, ", "))
	}
	return nil
}

// CheckExecutable checks an executable as a stdio MCP server's command
// or an AGENTFLOW_MCP_COMMANDS entry names it: a name looked up in PATH
// (no slash) or a clean absolute path.
func CheckExecutable(exe string) error {
	switch {
	case exe == "" || strings.TrimSpace(exe) != exe || strings.ContainsAny(exe, "\x00\n\r\t"):
		return fmt.Errorf("%q is not an executable's name or absolute path", exe)
	case filepath.IsAbs(exe):
		if filepath.Clean(exe) != exe {
			return fmt.Errorf("%q: write the path clean (%s)", exe, filepath.Clean(exe))
		}
	case strings.ContainsRune(exe, '/') || exe == "." || exe == "..":
		return fmt.Errorf("%q: give an executable's name (looked up in PATH) or an absolute path, not a relative path", exe)
	}
	return nil
}

// checkMCPToolName checks a server's tool name as a catalog lists it: what
// the MCP specification allows, generously.
func checkMCPToolName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("%q: a tool name has 1 to 128 characters", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("%q: a tool name has no spaces or control characters", name)
		}
	}
	return nil
}

var headerNameRE = regexp.MustCompile("^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkMCPHeader(h mcpHeader) error {
	name := strings.ToLower(h.Name)
	switch {
	case !headerNameRE.MatchString(h.Name):
		return fmt.Errorf("name %q is not a header name", h.Name)
	case strings.HasPrefix(name, "mcp-") || strings.HasPrefix(name, "content-") || name == "host" || name == "accept" ||
		name == "last-event-id" || name == "connection" || name == "transfer-encoding":
		return fmt.Errorf("name %q: the transport sets that header", h.Name)
	case strings.ContainsAny(h.Prefix, "\r\n\x00"):
		return errors.New("prefix holds a line break")
	}
	if err := secrets.ValidateRef(h.Secret); err != nil {
		return fmt.Errorf("secret: %v", err)
	}
	return nil
}

// reservedEnv reports whether a stdio server's config may not set name:
// what the worker gives it, and what changes how the executable loads.
func reservedEnv(name string) bool {
	switch n := strings.ToUpper(name); {
	case n == "PATH" || n == "HOME" || n == "IFS" || n == "ENV" || n == "BASH_ENV" || n == "SHELLOPTS":
		return true
	case strings.HasPrefix(n, "LD_") || strings.HasPrefix(n, "DYLD_"):
		return true
	}
	return false
}

func (c mcpConfig) timeout() time.Duration {
	if c.TimeoutSec == 0 {
		return mcpDefaultTimeout * time.Second
	}
	return time.Duration(c.TimeoutSec) * time.Second
}

// describe names the server in messages: its URL without query, or its
// executable.
func (c mcpConfig) describe() string {
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err == nil {
			return u.Scheme + "://" + u.Host + u.Path
		}
		return "the server"
	}
	return "command " + filepath.Base(c.Command[0])
}

// mcpTool calls one tool of a server.
type mcpTool struct {
	cfg   mcpConfig
	entry string
	deps  kind.Deps
}

func (t *mcpTool) Run(ctx context.Context, call kind.Call) (kind.Output, error) {
	if t.cfg.Tool == "" {
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "%q stands for the tools of an MCP server and is not a tool itself; apply the catalog again to resolve it", t.entry)
	}
	// The entry's secrets are resolved for every call, though a kept
	// session may have sent them (or started its server with them) in an
	// earlier one: so the registry knows them and cleans this call's
	// output of them, and a secret no longer set fails the call.
	if err := t.cfg.resolveSecrets(ctx, t.deps.Secrets); err != nil {
		return kind.Output{}, err
	}
	srv := mcpServer{cfg: t.cfg, tenant: call.TenantID, http: call.HTTP, deps: t.deps}
	cctx, cancel := context.WithTimeout(ctx, t.cfg.timeout())
	defer cancel()
	call.Progress("calling " + t.cfg.Tool + " on " + t.cfg.describe())
	var args any = json.RawMessage(call.Args)
	res, err := sessions(t.deps).call(cctx, srv, &mcp.CallToolParams{Name: t.cfg.Tool, Arguments: args}, call.Progress)
	if err != nil {
		return kind.Output{}, srv.callError(ctx, cctx, "call "+t.cfg.Tool, err, false)
	}
	return mcpOutput(res)
}

// resolveSecrets resolves every secret the config names.
func (c mcpConfig) resolveSecrets(ctx context.Context, r kind.Secrets) error {
	for _, h := range c.Headers {
		if _, err := r.Resolve(ctx, h.Secret); err != nil {
			return fmt.Errorf("header %s: %w", h.Name, err)
		}
	}
	for _, e := range c.Env {
		if _, err := r.Resolve(ctx, e.Secret); err != nil {
			return fmt.Errorf("env %s: %w", e.Name, err)
		}
	}
	return nil
}

// credentials are the entry's headers as the egress client adds them: to
// the requests to the endpoint's host and port only.
func (c mcpConfig) credentials() []egress.Credential {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil // checked when the config was decoded
	}
	var list []egress.Credential
	for _, h := range c.Headers {
		list = append(list, egress.Credential{Host: egress.HostPort(u), In: egress.InHeader, Name: h.Name, Prefix: h.Prefix, Secret: h.Secret})
	}
	return list
}

// mcpOutput is what the model reads of a result: its text content, and
// its structured content as data. A result marked isError is the model's
// to read.
func mcpOutput(res *mcp.CallToolResult) (kind.Output, error) {
	text := mcpText(res.Content)
	if res.IsError {
		text = cmp.Or(text, "the tool failed and said no more")
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "%s", text)
	}
	out := kind.Output{Text: text, Files: mcpFiles(res.Content)}
	if res.StructuredContent != nil {
		data, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return kind.Output{}, fmt.Errorf("encode the structured content: %w", err)
		}
		out.Data = data
	}
	if out.Text == "" && len(out.Data) == 0 {
		out.Text = "the tool returned nothing"
	}
	return out, nil
}

// mcpFiles are a result's images, and the blobs of its embedded
// resources, as files of the call.
func mcpFiles(content []mcp.Content) []kind.File {
	var files []kind.File
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.ImageContent:
			files = append(files, kind.File{MIMEType: c.MIMEType, Data: c.Data})
		case *mcp.EmbeddedResource:
			if r := c.Resource; r != nil && len(r.Blob) > 0 {
				files = append(files, kind.File{Name: path.Base(r.URI), MIMEType: r.MIMEType, Data: r.Blob})
			}
		}
	}
	return files
}

// mcpText joins a result's content as text; what is not text is named.
func mcpText(content []mcp.Content) string {
	var parts []string
	for _, c := range content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource %s: %s]", c.Name, c.URI))
		case *mcp.EmbeddedResource:
			switch r := c.Resource; {
			case r == nil:
			case r.Text != "":
				parts = append(parts, r.Text)
			default:
				parts = append(parts, fmt.Sprintf("[resource %s, %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		}
	}
	return strings.Join(parts, "\n")
}

// resolveMCP lists the server's tools and returns one spec per granted
// tool.
func resolveMCP(ctx context.Context, spec agent.Tool, env kind.ResolveEnv) ([]agent.Tool, error) {
	deps := env.Deps.WithDefaults()
	cfg, err := decodeMCPConfig(spec.Config, deps, spec.CallTimeout(0))
	if err != nil {
		return nil, err
	}
	srv := mcpServer{cfg: cfg, tenant: env.TenantID, http: env.HTTP, deps: deps}
	// What the listing says is pinned in the catalog: a server that echoes
	// the secrets it was given (a header, its environment) must not put
	// them there.
	ctx, seen := secrets.WithSeen(ctx)
	lctx, cancel := context.WithTimeout(ctx, cfg.timeout())
	defer cancel()
	listed, err := srv.listTools(lctx)
	if err != nil {
		err = srv.callError(ctx, lctx, "list its tools", err, true)
		if env.AllowUnreachable && agent.IsCode(err, agent.CodeUnavailable) {
			deps.Logger.Warn("mcp server unreachable: the entry gives no tools for now",
				zap.String("tenant", env.TenantID), zap.String("tool", spec.Name), zap.String("server", cfg.describe()), zap.Error(err))
			return nil, nil
		}
		return nil, err
	}
	offered := map[string]*mcp.Tool{}
	var names []string
	for _, t := range listed {
		offered[t.Name] = t
		names = append(names, t.Name)
	}
	grant := cfg.Tools
	if len(grant) == 0 {
		grant = names
	}
	var missing []string
	for _, name := range grant {
		if offered[name] == nil {
			missing = append(missing, fmt.Sprintf("%q", name))
		}
	}
	if len(missing) > 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "%s offers no tool %s; it offers %s", cfg.describe(), strings.Join(missing, ", "), listNames(names))
	}

	red := egress.NewRedactor(seen.Secrets())
	var out []agent.Tool
	from := map[string]string{} // our name → the server's
	for _, name := range grant {
		t := offered[name]
		if err := checkMCPToolName(t.Name); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "%s offers a tool with a bad name: %v", cfg.describe(), err)
		}
		ours := mcpToolName(spec.Name, t.Name)
		if other, dup := from[ours]; dup {
			return nil, agent.Errorf(agent.CodeInvalid, "%s offers tools %q and %q, which both become %q; grant one of them with config.tools", cfg.describe(), other, t.Name, ours)
		}
		from[ours] = t.Name
		params, err := mcpParameters(t)
		if err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "%s: tool %q: %v", cfg.describe(), t.Name, err)
		}
		one := cfg
		one.Tools, one.Tool = nil, t.Name
		one.TimeoutSec = int(cfg.timeout() / time.Second) // pinned with the version, whatever the default becomes
		raw, err := json.Marshal(one)
		if err != nil {
			return nil, fmt.Errorf("encode the config of %q: %w", ours, err)
		}
		if params, err = kind.CleanJSON(red, params); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "%s: tool %q: its input schema: %v", cfg.describe(), t.Name, err)
		}
		out = append(out, agent.Tool{Name: ours, Description: red.String(mcpDescription(spec.Name, t)), Parameters: params, Config: raw, Delivery: mcpDelivery(t)})
	}
	return out, nil
}

// listNames lists names for a message, the first few only.
func listNames(names []string) string { return words.Listed(names, 20) }

// mcpToolName is the name the model calls a server's tool by:
// <entry>_<tool>, with what providers refuse replaced by _, and a long
// name cut and given a hash of the server's name, so that it stays
// unique.
func mcpToolName(entry, tool string) string {
	var b strings.Builder
	b.WriteString(entry)
	b.WriteByte('_')
	for _, r := range tool {
		if r < 0x80 && (r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	name := b.String()
	if len(name) <= 64 {
		return name
	}
	sum := sha256.Sum256([]byte(tool))
	return name[:64-9] + "_" + hex.EncodeToString(sum[:4])
}

// mcpParameters is a tool's input schema as the spec's Parameters: a JSON
// object schema.
func mcpParameters(t *mcp.Tool) (json.RawMessage, error) {
	if t.InputSchema == nil {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	raw, err := json.Marshal(t.InputSchema)
	if err != nil {
		return nil, fmt.Errorf("input schema: %v", err)
	}
	switch {
	case len(raw) > mcpMaxSchemaBytes:
		return nil, fmt.Errorf("input schema is %d bytes; the limit is %d", len(raw), mcpMaxSchemaBytes)
	case !kind.IsJSONObject(raw):
		return nil, errors.New("input schema is not a JSON object")
	}
	return raw, nil
}

func mcpDescription(entry string, t *mcp.Tool) string {
	d := cmp.Or(strings.TrimSpace(t.Description), strings.TrimSpace(t.Title))
	if d == "" {
		d = fmt.Sprintf("The %s tool of MCP server %s.", t.Name, entry)
	}
	return words.Clip(d, mcpMaxDescription)
}
