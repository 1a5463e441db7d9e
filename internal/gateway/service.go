package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"github.com/agentflow/agentflow/workflows"
)

// EventSource follows a turn's event log (internal/stream.Follower).
type EventSource interface {
	Follow(ctx context.Context, streamID string, after int64, send func(agent.Event) error) error
}

// Options configure a Service.
type Options struct {
	Client    client.Client
	Store     *store.Store
	Events    EventSource
	Tokens    map[string]string // bearer token → tenant
	TaskQueue string
	Logger    *zap.Logger
}

// Service implements pb.AgentServiceServer.
type Service struct {
	pb.UnimplementedAgentServiceServer
	client    client.Client
	store     *store.Store
	events    EventSource
	tokens    map[string]string
	taskQueue string
	logger    *zap.Logger
}

// New returns a Service; it needs at least one token.
func New(o Options) (*Service, error) {
	if len(o.Tokens) == 0 {
		return nil, errors.New("gateway: no bearer tokens configured (AGENTFLOW_TOKENS=token=tenant,…)")
	}
	for tok, tenant := range o.Tokens {
		if tok == "" || agent.ValidateID("tenant", tenant) != nil {
			return nil, fmt.Errorf("gateway: token for tenant %q: want a non-empty token and a valid tenant id", tenant)
		}
	}
	if o.TaskQueue == "" {
		o.TaskQueue = workflows.TaskQueue
	}
	return &Service{client: o.Client, store: o.Store, events: o.Events, tokens: o.Tokens, taskQueue: o.TaskQueue, logger: o.Logger}, nil
}

// Register adds the AgentService to g. Calls reach it unauthenticated
// unless g has the interceptors NewGRPCServer installs.
func (s *Service) Register(g *grpc.Server) { pb.RegisterAgentServiceServer(g, s) }

// NewGRPCServer returns a server with the services (cat may be nil),
// authentication, health and reflection.
func NewGRPCServer(s *Service, cat *CatalogService, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.ChainUnaryInterceptor(s.unaryAuth), grpc.ChainStreamInterceptor(s.streamAuth))
	g := grpc.NewServer(opts...)
	s.Register(g)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(pb.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if cat != nil {
		pb.RegisterCatalogServiceServer(g, cat)
		hs.SetServingStatus(pb.CatalogService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	return g
}

// startTimeout bounds starting a turn; the turn itself is not bound to the RPC.
const startTimeout = 30 * time.Second

// start validates a request and starts its turn, or attaches to the run
// with the same job id. It returns the run.
func (s *Service) start(ctx context.Context, in *pb.TurnRequest) (client.WorkflowRun, error) {
	tenant := tenantOf(ctx)
	req := toTurnRequest(in, tenant)
	req.Normalize()
	if req.JobID == "" {
		req.JobID = newJobID()
	}
	if err := req.Validate(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.checkAgent(ctx, req); err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	run, err := s.client.ExecuteWorkflow(sctx, workflows.StartTurnOptions(s.taskQueue, req), workflows.AgentTurnName, req)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "start turn: %v", err)
	}
	return run, nil
}

// checkAgent refuses a turn whose agent does not exist before anything is
// started; the turn checks again when it loads the agent.
func (s *Service) checkAgent(ctx context.Context, req agent.TurnRequest) error {
	if req.AgentID != "" {
		if _, err := s.store.ActiveAgent(ctx, req.TenantID, req.AgentID); err != nil {
			return toStatus(err)
		}
		return nil
	}
	r, err := s.store.Routing(ctx, req.TenantID)
	if err != nil {
		return toStatus(err)
	}
	if r.DefaultAgent == "" && len(r.Rules) == 0 {
		return status.Errorf(codes.NotFound, "tenant %q has neither routing rules nor a default agent: name an agent_id", req.TenantID)
	}
	return nil
}

// Invoke implements pb.AgentServiceServer.
func (s *Service) Invoke(ctx context.Context, in *pb.InvokeRequest) (*pb.TurnResult, error) {
	run, err := s.start(ctx, in.GetTurn())
	if err != nil {
		return nil, err
	}
	res, err := turnResult(ctx, run)
	if err != nil {
		return nil, err
	}
	return toPBResult(res, run.GetID()), nil
}

// turnResult waits for a turn: a failed turn is a result, not an error.
func turnResult(ctx context.Context, run client.WorkflowRun) (agent.TurnResult, error) {
	var res agent.TurnResult
	err := run.Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) && app.HasDetails() {
		var failed agent.TurnResult
		if app.Details(&failed) == nil && failed.Status != "" {
			return failed, nil
		}
	}
	if ctx.Err() != nil {
		return res, status.FromContextError(ctx.Err()).Err()
	}
	return res, status.Errorf(codes.Internal, "turn %s: %v", run.GetID(), err)
}

// Stream implements pb.AgentServiceServer.
func (s *Service) Stream(in *pb.StreamRequest, ss grpc.ServerStreamingServer[pb.StreamEvent]) error {
	run, err := s.start(ss.Context(), in.GetTurn())
	if err != nil {
		return err
	}
	return s.follow(ss, run.GetID(), 0)
}

// Resume implements pb.AgentServiceServer.
func (s *Service) Resume(in *pb.ResumeRequest, ss grpc.ServerStreamingServer[pb.StreamEvent]) error {
	if err := s.ownStream(ss.Context(), in.GetStreamId()); err != nil {
		return err
	}
	return s.follow(ss, in.GetStreamId(), in.GetAfterIndex())
}

func (s *Service) follow(ss grpc.ServerStreamingServer[pb.StreamEvent], streamID string, after int64) error {
	err := s.events.Follow(ss.Context(), streamID, after, func(e agent.Event) error {
		return ss.Send(toPBEvent(e))
	})
	if err != nil {
		if ss.Context().Err() != nil {
			return status.FromContextError(ss.Context().Err()).Err()
		}
		if _, ok := status.FromError(err); ok && !isDomain(err) {
			return err
		}
		return toStatus(err)
	}
	return nil
}

// ownStream refuses stream ids of other tenants as if they did not exist.
func (s *Service) ownStream(ctx context.Context, streamID string) error {
	tenant, err := agent.StreamTenant(streamID)
	if err != nil {
		return toStatus(err)
	}
	if tenant != tenantOf(ctx) {
		return status.Errorf(codes.NotFound, "stream %q not found", streamID)
	}
	return nil
}

// GetResult implements pb.AgentServiceServer.
func (s *Service) GetResult(ctx context.Context, in *pb.GetResultRequest) (*pb.TurnResult, error) {
	if in.GetResultRef() == "" {
		return nil, status.Error(codes.InvalidArgument, "result_ref is required")
	}
	res, err := s.store.ResultByRef(ctx, tenantOf(ctx), in.GetResultRef())
	if err != nil {
		return nil, toStatus(err)
	}
	return toPBResult(res, workflows.TurnWorkflowID(tenantOf(ctx), res.JobID)), nil
}

// ListAgents implements pb.AgentServiceServer.
func (s *Service) ListAgents(ctx context.Context, in *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	tenant := tenantOf(ctx)
	agents, err := s.store.ListAgents(ctx, tenant)
	if err != nil {
		return nil, toStatus(err)
	}
	def, err := s.store.DefaultAgent(ctx, tenant)
	if err != nil && !agent.IsCode(err, agent.CodeNotFound) {
		return nil, toStatus(err)
	}
	out := &pb.ListAgentsResponse{}
	for _, a := range agents {
		if in.GetAgentId() != "" && a.ID != in.GetAgentId() {
			continue
		}
		if in.GetTool() != "" {
			if _, ok := a.Tool(in.GetTool()); !ok {
				continue
			}
		}
		out.Agents = append(out.Agents, toPBAgent(a, a.ID == def))
	}
	return out, nil
}

// Approve implements pb.AgentServiceServer.
func (s *Service) Approve(ctx context.Context, in *pb.ApproveRequest) (*pb.ApproveResponse, error) {
	if err := s.ownStream(ctx, in.GetStreamId()); err != nil {
		return nil, err
	}
	d := agent.ApprovalDecision{CallID: in.GetCallId(), Approved: in.GetApproved(), Reason: in.GetReason(), Approver: in.GetApprover()}
	if err := d.Validate(); err != nil {
		return nil, toStatus(err)
	}
	h, err := s.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: in.GetStreamId(), UpdateName: workflows.UpdateApprove, Args: []any{d},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var ack workflows.ApprovalAck
	if err == nil {
		err = h.Get(ctx, &ack)
	}
	if err != nil {
		return nil, workflowStatus(in.GetStreamId(), err)
	}
	return &pb.ApproveResponse{CallId: ack.CallID, Outcome: ack.Outcome}, nil
}

// ListPendingApprovals implements pb.AgentServiceServer.
func (s *Service) ListPendingApprovals(ctx context.Context, in *pb.ListPendingApprovalsRequest) (*pb.ListPendingApprovalsResponse, error) {
	if err := s.ownStream(ctx, in.GetStreamId()); err != nil {
		return nil, err
	}
	v, err := s.client.QueryWorkflow(ctx, in.GetStreamId(), "", workflows.QueryPendingApprovals)
	if err != nil {
		return nil, workflowStatus(in.GetStreamId(), err)
	}
	var pending []agent.PendingApproval
	if err := v.Get(&pending); err != nil {
		return nil, status.Errorf(codes.Internal, "decode pending approvals: %v", err)
	}
	out := &pb.ListPendingApprovalsResponse{}
	for _, p := range pending {
		out.Approvals = append(out.Approvals, toPBPending(p))
	}
	return out, nil
}

// workflowStatus maps an error from a workflow call: a missing workflow is
// NotFound, a refused update keeps the workflow's code and message.
func workflowStatus(workflowID string, err error) error {
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		if strings.Contains(nf.Message, "already completed") {
			return status.Errorf(codes.FailedPrecondition, "turn %q has ended: nothing waits for approval", workflowID)
		}
		return status.Errorf(codes.NotFound, "stream %q not found", workflowID)
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return status.Error(codeOf(agent.Code(app.Type())), app.Message())
	}
	return status.Errorf(codes.Unavailable, "%s: %v", workflowID, err)
}

func isDomain(err error) bool {
	var e *agent.Error
	return errors.As(err, &e)
}

func codeOf(c agent.Code) codes.Code {
	switch c {
	case agent.CodeInvalid:
		return codes.InvalidArgument
	case agent.CodeNotFound:
		return codes.NotFound
	case agent.CodeConflict:
		return codes.FailedPrecondition
	case agent.CodeLimit:
		return codes.ResourceExhausted
	case agent.CodeUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

// toStatus maps a domain error to its gRPC status, keeping its message.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return status.FromContextError(err).Err()
	}
	var e *agent.Error
	if errors.As(err, &e) {
		return status.Error(codeOf(e.Code), strings.TrimSpace(err.Error()))
	}
	return status.Error(codes.Internal, err.Error())
}

func newJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405-") + hex.EncodeToString(b[:])
}

// SendMessage implements pb.AgentServiceServer.
func (s *Service) SendMessage(ctx context.Context, in *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	conv := agent.ConversationInput{TenantID: tenantOf(ctx), SessionID: in.GetSessionId(), AgentID: in.GetAgentId(), History: in.GetHistory()}
	if err := conv.Validate(); err != nil {
		return nil, toStatus(err)
	}
	msg := agent.SendMessage{Prompt: in.GetPrompt(), JobID: in.GetJobId()}
	if c := in.GetContext(); c != nil {
		msg.Context = toTurnRequest(&pb.TurnRequest{Context: c}, "").Context
	}
	if err := msg.Validate(); err != nil {
		return nil, toStatus(err)
	}
	if err := s.checkAgent(ctx, agent.TurnRequest{TenantID: conv.TenantID, AgentID: conv.AgentID}); err != nil {
		return nil, err
	}
	res, err := workflows.SendMessage(ctx, s.client, s.taskQueue, conv, msg)
	if err != nil {
		return nil, workflowStatus(workflows.ConversationWorkflowID(conv.TenantID, conv.SessionID), err)
	}
	return &pb.SendMessageResponse{StreamId: res.TurnWorkflowID, JobId: res.JobID,
		ConversationId: workflows.ConversationWorkflowID(conv.TenantID, conv.SessionID)}, nil
}
