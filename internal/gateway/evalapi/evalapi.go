// Package evalapi serves EvalService: evals of an agent's versions over
// a dataset, datasets recorded from a tenant's turns, and the runs'
// reports. A service API, apart from the core as package gateway's doc
// says; its HTTP routes are grpc-gateway's, from the same service.
package evalapi

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"

	"go.temporal.io/sdk/client"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/evals"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Store is what evals read and record (store.Store).
type Store interface {
	evals.Recorder
	ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error)
	AgentVersion(ctx context.Context, tenantID, agentID string, version int) (agent.Agent, error)
	Turn(ctx context.Context, tenantID, jobID string) (store.Turn, error)
	Dataset(ctx context.Context, tenantID, id string) (agent.EvalDataset, error)
	BeginEval(ctx context.Context, in agent.EvalInput) error
	EvalRun(ctx context.Context, tenantID, evalID string) (agent.EvalRun, error)
}

// Core is what the API needs of the gateway's core: the tenant of a
// call's credential, an error as the call's status (never an internal
// error's text), the check of the ids a client names, and new ids.
type Core interface {
	TenantOf(ctx context.Context) string
	StatusOf(ctx context.Context, err error) error
	// ClientIDs checks the ids a request names, given as field, id
	// pairs: a reserved id is agent.CodeInvalid.
	ClientIDs(ctx context.Context, fieldIDs ...string) error
	// NewJobID is a new id, unique and in time order.
	NewJobID() string
}

// Service implements pb.EvalServiceServer for the caller's tenant, over
// the store and the Temporal client (which starts and follows the Eval
// workflow).
type Service struct {
	pb.UnimplementedEvalServiceServer
	store     Store
	client    client.Client
	taskQueue string
	c         Core
}

// New returns EvalService over st and c, whose Eval workflows run on
// taskQueue.
func New(st Store, c client.Client, taskQueue string, core Core) *Service {
	return &Service{store: st, client: c, taskQueue: taskQueue, c: core}
}

// RegisterGRPC adds EvalService to g.
func (e *Service) RegisterGRPC(g grpc.ServiceRegistrar) { pb.RegisterEvalServiceServer(g, e) }

// StartEval implements pb.EvalServiceServer: the dataset, agent and
// versions are checked before anything starts.
func (e *Service) StartEval(ctx context.Context, in *pb.StartEvalRequest) (*pb.StartEvalResponse, error) {
	ds, err := e.dataset(ctx, in)
	if err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	ev := agent.EvalInput{TenantID: e.c.TenantOf(ctx), EvalID: in.GetEvalId(), AgentID: in.GetAgentId(), Concurrency: int(in.GetConcurrency()), Dataset: ds,
		Build: in.GetBuild()}
	ev.AgentID = cmp.Or(ev.AgentID, ds.Agent)
	if ev.AgentID == "" {
		return nil, e.c.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "agent_id is required: the dataset names no agent"))
	}
	if ev.EvalID == "" {
		ev.EvalID = "eval-" + e.c.NewJobID()
	}
	// The eval id begins its cases' job ids (agent.EvalJobID).
	if err := e.c.ClientIDs(ctx, "eval_id", ev.EvalID); err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	for _, v := range in.GetVersions() {
		ev.Versions = append(ev.Versions, int(v))
	}
	if len(ev.Versions) == 0 {
		a, err := e.store.ActiveAgent(ctx, ev.TenantID, ev.AgentID)
		if err != nil {
			return nil, e.c.StatusOf(ctx, err)
		}
		ev.Versions = []int{a.Version}
	}
	if err := ev.Validate(); err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	for _, v := range ev.Versions {
		if _, err := e.store.AgentVersion(ctx, ev.TenantID, ev.AgentID, v); err != nil {
			return nil, e.c.StatusOf(ctx, err)
		}
	}
	// A recorded case names one of the caller's tenant's turns: another
	// tenant's is not found, before anything starts (the replay reads
	// under the tenant too).
	for _, c := range ds.Cases {
		if c.Recording == nil {
			continue
		}
		_, err := e.store.Turn(ctx, ev.TenantID, c.Recording.JobID)
		if agent.IsCode(err, agent.CodeNotFound) {
			err = agent.Errorf(agent.CodeNotFound, "case %s: the recorded turn %q is not found", c.ID, c.Recording.JobID)
		}
		if err != nil {
			return nil, e.c.StatusOf(ctx, err)
		}
	}
	// Recorded before the workflow starts, so that GetEval finds it at
	// once (the workflow records it too, for starts that bypass the
	// gateway; the first record stands).
	if err := e.store.BeginEval(ctx, ev); err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	if _, err := turnclient.StartEval(ctx, e.client, e.taskQueue, ev); err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	out := &pb.StartEvalResponse{EvalId: ev.EvalID, WorkflowId: contract.EvalWorkflowID(ev.TenantID, ev.EvalID), Cases: int32(len(ds.Cases))}
	for _, v := range ev.Versions {
		out.Versions = append(out.Versions, int32(v))
	}
	return out, nil
}

// dataset is the request's dataset: the file it carries, or the
// caller's tenant's stored dataset it names.
func (e *Service) dataset(ctx context.Context, in *pb.StartEvalRequest) (agent.EvalDataset, error) {
	switch id := in.GetDatasetId(); {
	case id != "" && in.GetDataset() != "":
		return agent.EvalDataset{}, agent.Errorf(agent.CodeInvalid, "give dataset or dataset_id, not both")
	case id != "":
		if err := agent.ValidateID("dataset_id", id); err != nil {
			return agent.EvalDataset{}, err
		}
		return e.store.Dataset(ctx, e.c.TenantOf(ctx), id)
	}
	return evals.Parse([]byte(in.GetDataset()))
}

// RecordDataset implements pb.EvalServiceServer: the selection is the
// caller's tenant's turns only (the tenant comes from the credential).
func (e *Service) RecordDataset(ctx context.Context, in *pb.RecordDatasetRequest) (*pb.RecordDatasetResponse, error) {
	sel := agent.RecordSelection{AgentID: in.GetAgentId(), Channel: in.GetChannel(), Outcome: in.GetOutcome(),
		SampleRate: in.GetSampleRate(), Limit: int(in.GetLimit())}
	if in.GetJudgeRubric() != "" || in.GetJudgeModel() != "" {
		sel.Judge = &agent.JudgeExpect{Rubric: in.GetJudgeRubric(), Model: in.GetJudgeModel()}
	}
	if in.GetFrom() != nil {
		sel.From = in.GetFrom().AsTime()
	}
	if in.GetTo() != nil {
		sel.To = in.GetTo().AsTime()
	}
	id := in.GetDatasetId()
	if id == "" {
		id = "rec-" + e.c.NewJobID()
	}
	if err := agent.ValidateID("dataset_id", id); err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	d, err := evals.Record(ctx, e.store, e.c.TenantOf(ctx), id, sel)
	if err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	return &pb.RecordDatasetResponse{DatasetId: id, Cases: int32(len(d.Cases)), DatasetJson: string(raw)}, nil
}

// GetEval implements pb.EvalServiceServer.
func (e *Service) GetEval(ctx context.Context, in *pb.GetEvalRequest) (*pb.EvalRun, error) {
	if err := agent.ValidateID("eval_id", in.GetEvalId()); err != nil || in.GetEvalId() == "" {
		return nil, e.c.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "eval_id is required, without '/' or spaces"))
	}
	run, err := e.store.EvalRun(ctx, e.c.TenantOf(ctx), in.GetEvalId())
	if err != nil {
		return nil, e.c.StatusOf(ctx, err)
	}
	if in.GetWait() && run.Status != agent.EvalCompleted {
		err := e.client.GetWorkflow(ctx, contract.EvalWorkflowID(e.c.TenantOf(ctx), in.GetEvalId()), "").Get(ctx, nil)
		if err != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, e.c.StatusOf(ctx, contract.ErrorOf(err))
		}
		if run, err = e.store.EvalRun(ctx, e.c.TenantOf(ctx), in.GetEvalId()); err != nil {
			return nil, e.c.StatusOf(ctx, err)
		}
	}
	return toPBEvalRun(run), nil
}

func toPBEvalRun(r agent.EvalRun) *pb.EvalRun {
	out := &pb.EvalRun{EvalId: r.EvalID, Dataset: r.Dataset, AgentId: r.AgentID, Status: r.Status,
		StartedAt: timestamppb.New(r.StartedAt), Passed: r.Status == agent.EvalCompleted && r.Passed(), ReportMarkdown: evals.Markdown(r)}
	if r.FinishedAt != nil {
		out.FinishedAt = timestamppb.New(*r.FinishedAt)
	}
	for _, v := range r.Versions {
		out.Versions = append(out.Versions, int32(v))
	}
	for _, t := range r.Totals {
		pt := &pb.EvalTotals{Version: int32(t.Version), Cases: int32(t.Cases), Passed: int32(t.Passed),
			Tokens: int64(t.Tokens), CostUsd: t.CostUSD, LatencyP50Ms: t.LatencyP50MS, LatencyMaxMs: t.LatencyMaxMS}
		if r := t.Replay; r != nil {
			pt.Replay = &pb.ReplayTotals{Cases: int32(r.Cases), AnswersAgree: int32(r.AnswersAgree), ToolAgreement: r.ToolAgreement,
				Divergences: int32(r.Divergences), CostDeltaUsd: r.CostDeltaUSD, LatencyDeltaMs: r.LatencyDeltaMS,
				GuardTrips: int32(r.GuardTrips), RecordedGuardTrips: int32(r.RecordedGuardTrips)}
		}
		out.Totals = append(out.Totals, pt)
	}
	for _, c := range r.Cases {
		pc := &pb.EvalCaseResult{CaseId: c.CaseID, Version: int32(c.Version), JobId: c.JobID, Status: c.Status, Passed: c.Passed,
			Output: c.Output, Tokens: int64(c.Tokens), CostUsd: c.CostUSD, LatencyMs: c.LatencyMS}
		for _, ch := range c.Checks {
			pc.Checks = append(pc.Checks, &pb.EvalCheck{Name: ch.Name, Passed: ch.Passed, Detail: ch.Detail})
		}
		pc.Replay = toPBReplay(c.Replay)
		out.Cases = append(out.Cases, pc)
	}
	return out
}

// FromPBEvalRun is the run a GetEval answer describes, for reports made
// by clients (starter eval).
func FromPBEvalRun(p *pb.EvalRun) agent.EvalRun {
	r := agent.EvalRun{EvalID: p.GetEvalId(), Dataset: p.GetDataset(), AgentID: p.GetAgentId(), Status: p.GetStatus(),
		StartedAt: p.GetStartedAt().AsTime()}
	if p.GetFinishedAt() != nil {
		r.FinishedAt = new(p.GetFinishedAt().AsTime())
	}
	for _, v := range p.GetVersions() {
		r.Versions = append(r.Versions, int(v))
	}
	for _, c := range p.GetCases() {
		ec := agent.EvalCaseResult{CaseID: c.GetCaseId(), Version: int(c.GetVersion()), JobID: c.GetJobId(), Status: c.GetStatus(),
			Passed: c.GetPassed(), Output: c.GetOutput(), Tokens: int(c.GetTokens()), CostUSD: c.GetCostUsd(), LatencyMS: c.GetLatencyMs()}
		for _, ch := range c.GetChecks() {
			ec.Checks = append(ec.Checks, agent.EvalCheck{Name: ch.GetName(), Passed: ch.GetPassed(), Detail: ch.GetDetail()})
		}
		ec.Replay = fromPBReplay(c.GetReplay())
		r.Cases = append(r.Cases, ec)
	}
	r.Totals = agent.TotalsOf(r.Versions, r.Cases)
	return r
}

func toPBReplay(s *agent.ReplayScore) *pb.ReplayScore {
	if s == nil {
		return nil
	}
	calls := func(cs []agent.ToolCall) []*pb.ReplayCall {
		var out []*pb.ReplayCall
		for _, c := range cs {
			out = append(out, &pb.ReplayCall{Tool: c.Name, Arguments: c.Arguments})
		}
		return out
	}
	return &pb.ReplayScore{RecordedJobId: s.RecordedJobID, AnswerAgrees: s.AnswerAgrees, RecordedAnswer: s.RecordedAnswer,
		RecordedCalls: calls(s.RecordedCalls), ReplayedCalls: calls(s.ReplayedCalls), Matched: int32(s.Matched),
		Divergences: int32(s.Divergences), RecordedCostUsd: s.RecordedCostUSD, CostDeltaUsd: s.CostDeltaUSD,
		RecordedLatencyMs: s.RecordedLatencyMS, LatencyDeltaMs: s.LatencyDeltaMS,
		GuardTripped: s.GuardTripped, RecordedGuardTripped: s.RecordedGuardTripped}
}

func fromPBReplay(p *pb.ReplayScore) *agent.ReplayScore {
	if p == nil {
		return nil
	}
	calls := func(cs []*pb.ReplayCall) []agent.ToolCall {
		var out []agent.ToolCall
		for _, c := range cs {
			out = append(out, agent.ToolCall{Name: c.GetTool(), Arguments: c.GetArguments()})
		}
		return out
	}
	return &agent.ReplayScore{RecordedJobID: p.GetRecordedJobId(), AnswerAgrees: p.GetAnswerAgrees(), RecordedAnswer: p.GetRecordedAnswer(),
		RecordedCalls: calls(p.GetRecordedCalls()), ReplayedCalls: calls(p.GetReplayedCalls()), Matched: int(p.GetMatched()),
		Divergences: int(p.GetDivergences()), RecordedCostUSD: p.GetRecordedCostUsd(), CostDeltaUSD: p.GetCostDeltaUsd(),
		RecordedLatencyMS: p.GetRecordedLatencyMs(), LatencyDeltaMS: p.GetLatencyDeltaMs(),
		GuardTripped: p.GetGuardTripped(), RecordedGuardTripped: p.GetRecordedGuardTripped()}
}
