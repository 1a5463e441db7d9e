package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
)

// processYAML is tenant demo's process main, as a catalog gives it.
const processYAML = `tenant: demo
processes:
  - tag: main
    description: Watch flight prices.
    definition:
      nodes:
        - {id: fetch_flights, type: task}
      edges: []
`

// TestProcessCommands: a process from the catalog, patched once, read
// back with starter process list, show and history through the gateway,
// for the token's tenant only.
func TestProcessCommands(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv := startGateway(t)
	addr := srv.GRPCAddr()
	file := filepath.Join(t.TempDir(), "processes.yaml")
	require.NoError(t, os.WriteFile(file, []byte(processYAML), 0o644))

	out, err := starter(ctx, addr, demoToken, "catalog", "apply", "-f", file)
	require.NoError(t, err)
	require.Contains(t, out, "  created   process demo/main v1\n")

	// A patch, as a patch_workflow call approved by ana makes it.
	at := time.Now()
	require.NoError(t, srv.Store().RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: "job-7", CallID: "call_1",
		Tool: "patch_workflow", Outcome: agent.ApprovalApproved, Approver: "ana", Via: "update", RequestedAt: at, DecidedAt: at}))
	p, err := srv.Store().PatchProcess(ctx, agent.ProcessPatch{TenantID: "demo", Tag: "main", JobID: "job-7",
		WorkflowID: "turn/demo/job-7", CallID: "call_1", Description: "Add price drop email notification",
		Operations:  json.RawMessage(`[{"op":"add","path":"/nodes/-","value":{"id":"send_email","type":"task"}},{"op":"add","path":"/edges/-","value":{"from":"fetch_flights","to":"send_email"}}]`),
		FromVersion: 1}, json.RawMessage(`{"nodes":[{"id":"fetch_flights","type":"task"},{"id":"send_email","type":"task"}],"edges":[{"from":"fetch_flights","to":"send_email"}]}`))
	require.NoError(t, err)

	out, err = starter(ctx, addr, demoToken, "process", "list")
	require.NoError(t, err)
	require.Equal(t, "main                 v2   patch   Watch flight prices.\n", out)

	out, err = starter(ctx, addr, demoToken, "process", "show", "--tag", "main")
	require.NoError(t, err)
	require.Contains(t, out, "process main v2 of 2, from the patch ("+p.PatchID+"), ")
	require.Contains(t, out, "Watch flight prices.\n{\n")
	require.Contains(t, out, `"id": "send_email"`)

	out, err = starter(ctx, addr, demoToken, "process", "show", "--tag", "main", "--version", "1", "--json")
	require.NoError(t, err)
	require.JSONEq(t, `{"nodes":[{"id":"fetch_flights","type":"task"}],"edges":[]}`, out)

	out, err = starter(ctx, addr, demoToken, "process", "history", "--tag", "main")
	require.NoError(t, err)
	require.Contains(t, out, "process main: 2 versions\nv1   ")
	require.Contains(t, out, "  catalog\nv2   ")
	require.Contains(t, out, "  patch "+p.PatchID+" of v1, approved by ana\n"+
		"     turn turn/demo/job-7 (job job-7), call call_1\n"+
		"     Add price drop email notification\n"+
		`     add /nodes/- {"id":"send_email","type":"task"}`+"\n"+
		`     add /edges/- {"from":"fetch_flights","to":"send_email"}`+"\n")

	// The catalog applied again leaves the patch the latest.
	out, err = starter(ctx, addr, demoToken, "catalog", "apply", "-f", file)
	require.NoError(t, err)
	require.Contains(t, out, "  unchanged process demo/main v2\n")

	// Another tenant sees none of it; a missing version is named.
	out, err = starter(ctx, addr, acmeToken, "process", "list")
	require.NoError(t, err)
	require.Equal(t, "no processes: add them to the catalog under processes:\n", out)
	_, err = starter(ctx, addr, acmeToken, "process", "show", "--tag", "main")
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	require.EqualError(t, err, `process show: tenant "acme" has no process "main" (it has none)`)
	_, err = starter(ctx, addr, demoToken, "process", "show", "--tag", "main", "--version", "5")
	require.EqualError(t, err, `process show: process "main" has no version 5; its versions are 1 to 2`)
	_, err = starter(ctx, addr, demoToken, "process", "history")
	require.EqualError(t, err, "process history: name the process with --tag (starter process list shows them)")
}
