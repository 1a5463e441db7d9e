package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
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

// recipeCatalog is docs/guides/processes.md's recipe: process main and an
// agent with the patch_workflow tool, which waits for approval by default.
const recipeCatalog = `tenant: demo
default_agent: planner
tools:
  - name: patch_workflow
    kind: patch_workflow
agents:
  - id: planner
    model: openai:gpt-4o-mini
    tools: [patch_workflow]
processes:
  - tag: main
    description: Watch flight prices.
    definition:
      nodes:
        - {id: fetch_flights, type: task}
      edges: []
`

// recipeScript has the model answer seed 004's Test 2 prompt with a
// patch_workflow call, and the patch's result with its version.
const recipeScript = `
rules:
  - name: patched
    when: {tool: 'Patched process (?P<tag>\S+): version (?P<version>[0-9]+) \(from [0-9]+\), patch_id (?P<patch>patch-[0-9a-f]+)'}
    reply: {text: 'Done: process ${tag} is at version ${version}, patch ${patch}.'}
  - name: price-drop
    when: {user: '(?i)add email notification whenever price drops below \$(?P<max>[0-9]+)'}
    reply:
      tool_calls:
        - name: patch_workflow
          arguments: '{"workflow_tag": "main", "patch_spec": {"operations": [
              {"op": "add", "path": "/nodes/-", "value": {"id": "price_check", "type": "condition", "expr": "price < ${max}"}},
              {"op": "add", "path": "/nodes/-", "value": {"id": "send_email", "type": "task", "config": {"action": "email", "subject": "Price drop!"}}},
              {"op": "add", "path": "/edges/-", "value": {"from": "fetch_flights", "to": "price_check"}},
              {"op": "add", "path": "/edges/-", "value": {"from": "price_check", "to": "send_email", "condition": "true"}}],
            "description": "Add price drop email notification"}}'
`

// syncBuffer is a buffer one goroutine writes while another reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestProcessRecipe is docs/guides/processes.md's recipe end to end: starter
// chat asks for the change, the patch_workflow call waits until starter
// approve approves it, and starter process show and history read the new
// version and the patch, naming the turn and the approver.
func TestProcessRecipe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script:   recipeScript,
		Catalogs: []string{recipeCatalog},
		Tokens:   map[string]string{"tok-ana": "demo:user+approver+admin:ana"},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	addr, job := srv.GRPCAddr(), "price-"+newJobID()
	stream := "turn/demo/" + job

	var chat syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"chat", "--addr", addr, "--token", "tok-ana", "--job", job,
			"add email notification whenever price drops below $500"}, &chat)
	}()
	var pending string
	require.Eventually(t, func() bool {
		var err error
		pending, err = starter(ctx, addr, "tok-ana", "approve", "--stream", stream)
		return err == nil && strings.Contains(pending, " patch_workflow ")
	}, time.Minute, 100*time.Millisecond)
	callID := strings.Fields(pending)[0]
	out, err := starter(ctx, addr, "tok-ana", "approve", "--stream", stream, "--call", callID)
	require.NoError(t, err)
	require.Equal(t, callID+" approved\n", out)
	require.NoError(t, <-done)
	require.Contains(t, chat.String(), "waiting for approval of patch_workflow (call "+callID+", approval apr_")
	patch, err := srv.Store().ProcessPatchOf(ctx, "demo", job, callID)
	require.NoError(t, err)
	require.Contains(t, chat.String(), "Done: process main is at version 2, patch "+patch.PatchID+".")

	out, err = starter(ctx, addr, "tok-ana", "process", "show", "--tag", "main")
	require.NoError(t, err)
	require.Contains(t, out, "process main v2 of 2, from the patch ("+patch.PatchID+"), ")
	require.Contains(t, out, `"id": "send_email"`)
	require.Contains(t, out, `"to": "send_email"`)

	out, err = starter(ctx, addr, "tok-ana", "process", "history", "--tag", "main")
	require.NoError(t, err)
	t.Logf("starter process history --tag main\n%s", out)
	require.Contains(t, out, "process main: 2 versions\n")
	require.Contains(t, out, "  patch "+patch.PatchID+" of v1, approved by ana\n"+
		"     turn "+stream+" (job "+job+"), call "+callID+"\n"+
		"     Add price drop email notification\n"+
		`     add /nodes/- {"id":"price_check","type":"condition","expr":"price < 500"}`+"\n")
}
