package pipelinetool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/approval"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"

	"github.com/agentflow/agentflow/internal/tools"
	. "github.com/agentflow/agentflow/internal/tools/kind"
	. "github.com/agentflow/agentflow/internal/tools/pipelinetool"
)

// memCache is a Cache in memory, for one tenant.
type memCache struct {
	mu sync.Mutex
	m  map[string]Output
}

func (c *memCache) Get(_ context.Context, key string) (Output, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, ok := c.m[key]
	out.CacheHit = ok
	return out, ok, nil
}

func (c *memCache) Put(_ context.Context, key string, out Output, _ time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[key] = out
	return nil
}

func TestExecutePipeline(t *testing.T) {
	var served atomic.Int32
	var gotKey atomic.Value
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		gotKey.Store(r.Header.Get("X-Api-Key"))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `[{"id":1,"price":420},{"id":2,"price":299},{"id":3,"price":515},{"id":4,"price":310}]`)
	}))
	defer api.Close()
	host := strings.TrimPrefix(api.URL, "http://")
	policy, err := egress.ParsePolicy([]string{host})
	require.NoError(t, err)
	policy.Tenant = "demo"

	env := map[string]string{"FLIGHTS_KEY": "s3cret-value"}
	deps := Deps{Secrets: secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })}
	r, err := tools.NewRegistry(deps, ExecutePipeline())
	require.NoError(t, err)
	spec := agent.Tool{Name: "execute_pipeline", Kind: "execute_pipeline",
		Config: json.RawMessage(`{"credentials":[{"host":"` + host + `","header":"X-Api-Key","secret":"env:FLIGHTS_KEY"}]}`)}
	cache := &memCache{m: map[string]Output{}}
	var progress []string
	call := func(args string) (Output, error) {
		return r.Execute(context.Background(), spec, Call{Args: json.RawMessage(args), TenantID: "demo",
			HTTP: loopbackOpen(t).Client(policy), Cache: cache, Progress: func(m string) { progress = append(progress, m) }})
	}
	args := `{"session_id":"s","pipeline":[{"step":"http_request","url":"` + api.URL + `/search"},` +
		`{"step":"table_sort","field":"price","order":"asc"},{"step":"top_k","k":2}]}`

	out, err := call(args)
	require.NoError(t, err)
	require.JSONEq(t, `[{"id":2,"price":299},{"id":4,"price":310}]`, string(out.Data))
	require.Equal(t, "The pipeline's 3 steps gave a table of 2 rows.", out.Text)
	require.False(t, out.CacheHit)
	// The preview the run knows is the one the data gives.
	want, err := agent.PreviewOf(out.Data, "", agent.SampleRows)
	require.NoError(t, err)
	require.NotNil(t, out.Preview)
	got := *out.Preview
	got.Bytes = len(out.Data)
	require.Equal(t, want, got)
	require.Equal(t, "s3cret-value", gotKey.Load(), "the credential is added for its host")
	require.Contains(t, progress, "fetching "+api.URL+"/search")

	again, err := call(args)
	require.NoError(t, err)
	require.True(t, again.CacheHit)
	require.Equal(t, out.Data, again.Data)
	require.EqualValues(t, 1, served.Load(), "a cached pipeline fetches nothing")

	// Another tool of the tenant that sends other credentials (here none)
	// does not get the result the first one's credentials fetched.
	bare := agent.Tool{Name: "bare_pipeline", Kind: "execute_pipeline"}
	other, err := r.Execute(context.Background(), bare, Call{Args: json.RawMessage(args), TenantID: "demo",
		HTTP: loopbackOpen(t).Client(policy), Cache: cache, Progress: func(string) {}})
	require.NoError(t, err)
	require.False(t, other.CacheHit)
	require.EqualValues(t, 2, served.Load(), "the other credentials fetch for themselves")
	require.Empty(t, gotKey.Load(), "and send no key")

	_, err = call(`{"session_id":"s","pipeline":[{"step":"table_sort","field":"price","order":"up"}]}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "step 0 (table_sort)")

	// A host outside the allowlist is refused with a message the model
	// reads; no credential is sent to it or named in the message.
	_, err = call(`{"session_id":"s","pipeline":[{"step":"http_request","url":"http://127.0.0.2:1/x","params":{"key":"abc"}}]}`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "is not in tenant demo's egress allowlist")
	require.NotContains(t, err.Error(), "s3cret-value")

	// An unset secret fails the call, naming the reference, never a value.
	delete(env, "FLIGHTS_KEY")
	_, err = call(strings.Replace(args, `"k":2`, `"k":1`, 1))
	require.ErrorContains(t, err, "env:FLIGHTS_KEY")
}

func TestExecutePipelineConfig(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{`{"credentials":[{"host":"a.example","header":"X","secret":"WEATHER_KEY"}]}`, "credentials[0].secret"},
		{`{"credentials":[{"host":"a.example","secret":"env:K"}]}`, "give header or query"},
		{`{"credentials":[{"host":"https://a.example","header":"X-Api-Key","secret":"env:K"}]}`, `credentials[0]: host "https://a.example": write host or host:port, not a URL`},
		{`{"credentials":[{"host":"a.example","header":"X Api Key","secret":"env:K"}]}`, `credentials[0]: "X Api Key" is not a header name`},
		{`{"cache_ttl_sec":-1}`, "must not be negative"},
		{`{"ttl":5}`, `unknown field "ttl"`},
	} {
		_, err := BuildPipeline(agent.Tool{Name: "p", Kind: "execute_pipeline", Config: json.RawMessage(tt.config)}, Deps{}.WithDefaults())
		require.ErrorContains(t, err, tt.want, tt.config)
	}
}

// TestPipelineReadsByRef: input_ref reads the tenant's data through the
// call; nothing is fetched.
func TestPipelineReadsByRef(t *testing.T) {
	r, err := tools.NewRegistry(Deps{}, ExecutePipeline())
	require.NoError(t, err)
	const ref = "cas://sha256:" + "ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12ab12"
	data := func(_ context.Context, got string) ([]byte, error) {
		if got != ref {
			return nil, agent.Errorf(agent.CodeNotFound, "data %s not found", got)
		}
		return []byte(`[{"price":420},{"price":299},{"price":515}]`), nil
	}
	spec := agent.Tool{Name: "p", Kind: "execute_pipeline", Config: json.RawMessage(`{"cache_ttl_sec":0}`)}
	out, err := r.Execute(context.Background(), spec, Call{Data: data,
		Args: json.RawMessage(`{"session_id":"s","input_ref":"` + ref + `","pipeline":[{"step":"table_filter","condition":{"field":"price","op":"<","value":500}}]}`)})
	require.NoError(t, err)
	require.JSONEq(t, `[{"price":420},{"price":299}]`, string(out.Data))

	_, err = r.Execute(context.Background(), spec, Call{Data: data,
		Args: json.RawMessage(`{"session_id":"s","input_ref":"cas://sha256:` + strings.Repeat("0", 64) + `","pipeline":[{"step":"top_k","k":1}]}`)})
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
	_ = url.URL{}
}

func TestKindApprovals(t *testing.T) {
	checker, err := approval.NewChecker()
	require.NoError(t, err)
	for _, k := range tools.Builtin() {
		switch k.Approval {
		case "", agent.ApprovalNever, agent.ApprovalAlways:
		default:
			require.NoError(t, checker.Compile(k.Approval), k.Name)
		}
	}

	// execute_pipeline asks for approval of a POST, which may change
	// something at the other end, and not of reads.
	pipelinePolicy := ExecutePipeline().Approval
	for _, tt := range []struct {
		name, args string
		want       bool
	}{
		{"GET", `{"session_id":"s","pipeline":[{"step":"http_request","url":"https://a.example/x"}]}`, false},
		{"explicit GET", `{"session_id":"s","pipeline":[{"step":"http_request","url":"https://a.example/x","method":"GET"}]}`, false},
		{"by ref", `{"session_id":"s","input_ref":"cas://sha256:00","pipeline":[{"step":"top_k","k":1}]}`, false},
		{"POST", `{"session_id":"s","pipeline":[{"step":"http_request","url":"https://a.example/x","method":"POST","params":{"a":1}}]}`, true},
		{"no pipeline", `{"session_id":"s"}`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := checker.NeedsApproval(pipelinePolicy, approval.Call{Tool: "execute_pipeline", Args: tt.args, TenantID: "demo"})
			require.Equal(t, tt.want, got, reason)
		})
	}
}
