package gateway_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestProcessRPCs: GetProcess, ListProcesses and ListProcessVersions read
// the caller's tenant's processes only, versions with the patch that made
// them; a bad request or a missing process gets a message naming it.
func TestProcessRPCs(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cat := pb.NewCatalogServiceClient(f.conn)
	demo, other := f.as("tok-demo"), f.as("tok-other")

	doc := `
tenant: demo
processes:
  - tag: main
    description: Watch flight prices.
    definition:
      nodes: [{id: fetch_flights, type: task}]
      edges: []
`
	resp, err := cat.UpsertCatalog(demo, &pb.UpsertCatalogRequest{Files: map[string]string{"processes.yaml": doc}})
	require.NoError(t, err)
	var changes []string
	for _, c := range resp.GetChanges() {
		if c.GetKind() == "process" {
			changes = append(changes, c.GetName()+":"+c.GetAction())
		}
	}
	require.Equal(t, []string{"main:created"}, changes)

	at := time.Now()
	require.NoError(t, f.srv.Store().RecordApproval(ctx, agent.ApprovalRecord{TenantID: "demo", JobID: "job-1", CallID: "call_1",
		Tool: "patch_workflow", Outcome: agent.ApprovalApproved, Approver: "ana", Via: "update", RequestedAt: at, DecidedAt: at}))
	ops := `[{"op":"add","path":"/nodes/-","value":{"id":"send_email","type":"task"}},{"op":"add","path":"/edges/-","value":{"from":"fetch_flights","to":"send_email"}}]`
	patch, err := f.srv.Store().PatchProcess(ctx, agent.ProcessPatch{TenantID: "demo", Tag: "main", JobID: "job-1",
		WorkflowID: "turn/demo/job-1", CallID: "call_1", Description: "email the price drops", Operations: json.RawMessage(ops), FromVersion: 1},
		json.RawMessage(`{"nodes":[{"id":"fetch_flights","type":"task"},{"id":"send_email","type":"task"}],"edges":[{"from":"fetch_flights","to":"send_email"}]}`))
	require.NoError(t, err)

	latest, err := cat.GetProcess(demo, &pb.GetProcessRequest{Tag: "main"})
	require.NoError(t, err)
	require.Equal(t, int32(2), latest.GetVersion())
	require.Equal(t, int32(2), latest.GetLatestVersion())
	require.Equal(t, "patch", latest.GetSource())
	require.Equal(t, patch.PatchID, latest.GetPatchId())
	require.Equal(t, "Watch flight prices.", latest.GetDescription())
	require.Contains(t, latest.GetDefinitionJson(), `"send_email"`)

	first, err := cat.GetProcess(demo, &pb.GetProcessRequest{Tag: "main", Version: 1})
	require.NoError(t, err)
	require.Equal(t, "catalog", first.GetSource())
	require.Empty(t, first.GetPatchId())
	require.JSONEq(t, `{"nodes":[{"id":"fetch_flights","type":"task"}],"edges":[]}`, first.GetDefinitionJson())

	list, err := cat.ListProcesses(demo, &pb.ListProcessesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetProcesses(), 1)
	require.Equal(t, "main", list.GetProcesses()[0].GetTag())
	require.Equal(t, int32(2), list.GetProcesses()[0].GetVersion())
	require.Empty(t, list.GetProcesses()[0].GetDefinitionJson(), "a list leaves the definitions out")

	hist, err := cat.ListProcessVersions(demo, &pb.ListProcessVersionsRequest{Tag: "main"})
	require.NoError(t, err)
	require.Len(t, hist.GetVersions(), 2)
	require.Equal(t, "catalog", hist.GetVersions()[0].GetSource())
	require.Nil(t, hist.GetVersions()[0].GetPatch())
	got := hist.GetVersions()[1].GetPatch()
	require.NotNil(t, got)
	require.Equal(t, patch.PatchID, got.GetPatchId())
	require.Equal(t, "job-1", got.GetJobId())
	require.Equal(t, "turn/demo/job-1", got.GetWorkflowId())
	require.Equal(t, "call_1", got.GetCallId())
	require.Equal(t, "ana", got.GetApprover())
	require.Equal(t, "email the price drops", got.GetDescription())
	require.JSONEq(t, ops, got.GetOperationsJson())
	require.Equal(t, []int32{1, 2}, []int32{got.GetFromVersion(), got.GetToVersion()})

	// The other tenant sees none of it, whatever it asks for.
	olist, err := cat.ListProcesses(other, &pb.ListProcessesRequest{})
	require.NoError(t, err)
	require.Empty(t, olist.GetProcesses())
	_, err = cat.GetProcess(other, &pb.GetProcessRequest{Tag: "main"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	require.Equal(t, `tenant "other" has no process "main" (it has none)`, status.Convert(err).Message())
	_, err = cat.ListProcessVersions(other, &pb.ListProcessVersionsRequest{Tag: "main"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	// Bad requests, and missing processes or versions, say what is wrong.
	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		msg  string
	}{
		{"no tag", func() error { _, err := cat.GetProcess(demo, &pb.GetProcessRequest{}); return err },
			codes.InvalidArgument, "tag is required"},
		{"negative version", func() error {
			_, err := cat.GetProcess(demo, &pb.GetProcessRequest{Tag: "main", Version: -1})
			return err
		}, codes.InvalidArgument, "version -1: want a version from 1, or 0 for the latest"},
		{"tag with a slash", func() error { _, err := cat.GetProcess(demo, &pb.GetProcessRequest{Tag: "a/b"}); return err },
			codes.InvalidArgument, `tag "a/b" may not contain '/'`},
		{"unknown process", func() error { _, err := cat.GetProcess(demo, &pb.GetProcessRequest{Tag: "nightly"}); return err },
			codes.NotFound, `tenant "demo" has no process "nightly"; its processes: main`},
		{"unknown version", func() error {
			_, err := cat.GetProcess(demo, &pb.GetProcessRequest{Tag: "main", Version: 3})
			return err
		}, codes.NotFound, `process "main" has no version 3; its versions are 1 to 2`},
		{"history without a tag", func() error {
			_, err := cat.ListProcessVersions(demo, &pb.ListProcessVersionsRequest{})
			return err
		}, codes.InvalidArgument, "tag is required"},
		{"history of an unknown process", func() error {
			_, err := cat.ListProcessVersions(demo, &pb.ListProcessVersionsRequest{Tag: "nightly"})
			return err
		}, codes.NotFound, `tenant "demo" has no process "nightly"; its processes: main`},
		{"a user token", func() error {
			_, err := cat.ListProcesses(f.as("tok-user"), &pb.ListProcessesRequest{})
			return err
		}, codes.PermissionDenied, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			require.Equal(t, tc.code, status.Code(err), "%v", err)
			if tc.msg != "" {
				require.Equal(t, tc.msg, status.Convert(err).Message())
			}
		})
	}
}
