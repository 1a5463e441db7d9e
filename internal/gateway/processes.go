package gateway

import (
	"context"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// GetProcess implements pb.CatalogServiceServer.
func (c *CatalogService) GetProcess(ctx context.Context, in *pb.GetProcessRequest) (*pb.Process, error) {
	if in.GetVersion() < 0 {
		return nil, Status(ctx, c.logger, agent.Errorf(agent.CodeInvalid, "version %d: want a version from 1, or 0 for the latest", in.GetVersion()))
	}
	v, err := c.store.Process(ctx, TenantOf(ctx), in.GetTag(), int(in.GetVersion()))
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	return toPBProcess(v, true), nil
}

// ListProcesses implements pb.CatalogServiceServer.
func (c *CatalogService) ListProcesses(ctx context.Context, _ *pb.ListProcessesRequest) (*pb.ListProcessesResponse, error) {
	list, err := c.store.Processes(ctx, TenantOf(ctx))
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	out := &pb.ListProcessesResponse{}
	for _, v := range list {
		out.Processes = append(out.Processes, toPBProcess(v, false))
	}
	return out, nil
}

// ListProcessVersions implements pb.CatalogServiceServer.
func (c *CatalogService) ListProcessVersions(ctx context.Context, in *pb.ListProcessVersionsRequest) (*pb.ListProcessVersionsResponse, error) {
	hist, err := c.store.ProcessHistory(ctx, TenantOf(ctx), in.GetTag())
	if err != nil {
		return nil, Status(ctx, c.logger, err)
	}
	out := &pb.ListProcessVersionsResponse{}
	for _, e := range hist {
		info := &pb.ProcessVersionInfo{Version: int32(e.Version.Version), Source: e.Version.Source, CreatedAt: timestamppb.New(e.Version.CreatedAt)}
		if p := e.Patch; p != nil {
			info.Patch = &pb.ProcessPatch{PatchId: p.PatchID, JobId: p.JobID, WorkflowId: p.WorkflowID, CallId: p.CallID,
				Approver: p.Approver, Description: p.Description, OperationsJson: string(p.Operations),
				FromVersion: int32(p.FromVersion), ToVersion: int32(p.ToVersion), CreatedAt: timestamppb.New(p.CreatedAt)}
		}
		out.Versions = append(out.Versions, info)
	}
	return out, nil
}

// toPBProcess converts a process version, with its definition and schema
// when withBody.
func toPBProcess(v agent.ProcessVersion, withBody bool) *pb.Process {
	out := &pb.Process{Tag: v.Tag, Version: int32(v.Version), LatestVersion: int32(v.Latest), Description: v.Description,
		Source: v.Source, PatchId: v.PatchID, CreatedAt: timestamppb.New(v.CreatedAt)}
	if withBody {
		out.DefinitionJson, out.SchemaJson = string(v.Definition), string(v.Schema)
	}
	return out
}
