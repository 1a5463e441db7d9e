package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"github.com/agentflow/agentflow/workflows"
)

// replayScript calls the calc API for "what is A * B"; an agent whose
// system prompt says ROUND asks for another expression (a prompt change
// that breaks the tool's use). A divergent call's error gets an answer
// that says so.
const replayScript = `
rules:
  - name: judge-pass
    when: {system: '^You grade', user: '(?s)Request:\nWhat is .*Answer:\n[^\n]*[0-9]'}
    reply: {text: 'PASS: it answers the arithmetic it was asked.'}
  - name: judge-fail
    when: {system: '^You grade'}
    reply: {text: 'FAIL: no arithmetic answered.'}
  - name: lead-quotes
    when: {system: 'the lead', tool: '(?s)answered:\n(.*?)\n'}
    reply: {text: 'Calc says: $1'}
  - name: lead-asks
    when: {system: 'the lead', user: '^ask calc: (.+)$'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "calc", "prompt": "$1"}'}]}
  - name: calc-round
    when: {system: 'ROUND', user: '(?i)what is (?P<a>\d+) \* (?P<b>\d+)'}
    reply:
      tool_calls: [{name: calc, arguments: '{"operation_id": "calculate", "params": {"expression": "round(${a}*${b})"}}'}]
  - name: calc
    when: {user: '(?i)what is (?P<a>\d+) \* (?P<b>\d+)'}
    reply:
      tool_calls: [{name: calc, arguments: '{"params": {"expression": "${a}*${b}"}, "operation_id": "calculate"}'}]
  - name: diverged
    when: {tool: 'no recorded result'}
    reply: {text: 'I could not calculate that.'}
  - name: answer
    when: {tool: '"result":\s*(?P<r>[0-9]+)'}
    reply: {text: 'The result is ${r}.'}
  - name: echo
    when: {user: '(?s)^(.+)$'}
    reply: {text: 'You said: $1'}
`

// replayCatalog gives TENANT's agent calc an HTTP calculator (an
// openapi_action over API_URL) and masks PII in what it is sent.
const replayCatalog = `
tenant: TENANT
default_agent: calc
egress: ["API_HOST"]
pii: {mode: mask}
tools:
  - name: calc
    kind: openapi_action
    config:
      server: API_URL
      spec:
        openapi: 3.0.3
        info: {title: Calc, version: "1"}
        paths:
          /calc:
            get:
              operationId: calculate
              parameters: [{name: expression, in: query, required: true, schema: {type: string}}]
              responses:
                "200":
                  description: the result
                  content: {application/json: {schema: {type: object}}}
  - name: delegate
    kind: delegate_to_agent
    config: {agents: [calc]}
agents:
  - id: calc
    model: openai:gpt-4o-mini
    system_prompt: Use the calc tool for arithmetic.
    tools: [calc]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
  - id: lead
    model: openai:gpt-4o-mini
    system_prompt: You are the lead.
    tools: [delegate]
    limits: {max_iterations: 4, turn_timeout_sec: 60}
`

// TestEvalRecordReplay: a tenant's recorded turns become a dataset by
// reference (`starter eval record`), which `starter eval run --dataset`
// replays on two versions of the agent. Version 1 agrees with the
// recording on every case (score 1, no divergence); version 2, whose
// prompt makes it call the tool with other arguments, diverges, and the
// report names the case and diffs its calls and answers. The calculator's
// API sees no request during either replay; a masked email in a recorded
// prompt stays masked in the replay; another tenant's turns are never
// selected, its dataset is not found, and a dataset that names the other
// tenant's turn is refused.
func TestEvalRecordReplay(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var requests atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		results := map[string]int{"6*7": 42, "12*3": 36, "2*2": 4}
		n, ok := results[r.URL.Query().Get("expression")]
		if !ok {
			http.Error(w, `{"error": "unknown expression"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int{"result": n})
	}))
	defer api.Close()
	catalog := func(tenant, prompt string) string {
		return strings.NewReplacer("TENANT", tenant, "API_URL", api.URL, "API_HOST", strings.TrimPrefix(api.URL, "http://"),
			"Use the calc tool for arithmetic.", prompt).Replace(replayCatalog)
	}
	srv := testserver.Start(t, testserver.Options{
		Script: replayScript, Catalogs: []string{catalog("demo", "Use the calc tool for arithmetic."), catalog("acme", "Use the calc tool for arithmetic.")},
		Tokens: map[string]string{demoToken: "demo:user+admin:ci", acmeToken: "acme:user+admin:other"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)), HTTPAPI: true,
	})
	addr := srv.GRPCAddr()
	turns := pb.NewAgentServiceClient(srv.Conn)
	invokeAgent := func(token, agentID, prompt string) *pb.TurnResult {
		t.Helper()
		res, err := turns.Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token),
			&pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: agentID, Prompt: prompt, JobId: "live-" + testserver.RandomID()}})
		require.NoError(t, err)
		require.Equal(t, agent.StatusCompleted, res.GetStatus(), "%+v", res)
		return res
	}
	invoke := func(token, prompt string) *pb.TurnResult { return invokeAgent(token, "calc", prompt) }

	// Production traffic: three turns of demo, one of acme.
	const email = "ana.lopez@example.com"
	require.Equal(t, "The result is 42.", invoke(demoToken, "What is 6 * 7?").GetOutput())
	masked := invoke(demoToken, "What is 12 * 3? Mail it to "+email+".")
	require.Equal(t, "The result is 36.", masked.GetOutput())
	require.Contains(t, invoke(demoToken, "Hello").GetOutput(), "You said: Hello")
	acmeTurn := invoke(acmeToken, "What is 2 * 2?")
	// A lead that delegates to calc, whose child turn (channel delegate)
	// calls the API.
	require.Equal(t, "Calc says: The result is 42.", invokeAgent(demoToken, "lead", "ask calc: What is 6 * 7?").GetOutput())
	require.EqualValues(t, 4, requests.Load(), "the live turns called the API")
	stored, err := srv.Store().Turn(ctx, "demo", masked.GetJobId())
	require.NoError(t, err)
	require.NotContains(t, stored.Request.Prompt, email, "the tenant's PII settings masked the prompt")

	// The recordings become datasets, by reference, each of its tenant's
	// turns only.
	out, err := starter(ctx, addr, demoToken, "eval", "record", "--agent", "calc", "--since", "1h", "--channel", "grpc", "--id", "rec-demo")
	require.NoError(t, err, out)
	require.Equal(t, "rec-demo\n", out)
	ds, err := srv.Store().Dataset(ctx, "demo", "rec-demo")
	require.NoError(t, err)
	require.Len(t, ds.Cases, 3)
	raw, err := json.Marshal(ds)
	require.NoError(t, err)
	require.NotContains(t, string(raw), "What is", "cases name recorded turns and copy no text")
	require.NotContains(t, string(raw), acmeTurn.GetJobId(), "another tenant's turn is never selected")
	for _, c := range ds.Cases {
		require.NotNil(t, c.Recording)
		require.Equal(t, "turn/demo/"+c.Recording.JobID, c.Recording.WorkflowID)
	}
	// Over HTTP, the same method: acme's credential selects acme's turns.
	body := `{"dataset_id": "rec-acme", "agent_id": "calc", "from": "` + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) +
		`", "to": "` + time.Now().Add(time.Minute).UTC().Format(time.RFC3339) + `"}`
	hreq, err := http.NewRequestWithContext(ctx, "POST", "http://"+srv.HTTPAPIAddr()+"/v1/evals/datasets", strings.NewReader(body))
	require.NoError(t, err)
	hreq.Header.Set("Authorization", "Bearer "+acmeToken)
	hres, err := http.DefaultClient.Do(hreq)
	require.NoError(t, err)
	var recorded struct {
		DatasetID   string `json:"dataset_id"`
		Cases       int    `json:"cases"`
		DatasetJSON string `json:"dataset_json"`
	}
	require.NoError(t, json.NewDecoder(hres.Body).Decode(&recorded))
	require.NoError(t, hres.Body.Close())
	require.Equal(t, http.StatusOK, hres.StatusCode)
	require.Equal(t, 1, recorded.Cases)
	require.Contains(t, recorded.DatasetJSON, acmeTurn.GetJobId())
	require.NotContains(t, recorded.DatasetJSON, masked.GetJobId())
	acmeDS, err := srv.Store().Dataset(ctx, "acme", "rec-acme")
	require.NoError(t, err)
	require.Len(t, acmeDS.Cases, 1)
	require.Equal(t, acmeTurn.GetJobId(), acmeDS.Cases[0].Recording.JobID)
	_, err = starter(ctx, addr, acmeToken, "eval", "run", "--dataset", "rec-demo")
	require.ErrorContains(t, err, `dataset "rec-demo" not found`)
	forged := filepath.Join(t.TempDir(), "forged.yaml")
	require.NoError(t, os.WriteFile(forged, []byte("name: forged\nagent: calc\ncases:\n  - id: theirs\n    recording: {job_id: "+
		ds.Cases[0].Recording.JobID+", workflow_id: x, from_step: 0, to_step: 3}\n"), 0o644))
	_, err = starter(ctx, addr, acmeToken, "eval", "run", "-f", forged)
	require.ErrorContains(t, err, "is not found")

	// A candidate (v2) whose prompt breaks the tool's use.
	srv.ApplyCatalog(t, catalog("demo", "ROUND every result."))
	requests.Store(0)
	report := filepath.Join(t.TempDir(), "replay.html")
	out, err = starter(ctx, addr, demoToken, "eval", "run", "--dataset", "rec-demo", "--version", "1", "--against", "2",
		"--id", "replay-1", "--report", report)
	require.Equal(t, exitError(1), err, out)
	require.EqualValues(t, 0, requests.Load(), "no live tool was called during the replay")
	for _, want := range []string{
		"| v1 | 100% | 3/3 |",
		"| v2 | 33% | 1/3 |",
		"## Replay against the recordings",
		"| v1 | 3 | 3/3 | 100% | 0 |",
		"| v2 | 3 | 1/3 | 33% | 2 |",
		"- answer: The result is 42.\n+ answer: I could not calculate that.\n",
		"- call calc {\"operation_id\":\"calculate\",\"params\":{\"expression\":\"6*7\"}}\n+ call calc {\"operation_id\":\"calculate\",\"params\":{\"expression\":\"round(6*7)\"}}\n",
	} {
		require.Contains(t, out, want)
	}
	html, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Contains(t, string(html), "<tr><td>v2</td><td>3</td><td>1/3</td><td>33%</td><td>2</td>")

	run, err := srv.Store().EvalRun(ctx, "demo", "replay-1")
	require.NoError(t, err)
	for _, c := range run.Cases {
		require.NotNil(t, c.Replay, c.CaseID)
		if c.Version == 1 {
			require.True(t, c.Passed, "%s: %+v", c.CaseID, c.Checks)
			require.Zero(t, c.Replay.Divergences)
			require.Equal(t, 1.0, c.Replay.ToolAgreement())
		}
		// The replay's prompt is the recording's as stored: masked.
		replayed, err := srv.Store().Turn(ctx, "demo", c.JobID)
		require.NoError(t, err)
		recorded, err := srv.Store().Turn(ctx, "demo", c.Replay.RecordedJobID)
		require.NoError(t, err)
		require.Equal(t, recorded.Request.Prompt, replayed.Request.Prompt)
		require.NotContains(t, replayed.Request.Prompt, email)
		require.Equal(t, &agent.Replay{JobID: c.Replay.RecordedJobID}, replayed.Request.Replay)
	}
	require.InDelta(t, 1.0/3, run.Totals[1].Replay.ToolAgreement, 1e-9)

	// A dataset that asks for a judge too: the judge reads the recorded
	// prompt and the replay's answer.
	out, err = starter(ctx, addr, demoToken, "eval", "record", "--agent", "calc", "--since", "1h", "--channel", "grpc", "--id", "rec-judged",
		"--judge", "The answer gives the result of the arithmetic asked.")
	require.NoError(t, err, out)
	out, err = starter(ctx, addr, demoToken, "eval", "run", "--dataset", "rec-judged", "--version", "1", "--id", "replay-judged")
	require.Equal(t, exitError(1), err, out)
	require.Contains(t, out, "| v1 | 67% | 2/3 |")
	require.Contains(t, out, "- ✗ answer judge: no arithmetic answered.")
	require.EqualValues(t, 0, requests.Load(), "no live tool was called during the replays")

	// A replayed lead's delegated turn has its calls answered from the
	// recorded child's, with calc's first prompt back.
	srv.ApplyCatalog(t, catalog("demo", "Use the calc tool for arithmetic."))
	out, err = starter(ctx, addr, demoToken, "eval", "record", "--agent", "lead", "--since", "1h", "--id", "rec-lead")
	require.NoError(t, err, out)
	out, err = starter(ctx, addr, demoToken, "eval", "run", "--dataset", "rec-lead", "--id", "replay-lead")
	require.NoError(t, err, out)
	require.Contains(t, out, "| 1 | 1/1 | 100% | 0 |")
	require.EqualValues(t, 0, requests.Load(), "no live tool was called by a replay's delegated turn")

	// The deploy gate: catalog apply --gate stages the catalog's new
	// version of calc (v4, whose prompt breaks the tool's use), replays the
	// recorded conversations on the active version (v3) and on it, and
	// refuses it, naming the conversations it regresses; v4 stays staged
	// and v3 keeps serving. A fixed v5 passes, and the apply makes it the
	// active version. No live tool is called.
	dir := t.TempDir()
	file := filepath.Join(dir, "demo.yaml")
	write := func(prompt string) string {
		require.NoError(t, os.WriteFile(file, []byte(catalog("demo", prompt)), 0o644))
		return file
	}
	out, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", write("ROUND every result."), "--gate", "rec-demo",
		"--gate-report", filepath.Join(dir, "gate.md"))
	t.Logf("catalog apply --gate of v4 prints:\n%s", out)
	require.Equal(t, exitError(1), err, out)
	require.Contains(t, out, "gate: calc v4 passed 1 of 3 cases; 2 that pass on v3 fail on it")
	for _, c := range ds.Cases {
		if rec, err := srv.Store().Turn(ctx, "demo", c.Recording.JobID); err == nil && strings.HasPrefix(rec.Request.Prompt, "What is") {
			require.Contains(t, out, "regressed: "+c.Recording.JobID+"\n", "the report names the regressed conversation")
		}
	}
	require.Contains(t, out, "gate: refused: calc v4 stays staged, not serving; nothing was applied")
	active, err := srv.Store().ActiveAgent(ctx, "demo", "calc")
	require.NoError(t, err)
	require.Equal(t, 3, active.Version, "the refused version does not serve")
	gateReport, err := os.ReadFile(filepath.Join(dir, "gate-calc.md"))
	require.NoError(t, err)
	require.Contains(t, string(gateReport), "+ call calc {\"operation_id\":\"calculate\",\"params\":{\"expression\":\"round(6*7)\"}}")

	out, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", write("Use the calc tool for arithmetic; give the result."), "--gate", "rec-demo")
	require.NoError(t, err, out)
	require.Contains(t, out, "gate: calc v5 passed 3 of 3 cases; 0 that pass on v3 fail on it")
	require.Contains(t, out, "gate: passed")
	require.Contains(t, out, "updated   agent demo/calc v5")
	active, err = srv.Store().ActiveAgent(ctx, "demo", "calc")
	require.NoError(t, err)
	require.Equal(t, 5, active.Version, "the staged version that passed serves")
	require.EqualValues(t, 0, requests.Load(), "no live tool was called by the gate's replays")

	// The Evaluation's history of recorded cases replays; recorded for
	// workflows/testdata with AGENTFLOW_RECORD_HISTORIES=1.
	hist := &historypb.History{Events: testserver.History(ctx, t, srv.Client(), contract.EvalWorkflowID("demo", "replay-1"), "")}
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(hist)
	require.NoError(t, err)
	r := sdkworker.NewWorkflowReplayer()
	workflows.Register(r)
	require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, hist, testserver.ReplayOptions(hist.GetEvents())))
	if os.Getenv("AGENTFLOW_RECORD_HISTORIES") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join("..", "workflows", "testdata", "evaluation_replay.json"), data, 0o644))
	}
}
