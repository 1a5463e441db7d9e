package store_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// completedAt is when the test's turns ended, by their workflow's clock.
var completedAt = time.Date(2024, 10, 12, 10, 30, 15, 123456000, time.UTC)

func completed(jobID, output string) agent.TurnResult {
	return agent.TurnResult{
		Version: agent.ProtocolVersion, JobID: jobID, Status: agent.StatusCompleted, Output: output, CompletedAt: completedAt,
		ResultPreview: json.RawMessage(`{"type":"text","chars":` + strconv.Itoa(len(output)) + `}`),
		Metadata: agent.ResultMetadata{
			AgentID: "assistant", AgentVersion: 2, RouteRule: "default",
			ToolCalls: []agent.ToolCallRecord{{
				CallID: "c1", Tool: "calculator", Args: json.RawMessage(`{"expression":"12.5*4"}`), Status: agent.ToolOK,
			}},
			TokensUsed: 1523, CacheHit: true, ExecutionTimeMS: 1247, LLMModel: "gpt-4o-mini",
		},
	}
}

func processRequest(jobID string) agent.TurnRequest {
	return agent.TurnRequest{TenantID: "demo", JobID: jobID, Prompt: "p", RunID: "run-2024-001", NodeID: "agent_analyze"}
}

// requireSameResult compares results whose JSON fields may have been
// re-encoded by Postgres.
func requireSameResult(t *testing.T, want, got agent.TurnResult) {
	t.Helper()
	w, err := json.Marshal(want)
	require.NoError(t, err)
	g, err := json.Marshal(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}

func TestSaveResult(t *testing.T) {
	t.Parallel()
	const limit = 1 << 10
	s := open(t, store.Options{ResultInlineLimit: limit})
	ctx := t.Context()
	failed := agent.TurnResult{
		JobID: "job-failed", Status: agent.StatusFailed, CompletedAt: completedAt,
		Error: &agent.TurnError{Type: agent.ErrTypeModelFailed, Message: "upstream 503", Retryable: true, Tool: "execute_pipeline", Step: "http_request"},
	}

	tests := []struct {
		name      string
		result    agent.TurnResult
		refPrefix string
		inCAS     bool
	}{
		{name: "small result inline", result: completed("job-small", "50"), refPrefix: "artifact://"},
		{name: "large result in CAS", result: completed("job-large", strings.Repeat("x", 2*limit)), refPrefix: "cas://sha256:", inCAS: true},
		{name: "failed result", result: failed, refPrefix: "artifact://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, err := s.SaveResult(ctx, "demo", "turn/demo/"+tt.result.JobID, tt.result, processRequest(tt.result.JobID))
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(first.ResultRef, tt.refPrefix), first.ResultRef)
			want := tt.result
			want.ResultRef = first.ResultRef
			if want.Version == "" {
				want.Version = agent.ProtocolVersion
			}
			if want.Metadata.ToolCalls == nil {
				want.Metadata.ToolCalls = []agent.ToolCallRecord{}
			}
			requireSameResult(t, want, first)

			// A retry, even with another outcome, gets the first result.
			retry := completed(tt.result.JobID, "something else")
			second, err := s.SaveResult(ctx, "demo", "turn/demo/"+tt.result.JobID, retry, processRequest(tt.result.JobID))
			require.NoError(t, err)
			require.Equal(t, first, second)

			byJob, err := s.Result(ctx, "demo", tt.result.JobID)
			require.NoError(t, err)
			require.Equal(t, first, byJob)
			byRef, err := s.ResultByRef(ctx, "demo", first.ResultRef)
			require.NoError(t, err)
			require.Equal(t, first, byRef)

			require.Equal(t, 1, count(t, s, "SELECT count(*) FROM agent_results WHERE job_id = $1", tt.result.JobID))
			require.Equal(t, 1, count(t, s, `SELECT count(*) FROM agent_results
				WHERE job_id = $1 AND run_id = 'run-2024-001' AND node_id = 'agent_analyze' AND workflow_id = $2`,
				tt.result.JobID, "turn/demo/"+tt.result.JobID))
			inCAS := count(t, s, "SELECT count(*) FROM agent_results WHERE job_id = $1 AND cas_id IS NOT NULL AND result_data IS NULL", tt.result.JobID)
			require.Equal(t, tt.inCAS, inCAS == 1)
			if tt.inCAS {
				sum := strings.TrimPrefix(first.ResultRef, "cas://sha256:")
				require.Equal(t, 1, count(t, s, "SELECT count(*) FROM cas_blobs WHERE sha256 = $1 AND size > $2", sum, limit))
				blob, err := s.Blob(ctx, first.ResultRef)
				require.NoError(t, err)
				h := sha256.Sum256(blob)
				require.Equal(t, sum, hex.EncodeToString(h[:]))
			}
		})
	}
	_, err := s.Result(ctx, "demo", "job-unknown")
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.ResultByRef(ctx, "demo", "artifact://0b5f3a9e-3c43-4c0e-9d5c-1b8d8f4c9a10")
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.ResultByRef(ctx, "demo", "cas://sha256:"+strings.Repeat("0", 64))
	requireCode(t, err, agent.CodeNotFound)
}

// TestResultOfRequest: a job's result answers the request it was saved
// for; another request under the job id is a Conflict, and a result saved
// before requests were hashed answers any.
func TestResultOfRequest(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	req := processRequest("job-1")
	saved, err := s.SaveResult(ctx, "demo", "turn/demo/job-1", completed("job-1", "50"), req)
	require.NoError(t, err)

	got, err := s.ResultOf(ctx, req)
	require.NoError(t, err)
	require.Equal(t, saved, got)
	no := false
	same := req
	same.Stream, same.Version = &no, agent.ProtocolVersion
	got, err = s.ResultOf(ctx, same)
	require.NoError(t, err, "how the answer is delivered is not the request")
	require.Equal(t, saved, got)

	for name, mutate := range map[string]func(*agent.TurnRequest){
		"prompt":  func(r *agent.TurnRequest) { r.Prompt = "q" },
		"agent":   func(r *agent.TurnRequest) { r.AgentID = "writer" },
		"node":    func(r *agent.TurnRequest) { r.NodeID = "agent_other" },
		"context": func(r *agent.TurnRequest) { r.Context.Metadata = map[string]string{"k": "v"} },
	} {
		other := processRequest("job-1")
		mutate(&other)
		_, err := s.ResultOf(ctx, other)
		requireCode(t, err, agent.CodeConflict)
		require.ErrorContains(t, err, `job id "job-1" of tenant "demo" names another request`, name)

		_, err = s.SaveResult(ctx, "demo", "turn/demo/job-1", completed("job-1", "other"), other)
		requireCode(t, err, agent.CodeConflict)
	}
	got, err = s.Result(ctx, "demo", "job-1")
	require.NoError(t, err)
	require.Equal(t, saved, got, "the first result stands")

	_, err = s.ResultOf(ctx, processRequest("job-2"))
	requireCode(t, err, agent.CodeNotFound)

	// Saved before the hash was kept.
	_, err = s.Pool().Exec(ctx, "UPDATE agent_results SET request_hash = '' WHERE job_id = 'job-1'")
	require.NoError(t, err)
	other := processRequest("job-1")
	other.Prompt = "q"
	got, err = s.ResultOf(ctx, other)
	require.NoError(t, err)
	require.Equal(t, saved, got)
}

func TestSaveResultConcurrent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		output string
	}{
		{name: "inline", output: "50"},
		{name: "cas", output: strings.Repeat("y", 4096)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t, store.Options{ResultInlineLimit: 1024})
			ctx := t.Context()
			const writers = 10
			results := make([]agent.TurnResult, writers)
			errs := make([]error, writers)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					// Each writer has its own outcome; exactly one must win.
					r := completed("job-1", tt.output+strconv.Itoa(i))
					results[i], errs[i] = s.SaveResult(ctx, "demo", "turn/demo/job-1", r, processRequest("job-1"))
				})
			}
			wg.Wait()
			for i := range writers {
				require.NoError(t, errs[i])
				require.Equal(t, results[0], results[i])
			}
			require.Equal(t, 1, count(t, s, "SELECT count(*) FROM agent_results"))
			require.True(t, strings.HasPrefix(results[0].Output, tt.output))
		})
	}
}

func TestBlobs(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	tests := []struct {
		name        string
		data        []byte
		contentType string
	}{
		{name: "json", data: []byte(`{"rows":3}`), contentType: "application/json"},
		{name: "binary without type", data: []byte{0, 1, 2, 255}},
		{name: "empty", data: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref, err := s.PutBlob(ctx, tt.data, tt.contentType)
			require.NoError(t, err)
			h := sha256.Sum256(tt.data)
			require.Equal(t, "cas://sha256:"+hex.EncodeToString(h[:]), ref)
			again, err := s.PutBlob(ctx, tt.data, "text/plain")
			require.NoError(t, err)
			require.Equal(t, ref, again)
			require.Equal(t, 1, count(t, s, "SELECT count(*) FROM cas_blobs WHERE sha256 = $1", hex.EncodeToString(h[:])))

			got, err := s.Blob(ctx, ref)
			require.NoError(t, err)
			require.Equal(t, len(tt.data), len(got))
			if len(tt.data) > 0 {
				require.Equal(t, tt.data, got)
			}
		})
	}
	var ct string
	require.NoError(t, s.Pool().QueryRow(ctx, "SELECT content_type FROM cas_blobs WHERE size = 4").Scan(&ct))
	require.Equal(t, store.DefaultContentType, ct)

	_, err := s.Blob(ctx, "cas://sha256:"+strings.Repeat("a", 64))
	requireCode(t, err, agent.CodeNotFound)
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{ResultInlineLimit: 64})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, demoCatalog("Be brief.", "calc"), false)
	require.NoError(t, err)
	_, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "acme"}}}, false)
	require.NoError(t, err)

	require.NoError(t, s.BeginTurn(ctx, demoTurn("job-1")))
	require.NoError(t, s.PutStep(ctx, "demo", "job-1", 0, agent.Message{Role: agent.RoleUser, Content: "secret"}))
	require.NoError(t, s.AppendSession(ctx, "demo", "sess-1", "job-1", []agent.Message{{Role: agent.RoleUser, Content: "secret"}}))
	small, err := s.SaveResult(ctx, "demo", "turn/demo/job-1", completed("job-1", "50"), processRequest("job-1"))
	require.NoError(t, err)
	large, err := s.SaveResult(ctx, "demo", "turn/demo/job-2", completed("job-2", strings.Repeat("z", 200)), processRequest("job-2"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(small.ResultRef, "artifact://"))
	require.True(t, strings.HasPrefix(large.ResultRef, "cas://"))

	notFound := []struct {
		name string
		call func() error
	}{
		{"active agent", func() error { _, err := s.ActiveAgent(ctx, "acme", "assistant"); return err }},
		{"agent version", func() error { _, err := s.AgentVersion(ctx, "acme", "assistant", 1); return err }},
		{"default agent", func() error { _, err := s.DefaultAgent(ctx, "acme"); return err }},
		{"turn", func() error { _, err := s.Turn(ctx, "acme", "job-1"); return err }},
		{"result", func() error { _, err := s.Result(ctx, "acme", "job-1"); return err }},
		{"artifact ref", func() error { _, err := s.ResultByRef(ctx, "acme", small.ResultRef); return err }},
		{"cas ref", func() error { _, err := s.ResultByRef(ctx, "acme", large.ResultRef); return err }},
	}
	for _, tt := range notFound {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			requireCode(t, err, agent.CodeNotFound)
			require.NotContains(t, err.Error(), "demo")
		})
	}
	agents, err := s.ListAgents(ctx, "acme")
	require.NoError(t, err)
	require.Empty(t, agents)
	steps, err := s.Steps(ctx, "acme", "job-1")
	require.NoError(t, err)
	require.Empty(t, steps)
	msgs, err := s.SessionMessages(ctx, "acme", "sess-1", 0)
	require.NoError(t, err)
	require.Empty(t, msgs)

	// The same job id in tenant acme is a separate result.
	mine, err := s.SaveResult(ctx, "acme", "turn/acme/job-1", completed("job-1", "acme's"), agent.TurnRequest{})
	require.NoError(t, err)
	require.Equal(t, "acme's", mine.Output)
	require.NotEqual(t, small.ResultRef, mine.ResultRef)
}

// TestSaveResultOutputJSON: a structured result's object comes back as
// it was stored, its keys in the model's order (jsonb would sort them),
// and an object that is not JSON is refused.
func TestSaveResultOutputJSON(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	res := completed("job-json", `{"temp_c": 21, "sky": "clear"}`)
	res.OutputJSON = json.RawMessage(`{"temp_c":21,"sky":"clear"}`)
	saved, err := s.SaveResult(ctx, "demo", "turn/demo/job-json", res, processRequest("job-json"))
	require.NoError(t, err)
	require.Equal(t, `{"temp_c":21,"sky":"clear"}`, string(saved.OutputJSON))
	read, err := s.Result(ctx, "demo", "job-json")
	require.NoError(t, err)
	require.Equal(t, `{"temp_c":21,"sky":"clear"}`, string(read.OutputJSON))

	bad := completed("job-bad-json", "x")
	bad.OutputJSON = json.RawMessage(`{"temp_c":`)
	_, err = s.SaveResult(ctx, "demo", "turn/demo/job-bad-json", bad, processRequest("job-bad-json"))
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
}

// TestTurnStart: the one read before a turn's claim gives the agent's
// active version when the job has no result, the job's result when it
// answers the same request, and refuses another request's result or an
// unknown agent, as ResultOf and ActiveAgent do.
func TestTurnStart(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	_, err := s.ApplyCatalog(ctx, demoCatalog("Be brief.", "calc"), false)
	require.NoError(t, err)
	req := processRequest("job-1")
	saved, err := s.SaveResult(ctx, "demo", "turn/demo/job-1", completed("job-1", "50"), req)
	require.NoError(t, err)
	other := processRequest("job-1")
	other.Prompt = "q"

	for _, tc := range []struct {
		name     string
		req      agent.TurnRequest
		agentID  string
		code     agent.Code
		existing *agent.TurnResult
	}{
		{name: "a new job", req: processRequest("job-2"), agentID: "assistant"},
		{name: "a job with its result", req: req, agentID: "assistant", existing: &saved},
		{name: "a job with its result, the agent gone", req: req, agentID: "nobody", existing: &saved},
		{name: "another request's job", req: other, agentID: "assistant", code: agent.CodeConflict},
		{name: "an unknown agent", req: processRequest("job-3"), agentID: "nobody", code: agent.CodeNotFound},
		{name: "no job id", req: processRequest(""), agentID: "assistant", code: agent.CodeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, existing, err := s.TurnStart(ctx, tc.req, tc.agentID)
			if tc.code != "" {
				requireCode(t, err, tc.code)
				return
			}
			require.NoError(t, err)
			if tc.existing != nil {
				require.Equal(t, tc.existing, existing)
				return
			}
			require.Nil(t, existing)
			require.Equal(t, "assistant", a.ID)
			require.Equal(t, 1, a.Version)
			require.Equal(t, "Be brief.", a.SystemPrompt)
		})
	}
}
