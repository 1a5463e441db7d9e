package openapitool_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/openapi/openapitest"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/openapitool"
)

// widgetKey is the key openapitest's API wants, the value of env:WIDGET_KEY.
const widgetKey = "widget-key-7c1d"

// widgetServer serves a large document at /openapi.json, with its
// Content-Length, and the API two of its operations describe under /api.
type widgetServer struct {
	*httptest.Server
	api   *openapitest.API
	docs  atomic.Int32
	calls atomic.Int32
}

func startWidgets(t *testing.T, doc []byte) *widgetServer {
	t.Helper()
	s := &widgetServer{api: openapitest.NewAPI(widgetKey)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/openapi.json" {
			s.docs.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(doc)))
			_, _ = w.Write(doc)
			return
		}
		s.calls.Add(1)
		s.api.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *widgetServer) client(t *testing.T) *http.Client {
	t.Helper()
	p, err := egress.ParsePolicy([]string{strings.TrimPrefix(s.URL, "http://")})
	require.NoError(t, err)
	p.Tenant = "demo"
	return loopbackOpen(t).Client(p)
}

// widgetEntry is an entry for the large document, narrowed to the two
// operations openapitest names.
func widgetEntry(url string) agent.Tool {
	cfg, _ := json.Marshal(map[string]any{"spec_url": url, "operations": openapitest.Wanted,
		"auth": []map[string]string{{"type": "api_key", "name": "X-Api-Key", "secret": "env:WIDGET_KEY"}}})
	spec := entry(string(cfg), "")
	spec.Name = "widgets"
	return spec
}

// Bounds of TestOpenAPILargeSpec: a 12 MiB document is applied within
// largeSpecMemory of memory (the peak RSS of the process that resolves
// it, less that of one that resolves nothing), and the race detector's
// shadow memory on top.
const (
	largeSpecBytes  = 12 << 20
	largeSpecMemory = 32 << 20
)

const largeSpecChild = "AGENTFLOW_TEST_LARGE_SPEC"

// TestOpenAPILargeSpec applies an entry whose spec_url is a document of
// 12 MiB — thousands of paths and components, larger than the egress
// client's cap on answers — narrowed to two operations. It resolves in a
// process of its own, whose peak memory is measured against one that
// resolves nothing; the pinned document holds those two operations and
// exactly the components they use, transitively; and a call of one of
// them reaches the API.
func TestOpenAPILargeSpec(t *testing.T) {
	if url := os.Getenv(largeSpecChild); url != "" {
		resolveLargeChild(t, url)
		return
	}
	doc := openapitest.Large(largeSpecBytes)
	require.Greater(t, len(doc), egress.DefaultMaxResponseBytes, "larger than what the egress client takes by default")
	s := startWidgets(t, doc)

	out := filepath.Join(t.TempDir(), "resolved.json")
	rest := childPeakRSS(t, "idle", out)
	peak := childPeakRSS(t, s.URL+"/openapi.json", out)
	bound := int64(largeSpecMemory) * (1 + openapiRaceShadow)
	t.Logf("applying a %d-byte document: peak RSS %d MiB, %d MiB over a process that applies nothing (bound %d MiB)",
		len(doc), peak>>20, (peak-rest)>>20, bound>>20)
	require.Less(t, peak-rest, bound)
	require.EqualValues(t, 1, s.docs.Load(), "the document was fetched once")

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var spec agent.Tool
	require.NoError(t, json.Unmarshal(data, &spec))
	var cfg OpenAPIConfig
	require.NoError(t, json.Unmarshal(spec.Config, &cfg))
	require.Empty(t, cfg.SpecURL)
	require.Less(t, len(cfg.Spec), 4<<10, "only what the two operations need is pinned")
	var pinned struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components map[string]map[string]json.RawMessage `json:"components"`
	}
	require.NoError(t, json.Unmarshal(cfg.Spec, &pinned))
	var comps []string
	for section, names := range pinned.Components {
		for name := range names {
			comps = append(comps, section+"/"+name)
		}
	}
	require.ElementsMatch(t, openapitest.Needed, comps)
	for _, c := range openapitest.Unneeded {
		require.NotContains(t, comps, c)
	}
	require.Len(t, pinned.Paths, 2)
	require.Contains(t, pinned.Paths["/widgets/{widgetId}"], "get")
	require.Contains(t, pinned.Paths["/widgets"], "post")
	require.NotContains(t, pinned.Paths["/widgets"], "get", "listWidgets is not granted")
	require.Equal(t, `has(args.operation_id) && args.operation_id in ["createWidget"]`, spec.Approval)

	// A call of the pinned operation reaches the API.
	r, err := tools.NewRegistry(secretsOf(map[string]string{"WIDGET_KEY": widgetKey}), OpenAPIAction())
	require.NoError(t, err)
	res, err := r.Execute(context.Background(), spec, Call{Args: json.RawMessage(`{"operation_id": "getWidget", "params": {"widgetId": 1}}`),
		TenantID: "demo", JobID: "j", CallID: "c1", HTTP: s.client(t)})
	require.NoError(t, err)
	require.Equal(t, "getWidget answered 200 OK: an object of 4 fields.", res.Text)
	require.JSONEq(t, `{"id": 1, "name": "sprocket", "kind": "gear", "owner": {"name": "Ada", "address": {"city": "Paris", "country": "FR"}}}`, string(res.Data))
	require.EqualValues(t, 1, s.calls.Load())
}

// childPeakRSS runs this test in a process of its own that resolves the
// entry for the document at url (or, with "idle", nothing) and writes it
// to out, and returns the process's peak RSS. The process reads its own
// (VmHWM): the rusage of a child counts the parent's memory it was forked
// from.
func childPeakRSS(t *testing.T, url, out string) int64 {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenAPILargeSpec$", "-test.count=1")
	cmd.Env = append(os.Environ(), largeSpecChild+"="+url, largeSpecChild+"_OUT="+out)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	require.NoError(t, cmd.Run(), "the child: %s", stderr.String())
	data, err := os.ReadFile(out + ".hwm")
	require.NoError(t, err)
	hwm, err := strconv.ParseInt(string(data), 10, 64)
	require.NoError(t, err)
	return hwm
}

// resolveLargeChild is the child's part: resolve, as applying a catalog
// does, write the resolved entry for the parent, and then its peak RSS.
func resolveLargeChild(t *testing.T, url string) {
	out := os.Getenv(largeSpecChild + "_OUT")
	if url != "idle" {
		p, err := egress.ParsePolicy([]string{strings.TrimPrefix(strings.Split(url, "/openapi.json")[0], "http://")})
		require.NoError(t, err)
		p.Tenant = "demo"
		got, err := OpenAPIAction().Resolve(context.Background(), widgetEntry(url), ResolveEnv{TenantID: "demo", HTTP: loopbackOpen(t).Client(p), Deps: Deps{}.WithDefaults()})
		require.NoError(t, err)
		require.Len(t, got, 1)
		data, err := json.Marshal(got[0])
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(out, data, 0o600))
	}
	hwm := procStatus(t, "VmHWM")
	require.NoError(t, os.WriteFile(out+".hwm", []byte(strconv.FormatInt(hwm, 10)), 0o600))
}

// procStatus reads a size from /proc/self/status, in bytes.
func procStatus(t *testing.T, key string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// TestOpenAPISpecLimit: a document over the operator's limit is refused,
// naming the setting, whether its size is announced or not; the egress
// client's own cap on answers does not apply to documents.
func TestOpenAPISpecLimit(t *testing.T) {
	doc := openapitest.Large(2 << 20)
	s := startWidgets(t, doc)
	chunked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bomb.yaml" { // a few hundred bytes that YAML aliases make megabytes
			_, _ = w.Write([]byte("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
				"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"))
			return
		}
		for i := 0; i < len(doc); i += 64 << 10 {
			_, _ = w.Write(doc[i:min(i+64<<10, len(doc))])
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(chunked.Close)
	p, err := egress.ParsePolicy([]string{strings.TrimPrefix(s.URL, "http://"), strings.TrimPrefix(chunked.URL, "http://")})
	require.NoError(t, err)
	p.Tenant, p.MaxResponseBytes = "demo", 1<<20 // a tenant's cap on answers, smaller than the document
	client := loopbackOpen(t).Client(p)

	for _, tt := range []struct {
		name  string
		limit int64
		url   string
		want  string
	}{
		{"announced", 1 << 20, s.URL + "/openapi.json", "spec_url " + s.URL + "/openapi.json: the document is larger than 1048576 bytes, the operator's limit (AGENTFLOW_OPENAPI_MAX_SPEC_BYTES)"},
		{"streamed", 1 << 20, chunked.URL + "/openapi.json", "spec_url " + chunked.URL + "/openapi.json: the document is larger than 1048576 bytes, the operator's limit (AGENTFLOW_OPENAPI_MAX_SPEC_BYTES)"},
		{"YAML that expands", 16 << 10, chunked.URL + "/bomb.yaml", "spec_url " + chunked.URL + "/bomb.yaml: the YAML document is larger than 32768 bytes as JSON, twice the operator's limit (AGENTFLOW_OPENAPI_MAX_SPEC_BYTES)"},
		{"within the limit", 4 << 20, chunked.URL + "/openapi.json", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := ResolveEnv{TenantID: "demo", HTTP: client, Deps: Deps{OpenAPIMaxSpecBytes: tt.limit}.WithDefaults()}
			spec := widgetEntry(tt.url)
			spec.Config = json.RawMessage(strings.Replace(string(spec.Config), `"auth"`, `"server":"`+s.URL+`/api","auth"`, 1))
			_, err := OpenAPIAction().Resolve(context.Background(), spec, env)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.EqualError(t, err, tt.want)
		})
	}
}

// bigSchemaDoc is a document whose one operation answers with a schema of
// n properties, each named by name(i) and one of a few values.
func bigSchemaDoc(n int, name func(int) string) []byte {
	var b strings.Builder
	b.WriteString(`{"openapi": "3.0.3", "info": {"title": "Big", "version": "1"}, "paths": {"/big": {"get": {"operationId": "getBig",
		"responses": {"200": {"description": "big", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Big"}}}}}}}},
		"components": {"schemas": {"Big": {"type": "object", "properties": {`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%s": {"type": "string", "enum": ["pending", "active", "cancelled", "refunded"], "maxLength": 5000}`, name(i))
	}
	b.WriteString(`}}}}}`)
	return []byte(b.String())
}

// TestOpenAPIPinnedCompressed: a document that narrows to more than
// 64 KiB is pinned compressed and called as any other; one too large
// even so is refused, saying what to do.
func TestOpenAPIPinnedCompressed(t *testing.T) {
	big := bigSchemaDoc(4000, func(i int) string { return fmt.Sprintf("field_%d", i) })
	random := bigSchemaDoc(12000, func(i int) string {
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		return hex.EncodeToString(sum[:])
	})
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"field_7": "active"}`))
	}))
	t.Cleanup(api.Close)
	p, err := egress.ParsePolicy([]string{strings.TrimPrefix(api.URL, "http://")})
	require.NoError(t, err)
	p.Tenant = "demo"
	client := loopbackOpen(t).Client(p)

	cfg, _ := json.Marshal(map[string]any{"spec": json.RawMessage(big), "server": api.URL})
	spec, err := resolve(t, entry(string(cfg), ""), ResolveEnv{TenantID: "demo"})
	require.NoError(t, err)
	var pinned OpenAPIConfig
	require.NoError(t, json.Unmarshal(spec.Config, &pinned))
	require.Empty(t, pinned.Spec)
	require.NotEmpty(t, pinned.SpecGzip)
	require.Less(t, len(spec.Config), len(big)/10, "pinned compressed")
	r, err := tools.NewRegistry(Deps{}, OpenAPIAction())
	require.NoError(t, err)
	out, err := r.Execute(context.Background(), spec, Call{Args: json.RawMessage(`{"operation_id": "getBig"}`), TenantID: "demo", JobID: "j", CallID: "c", HTTP: client})
	require.NoError(t, err)
	require.Equal(t, "getBig answered 200 OK: an object of 1 field.", out.Text)

	cfg, _ = json.Marshal(map[string]any{"spec": json.RawMessage(random), "server": api.URL})
	_, err = resolve(t, entry(string(cfg), ""), ResolveEnv{TenantID: "demo"})
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.Regexp(t, `^spec: the document is \d+ bytes once narrowed to the granted operations, \d+ as pinned \(compressed\); the limit is 262144: `+
		`grant fewer with operations, or let calls name the document \(openapi_url\)$`, err.Error())

	// A catalog does not write spec_gzip itself.
	_, err = BuildOpenAPI(entry(`{"spec_gzip": "dGhpcyBpcyBub3QgZ3ppcCBkYXRh"}`, ""), Deps{}.WithDefaults())
	require.ErrorContains(t, err, "openapi_action config: spec: spec_gzip: gzip: invalid header")
}
