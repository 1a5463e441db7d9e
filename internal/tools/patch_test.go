package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/store"
)

// mainProcess is the process of seed 004 §5.2 before the Test 2 patch;
// strictProcess allows only task and condition nodes.
const (
	mainProcess = `{"nodes":[{"id":"fetch_flights","type":"task"},{"id":"process_data","type":"task"}],` +
		`"edges":[{"from":"fetch_flights","to":"process_data"}]}`
	strictSchema = `{"properties":{"nodes":{"items":{"properties":{"type":{"enum":["task","condition"]}}}}}}`
)

// test2Args are the arguments of seed 004 §10.1 Test 2.
const test2Args = `{"workflow_tag": "main", "patch_spec": {"operations": [
  {"op": "add", "path": "/nodes/-", "value": {"id": "price_check", "type": "condition", "expr": "price < 500"}},
  {"op": "add", "path": "/nodes/-", "value": {"id": "send_email", "type": "task", "config": {"action": "email", "subject": "Price drop!"}}},
  {"op": "add", "path": "/edges/-", "value": {"from": "fetch_flights", "to": "price_check"}},
  {"op": "add", "path": "/edges/-", "value": {"from": "price_check", "to": "send_email", "condition": "true"}}
], "description": "Add price drop email notification"}}`

// patchArgs makes arguments for tag with ops.
func patchArgs(tag, ops string) string {
	return fmt.Sprintf(`{"workflow_tag":%q,"patch_spec":{"operations":%s,"description":"a change"}}`, tag, ops)
}

type patchEnv struct {
	t     *testing.T
	store *store.Store
	reg   *Registry
}

func newPatchEnv(t *testing.T) *patchEnv {
	t.Helper()
	st, err := store.Open(t.Context(), devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	_, err = st.ApplyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo", Processes: []agent.Process{
		{Tag: "main", Definition: json.RawMessage(mainProcess)},
		{Tag: "strict", Schema: json.RawMessage(strictSchema), Definition: json.RawMessage(mainProcess)},
	}}}}, false)
	require.NoError(t, err)
	reg, err := NewRegistry(Deps{Processes: st}, PatchWorkflow())
	require.NoError(t, err)
	return &patchEnv{t: t, store: st, reg: reg}
}

// call runs patch_workflow (spec config cfg) as call callID of job-1.
func (e *patchEnv) call(tenant, callID, cfg, args string) (Output, error) {
	spec := agent.Tool{Name: "patch_workflow", Kind: "patch_workflow"}
	if cfg != "" {
		spec.Config = json.RawMessage(cfg)
	}
	return e.reg.Execute(context.Background(), spec, Call{Args: json.RawMessage(args), TenantID: tenant, JobID: "job-1",
		CallID: callID, WorkflowID: "turn/" + tenant + "/job-1"})
}

func (e *patchEnv) latest(tag string) agent.ProcessVersion {
	e.t.Helper()
	v, err := e.store.Process(context.Background(), "demo", tag, 0)
	require.NoError(e.t, err)
	return v
}

func TestPatchWorkflow(t *testing.T) {
	e := newPatchEnv(t)
	ctx := context.Background()
	at := time.Now()
	require.NoError(t, e.store.RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: "job-1", CallID: "call-1",
		Tool: "patch_workflow", Outcome: agent.ApprovalApproved, Approver: "ana", Via: "update", RequestedAt: at, DecidedAt: at}))

	out, err := e.call("demo", "call-1", "", test2Args)
	require.NoError(t, err)
	id := store.PatchID("demo", "job-1", "call-1")
	require.Equal(t, "Patched process main: version 2 (from 1), patch_id "+id+", approved by ana. "+
		`Nodes added: price_check, send_email; edges added: fetch_flights → price_check, price_check → send_email (if "true").`, out.Text)
	require.JSONEq(t, `{"patch_id":"`+id+`","workflow_tag":"main","version":2,"from_version":1,"approver":"ana"}`, string(out.Data))
	v := e.latest("main")
	require.Equal(t, 2, v.Version)
	require.Contains(t, string(v.Definition), `"send_email"`)

	// A retried attempt of the call returns the same patch; no version.
	again, err := e.call("demo", "call-1", "", test2Args)
	require.NoError(t, err)
	require.Equal(t, out, again)
	require.Equal(t, 2, e.latest("main").Version)

	rec, err := e.store.ProcessPatchOf(ctx, "demo", "job-1", "call-1")
	require.NoError(t, err)
	require.Equal(t, "Add price drop email notification", rec.Description)
	require.Equal(t, "turn/demo/job-1", rec.WorkflowID)
	require.Contains(t, string(rec.Operations), `"expr":"price < 500"`)
}

// TestPatchWorkflowRefuses: calls the model can fix are answered with
// what to change, as agent.CodeInvalid (agent.CodeNotFound for a process
// that is not there), and change nothing.
func TestPatchWorkflowRefuses(t *testing.T) {
	e := newPatchEnv(t)
	tests := []struct {
		name   string
		tenant string
		config string
		args   string
		code   agent.Code
		want   string
	}{
		{
			name: "not a pointer", args: patchArgs("main", `[{"op":"add","path":"nodes/-","value":{"id":"x","type":"task"}}]`),
			want: `patch_workflow: operations[0].path "nodes/-" is not a JSON Pointer: it starts with / and writes ~ as ~0 and / as ~1 (did you mean /nodes/-?)`,
		},
		{
			name: "path not there", args: patchArgs("main", `[{"op":"replace","path":"/nodes/5/type","value":"task"}]`),
			want: "patch_workflow: process main version 1: operations[0] (replace /nodes/5/type): /nodes/5 does not exist: /nodes has 2 items (0 to 1); add at the end with /nodes/-; nothing was changed",
		},
		{
			name: "failed test", args: patchArgs("main", `[{"op":"test","path":"/nodes/1/id","value":"send_email"},{"op":"remove","path":"/nodes/1"}]`),
			want: `process main version 1: operations[0] (test /nodes/1/id): test failed: the value at /nodes/1/id is "process_data", not "send_email"; nothing was changed`,
		},
		{
			name: "dangling edge", args: patchArgs("main", `[{"op":"add","path":"/edges/-","value":{"from":"process_data","to":"send_mail"}}]`),
			want: `process main version 1: the patched definition would be invalid: /edges/1/to: no node has id "send_mail" (nodes: fetch_flights, process_data); nothing was changed`,
		},
		{
			name: "removed node still joined", args: patchArgs("main", `[{"op":"remove","path":"/nodes/0"}]`),
			want: `/edges/0/from: no node has id "fetch_flights" (nodes: process_data)`,
		},
		{
			name: "duplicate id", args: patchArgs("main", `[{"op":"add","path":"/nodes/-","value":{"id":"fetch_flights","type":"task"}}]`),
			want: `/nodes/2/id: node id "fetch_flights" is already used by /nodes/0; ids must be unique`,
		},
		{
			name: "node without type", args: patchArgs("main", `[{"op":"add","path":"/nodes/-","value":{"id":"x"}}]`),
			want: `/nodes/2: missing property 'type'`,
		},
		{
			name: "the process's schema", args: patchArgs("strict", `[{"op":"replace","path":"/nodes/1/type","value":"lambda"}]`),
			want: `process strict version 1: the patched definition would be invalid: /nodes/1/type: value must be one of 'task', 'condition'`,
		},
		{
			name: "no description", args: `{"workflow_tag":"main","patch_spec":{"operations":[{"op":"remove","path":"/edges/0"}]}}`,
			want: "patch_spec.description is required",
		},
		{
			name: "unknown process", args: patchArgs("nightly", `[{"op":"remove","path":"/edges/0"}]`), code: agent.CodeNotFound,
			want: `tenant "demo" has no process "nightly"; its processes: main, strict`,
		},
		{
			name: "another tenant's process", tenant: "acme", args: patchArgs("main", `[{"op":"remove","path":"/edges/0"}]`), code: agent.CodeNotFound,
			want: `tenant "acme" has no process "main"`,
		},
		{
			name: "a tag the tool may not patch", config: `{"tags":["strict"]}`, args: patchArgs("main", `[{"op":"remove","path":"/edges/0"}]`),
			want: `this tool may patch the processes strict, not "main"`,
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant := tt.tenant
			if tenant == "" {
				tenant = "demo"
			}
			code := tt.code
			if code == "" {
				code = agent.CodeInvalid
			}
			_, err := e.call(tenant, fmt.Sprint("bad-", i), tt.config, tt.args)
			require.Error(t, err)
			require.Equal(t, code, agent.ErrorCode(err), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}
	require.Equal(t, 1, e.latest("main").Version, "nothing was changed")
	require.Equal(t, 1, e.latest("strict").Version)
}

// TestPatchWorkflowConcurrent: calls patching the same version at once
// all land, each on the version before it; none is lost.
func TestPatchWorkflowConcurrent(t *testing.T) {
	e := newPatchEnv(t)
	const n = 4
	var wg sync.WaitGroup
	outs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			ops := fmt.Sprintf(`[{"op":"add","path":"/nodes/-","value":{"id":"n%d","type":"task"}},`+
				`{"op":"add","path":"/edges/-","value":{"from":"process_data","to":"n%d"}}]`, i, i)
			out, err := e.call("demo", fmt.Sprint("c", i), "", patchArgs("main", ops))
			outs[i], errs[i] = out.Text, err
		})
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		require.True(t, strings.HasPrefix(outs[i], "Patched process main: version "), outs[i])
	}
	latest := e.latest("main")
	require.Equal(t, 1+n, latest.Version)
	for i := range n {
		require.Contains(t, string(latest.Definition), fmt.Sprintf(`"id": "n%d"`, i), "patch %d is in the latest version", i)
	}
	hist, err := e.store.ProcessHistory(context.Background(), "demo", "main")
	require.NoError(t, err)
	for i, h := range hist[1:] {
		require.Equal(t, i+1, h.Patch.FromVersion)
		require.Empty(t, h.Patch.Approver, "no approval was recorded for these calls")
	}
}

func TestPatchWorkflowConfig(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{`{"tag":["main"]}`, `unknown field "tag"`},
		{`{"tags":["a/b"]}`, `tags[0] "a/b" may not contain '/'`},
	} {
		_, err := buildPatch(agent.Tool{Name: "p", Kind: "patch_workflow", Config: json.RawMessage(tt.config)}, Deps{}.WithDefaults())
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		require.ErrorContains(t, err, tt.want)
	}
	k := PatchWorkflow()
	require.Equal(t, agent.ApprovalAlways, k.Approval, "a patch waits for a person by default")
	require.False(t, k.Local)
}
