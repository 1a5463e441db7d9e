package pipelinetool

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
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/pipeline"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tools/kind"
	"github.com/agentflow/agentflow/internal/words"
)

// pipelineConfig is execute_pipeline's config.
type pipelineConfig struct {
	// CacheTTLSec keeps a pipeline's result for the tenant that long, by
	// the hash of its canonical JSON; 0 turns caching off. Default 300.
	CacheTTLSec *int `json:"cache_ttl_sec"`
	// MaxRows bounds every step's output. Default pipeline.DefaultMaxRows.
	MaxRows int `json:"max_rows"`
	// Credentials are added to http_request calls to their hosts.
	Credentials []credential `json:"credentials"`
}

// credential adds a secret to the requests of one host, as a header or a
// query parameter. The secret is named by reference and resolved when a
// call is made: it is never in the catalog, the arguments, the history or
// the logs. The egress client adds it (egress.Credentials), to requests
// to its host only.
type credential struct {
	Host   string `json:"host"`   // host (any port) or host:port the secret goes to
	Header string `json:"header"` // e.g. Authorization, X-Api-Key
	Prefix string `json:"prefix"` // e.g. "Bearer "
	Query  string `json:"query"`  // a query parameter instead of a header
	Secret string `json:"secret"` // env:NAME
}

// outbound is c as the egress client adds it.
func (c credential) outbound() egress.Credential {
	if c.Query != "" {
		return egress.Credential{Host: c.Host, In: egress.InQuery, Name: c.Query, Secret: c.Secret}
	}
	return egress.Credential{Host: c.Host, In: egress.InHeader, Name: c.Header, Prefix: c.Prefix, Secret: c.Secret}
}

const defaultPipelineTTL = 300

const pipelineConfigSchema = `{"type":"object","additionalProperties":false,"properties":{` +
	`"cache_ttl_sec":{"type":"integer","minimum":0,"maximum":86400,"description":"keep a pipeline's result for the tenant this long, by its canonical JSON (default 300; 0: no cache)"},` +
	`"max_rows":{"type":"integer","minimum":1,"maximum":1000000,"description":"the most rows a step may output (default 100000)"},` +
	`"credentials":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["host","secret"],` +
	`"properties":{"host":{"type":"string","minLength":1},"header":{"type":"string"},"prefix":{"type":"string"},"query":{"type":"string"},` +
	`"secret":{"type":"string","pattern":"^[a-z]+:","description":"a secret reference, e.g. env:WEATHER_KEY"}}}}}}`

// ExecutePipeline returns the execute_pipeline kind (seed 004 §5.1): the
// model writes a short pipeline of steps — http_request, table_sort,
// table_filter, table_select, top_k, groupby, join, jq_transform,
// regex_extract, parse_date — over tables and JSON, run by
// internal/pipeline. http_request goes through the tenant's egress
// policy; input_ref and join refs read the tenant's data by reference; the
// result is kept by reference (a dataset always), and cached per tenant.
func ExecutePipeline() kind.Kind {
	return kind.Kind{
		Name: "execute_pipeline",
		Description: "Fetch data from an API or load it by ref, then sort, filter, select, group, join and reshape it in steps. " +
			"The result is kept by reference: pass its ref as input_ref to work on it again without fetching.",
		Parameters: json.RawMessage(pipeline.Parameters),
		Config:     json.RawMessage(pipelineConfigSchema),
		Build:      buildPipeline,
		// A POST may change something at the other end; a GET only reads.
		Approval: pipelineApproval,
	}
}

// pipelineApproval is execute_pipeline's default approval policy, and the
// floor of every composite: a pipeline with a POST step waits for a
// person.
const pipelineApproval = `has(args.pipeline) && args.pipeline.exists(s, s.step == "http_request" && has(s.method) && s.method == "POST")`

func buildPipeline(spec agent.Tool, deps kind.Deps) (kind.Tool, error) {
	cfg := pipelineConfig{}
	if len(spec.Config) > 0 {
		if err := kind.DecodeConfig(spec.Config, &cfg, "execute_pipeline"); err != nil {
			return nil, err
		}
	}
	ttl := defaultPipelineTTL
	if cfg.CacheTTLSec != nil {
		ttl = *cfg.CacheTTLSec
	}
	if ttl < 0 || cfg.MaxRows < 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "execute_pipeline config: cache_ttl_sec and max_rows must not be negative")
	}
	var creds []egress.Credential
	for i, c := range cfg.Credentials {
		switch {
		case c.Host == "":
			return nil, agent.Errorf(agent.CodeInvalid, "execute_pipeline config: credentials[%d].host is required", i)
		case (c.Header == "") == (c.Query == ""):
			return nil, agent.Errorf(agent.CodeInvalid, "execute_pipeline config: credentials[%d]: give header or query, not both", i)
		}
		if err := secrets.ValidateRef(c.Secret); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "execute_pipeline config: credentials[%d].secret: %v", i, err)
		}
		if err := c.outbound().Check(); err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "execute_pipeline config: credentials[%d]: %v", i, err)
		}
		creds = append(creds, c.outbound())
	}
	return &pipelineTool{cfg: cfg, ttl: time.Duration(ttl) * time.Second, deps: deps, creds: creds, approval: spec.Approval,
		cacheScope: credentialScope(creds)}, nil
}

// credentialScope names what a pipeline's result depends on beside the
// pipeline: the credentials its requests carry (their hosts, places and
// secret references, never the values). Two tools of a tenant share a
// cached result only when they send the same credentials.
func credentialScope(creds []egress.Credential) string {
	if len(creds) == 0 {
		return "none"
	}
	data, _ := json.Marshal(creds) // plain strings: cannot fail
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

type pipelineTool struct {
	cfg   pipelineConfig
	ttl   time.Duration
	deps  kind.Deps
	creds []egress.Credential
	// approval is the tool's policy: a composite promoted from its runs
	// keeps it.
	approval string
	// cacheScope keys the tenant's cache by the tool's credentials
	// (credentialScope).
	cacheScope string
}

func (t *pipelineTool) Run(ctx context.Context, call kind.Call) (kind.Output, error) {
	p, err := pipeline.Decode(call.Args)
	if err != nil {
		return kind.Output{}, err
	}
	out, err := t.run(ctx, call, p)
	if err != nil {
		return kind.Output{}, err
	}
	return t.promote(ctx, call, p, out), nil
}

// run runs a decoded pipeline: from the tenant's cache when it holds the
// result, else with the tenant's egress, credentials and data.
func (t *pipelineTool) run(ctx context.Context, call kind.Call, p pipeline.Pipeline) (kind.Output, error) {
	key := "execute_pipeline:" + t.cacheScope + ":" + pipeline.Key(p)
	if t.ttl > 0 {
		if out, ok, err := call.Cache.Get(ctx, key); err == nil && ok {
			return out, nil
		}
	}
	creds, err := egress.NewCredentials(t.deps.Secrets, t.creds)
	if err != nil {
		return kind.Output{}, agent.Errorf(agent.CodeInvalid, "execute_pipeline config: %v", err)
	}
	client := creds.Client(call.HTTP)
	call.Progress("running " + words.Count(len(p.Steps), "step"))
	res, err := pipeline.Run(ctx, p, pipeline.Env{
		Fetch: func(ctx context.Context, req pipeline.Request) (pipeline.Response, error) {
			return fetch(ctx, call, client, req)
		},
		Load: func(ctx context.Context, ref string) (pipeline.Value, error) {
			data, contentType, err := load(ctx, call, ref)
			if err != nil {
				return pipeline.Value{}, err
			}
			return pipeline.Parse(data, contentType, ref)
		},
		Limits: pipeline.Limits{MaxRows: t.cfg.MaxRows},
		JQ:     t.deps.JQ,
	})
	if err != nil {
		return kind.Output{}, err
	}
	data, err := json.Marshal(res.Value)
	if err != nil {
		return kind.Output{}, fmt.Errorf("encode the result: %w", err)
	}
	out := kind.Output{Text: summary(len(p.Steps), res), Data: data, ShowData: true, Preview: preview(res)}
	for _, f := range res.Files {
		out.Files = append(out.Files, kind.File{Name: f.Name, MIMEType: f.ContentType, Ref: f.Ref})
	}
	if t.ttl > 0 {
		if err := call.Cache.Put(ctx, key, out, t.ttl); err != nil {
			telemetry.Logger(ctx, t.deps.Logger).Warn("pipeline result not cached", zap.Error(err))
		}
	}
	return out, nil
}

// preview describes a table result from what the run already knows,
// bounded like every preview (rows of any size are cut); a document is
// left to the runtime.
func preview(res pipeline.Result) *agent.DataPreview {
	if res.Value.Kind != pipeline.KindTable {
		return nil
	}
	p := &agent.DataPreview{Type: agent.DataDataset, RowCount: res.Rows}
	for _, c := range res.Schema {
		types := slices.DeleteFunc(slices.Clone(c.Types), func(t string) bool { return t == "missing" })
		p.Fields = append(p.Fields, agent.Field{Name: c.Name, Type: strings.Join(types, "|")})
	}
	var sample []json.RawMessage
	for _, row := range res.Value.Table[:min(agent.SampleRows, len(res.Value.Table))] {
		b, err := json.Marshal(row)
		if err != nil {
			return nil // the runtime works it out from the data
		}
		sample = append(sample, b)
	}
	p.Sample = sample
	bounded := p.Bounded()
	return &bounded
}

// summary is what the model reads before the data.
func summary(steps int, res pipeline.Result) string {
	var b strings.Builder
	if res.Value.Kind == pipeline.KindTable {
		fmt.Fprintf(&b, "The pipeline's %s gave a table of %s.", words.Count(steps, "step"), words.Count(res.Rows, "row"))
	} else {
		fmt.Fprintf(&b, "The pipeline's %s gave a JSON document.", words.Count(steps, "step"))
	}
	for _, w := range res.Warnings {
		b.WriteString("\nNote: ")
		b.WriteString(w)
	}
	return b.String()
}

// maxLoadBytes bounds a stored file a pipeline reads whole by ref (its
// steps then bound what it becomes).
const maxLoadBytes = 64 << 20

// load reads the data a ref names, whole, for a pipeline: a blob of the
// tenant's (a file, a tool's data) with its stored content type, so that
// a CSV file is read as CSV; anything else (a turn's result) as Data
// reads it, as JSON.
func load(ctx context.Context, call kind.Call, ref string) ([]byte, string, error) {
	b, err := call.OpenBlob(ctx, ref)
	if err != nil {
		if !agent.IsCode(err, agent.CodeNotFound) && !agent.IsCode(err, agent.CodeInvalid) {
			return nil, "", err
		}
		data, err := call.Data(ctx, ref)
		return data, "application/json", err
	}
	defer b.Close()
	info := b.Info()
	if info.Size > maxLoadBytes {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s is a file of %d bytes; a pipeline reads at most %d by ref", info.Ref, info.Size, maxLoadBytes)
	}
	data := make([]byte, info.Size)
	if _, err := io.ReadFull(b, data); err != nil {
		return nil, "", err
	}
	return data, info.ContentType, nil
}

// fetch makes an http_request with client: the tenant's egress client
// with the tool's credentials (egress.Credentials), which adds each to the
// requests to its host, refuses redirects that would take it elsewhere,
// and hands over answers cleaned of the values it sent. Errors never show
// the URL's query. A file goes through as a stream: a body_ref is read
// from the tenant's blobs as it is sent, and a response kept as a file is
// written to them as it arrives (Call.OpenBlob, Call.WriteBlob), up to
// MaxBlobBytes whatever the egress cap for bodies held in memory.
func fetch(ctx context.Context, call kind.Call, client *http.Client, req pipeline.Request) (pipeline.Response, error) {
	u, err := url.Parse(req.URL)
	if err != nil {
		return pipeline.Response{}, agent.Errorf(agent.CodeInvalid, "url %q: %v", req.URL, err)
	}
	shown := u.Scheme + "://" + u.Host + u.Path
	var body io.Reader
	var size int64
	contentType := ""
	switch {
	case req.BodyRef != "":
		b, err := call.OpenBlob(ctx, req.BodyRef)
		if err != nil {
			return pipeline.Response{}, fmt.Errorf("body_ref: %w", err)
		}
		defer b.Close()
		info := b.Info()
		body, size, contentType = &progressReader{r: b, report: call.Progress, what: "sending " + info.Ref + " to " + shown}, info.Size, info.ContentType
	case len(req.Body) > 0:
		body, size, contentType = bytes.NewReader(req.Body), int64(len(req.Body)), "application/json"
	}
	if req.AsFile {
		ctx = egress.Streamed(ctx, kind.MaxBlobBytes)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, u.String(), body)
	if err != nil {
		return pipeline.Response{}, agent.Errorf(agent.CodeInvalid, "request %s: %v", shown, err)
	}
	if req.Header != nil {
		hreq.Header = req.Header.Clone()
	}
	if body != nil {
		hreq.ContentLength = size
		if hreq.Header.Get("Content-Type") == "" {
			hreq.Header.Set("Content-Type", contentType)
		}
	}
	call.Progress("fetching " + shown)
	resp, err := client.Do(hreq)
	if err != nil {
		return pipeline.Response{}, cleanURLError(shown, err)
	}
	defer resp.Body.Close()
	out := pipeline.Response{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type")}
	if req.AsFile && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		r := &progressReader{r: resp.Body, report: call.Progress, what: "downloading " + shown}
		info, err := call.WriteBlob(ctx, r, out.ContentType)
		if err != nil {
			return pipeline.Response{}, cleanURLError(shown, err)
		}
		out.ContentType = info.ContentType
		out.File = &pipeline.File{Ref: info.Ref, ContentType: info.ContentType, Size: info.Size, Name: fileName(resp.Header.Get("Content-Disposition"), u.Path)}
		return out, nil
	}
	var r io.Reader = resp.Body
	if req.AsFile {
		r = io.LimitReader(r, 4096) // an error's body: only its start is shown
	}
	if out.Body, err = io.ReadAll(r); err != nil {
		return pipeline.Response{}, cleanURLError(shown, err)
	}
	return out, nil
}

// fileName is a downloaded file's name: the last element of the
// Content-Disposition's filename, else of the URL's path. The far side
// chose it, and the model and the turn's clients read it: a name that is
// not short printable text is none.
func fileName(disposition, urlPath string) string {
	name := ""
	if _, params, err := mime.ParseMediaType(disposition); err == nil {
		name = params["filename"]
	}
	name = cmp.Or(name, urlPath)
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	if name == "." || name == ".." || len(name) > maxFileName || !utf8.ValidString(name) ||
		strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) {
		return ""
	}
	return name
}

// maxFileName bounds a downloaded file's name, in bytes.
const maxFileName = 255

// progressReader reports how much of a stream has gone by, every
// progressEvery bytes.
type progressReader struct {
	r      io.Reader
	report func(string)
	what   string
	n      int64
}

const progressEvery = 8 << 20

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if p.n/progressEvery != (p.n+int64(n))/progressEvery {
		p.report(fmt.Sprintf("%s: %d MiB", p.what, (p.n+int64(n))>>20))
	}
	p.n += int64(n)
	return n, err
}

// cleanURLError keeps an error's cause and code but names the request by
// shown (no query) instead of the full URL net/http puts in front.
func cleanURLError(shown string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// The model reads it: running the same call again waits as long.
		return agent.Errorf(agent.CodeInvalid, "request %s: no answer in time (the tenant's egress time limit)", shown)
	}
	var ae *agent.Error
	if errors.As(err, &ae) {
		return &agent.Error{Code: ae.Code, Message: fmt.Sprintf("%s %s: %s", "request", shown, ae.Error())}
	}
	return fmt.Errorf("request %s: %w", shown, err)
}

// promote records the run of p for auto-promotion and, when this run made
// it a composite tool, tells the model so.
func (t *pipelineTool) promote(ctx context.Context, call kind.Call, p pipeline.Pipeline, out kind.Output) kind.Output {
	if t.deps.Composites == nil || call.JobID == "" {
		return out
	}
	shape := pipeline.ShapeOf(p)
	spec, err := compositeSpec(p, shape, t.cfg, t.approval)
	if err != nil {
		telemetry.Logger(ctx, t.deps.Logger).Warn("pipeline not recorded for promotion", zap.Error(err))
		return out
	}
	name, err := t.deps.Composites.RecordPipelineRun(ctx, call.TenantID, call.JobID, call.CallID, shape.Hash, spec)
	if err != nil {
		// Promotion is a convenience: the call itself succeeded.
		telemetry.Logger(ctx, t.deps.Logger).Warn("pipeline run not recorded for promotion", zap.Error(err))
		return out
	}
	if name != "" {
		out.Text += fmt.Sprintf("\nThis pipeline has now been run more than once, so it is saved as the tool %s: "+
			"agents granted composites can call it by name with just its arguments (%s).", name, paramList(shape))
	}
	return out
}
