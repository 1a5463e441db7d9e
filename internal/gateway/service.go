package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
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
		o.TaskQueue = contract.TaskQueue
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
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
		return nil, err
	}
	if err := s.checkAgent(ctx, req); err != nil {
		if agent.ErrorCode(err).Class().Public {
			return nil, err
		}
		// The database is away: the turn checks the agent again when it
		// loads it, and waits for the database to come back.
		s.logger.Warn("agent check skipped", zap.String("tenant", req.TenantID), zap.Error(err))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	return turnclient.Start(sctx, s.client, s.taskQueue, req)
}

// checkAgent refuses a turn whose agent does not exist before anything is
// started; the turn checks again when it loads the agent.
func (s *Service) checkAgent(ctx context.Context, req agent.TurnRequest) error {
	if req.AgentID != "" {
		_, err := s.store.ActiveAgent(ctx, req.TenantID, req.AgentID)
		return err
	}
	r, err := s.store.Routing(ctx, req.TenantID)
	if err != nil {
		return err
	}
	if r.DefaultAgent == "" && len(r.Rules) == 0 {
		return agent.Errorf(agent.CodeNotFound, "tenant %q has neither routing rules nor a default agent: name an agent_id", req.TenantID)
	}
	return nil
}

// Invoke implements pb.AgentServiceServer.
func (s *Service) Invoke(ctx context.Context, in *pb.InvokeRequest) (*pb.TurnResult, error) {
	run, err := s.start(ctx, in.GetTurn())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	res, err := turnclient.Result(ctx, run)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return toPBResult(res, run.GetID()), nil
}

// Stream implements pb.AgentServiceServer.
func (s *Service) Stream(in *pb.StreamRequest, ss grpc.ServerStreamingServer[pb.StreamEvent]) error {
	run, err := s.start(ss.Context(), in.GetTurn())
	if err != nil {
		return s.status(ss.Context(), err)
	}
	return s.follow(ss, run.GetID(), 0)
}

// Resume implements pb.AgentServiceServer.
func (s *Service) Resume(in *pb.ResumeRequest, ss grpc.ServerStreamingServer[pb.StreamEvent]) error {
	if err := ownStream(ss.Context(), in.GetStreamId()); err != nil {
		return s.status(ss.Context(), err)
	}
	return s.follow(ss, in.GetStreamId(), in.GetAfterIndex())
}

func (s *Service) follow(ss grpc.ServerStreamingServer[pb.StreamEvent], streamID string, after int64) error {
	var sendErr error
	err := s.events.Follow(ss.Context(), streamID, after, func(e agent.Event) error {
		sendErr = ss.Send(toPBEvent(e))
		return sendErr
	})
	if err != nil && errors.Is(err, sendErr) {
		// The client's stream broke: gRPC's own error says how.
		return sendErr
	}
	return s.status(ss.Context(), err)
}

// ownStream refuses stream ids of other tenants as if they did not exist.
func ownStream(ctx context.Context, streamID string) error {
	tenant, err := agent.StreamTenant(streamID)
	if err != nil {
		return err
	}
	if tenant != tenantOf(ctx) {
		return agent.Errorf(agent.CodeNotFound, "stream %q not found", streamID)
	}
	return nil
}

// GetResult implements pb.AgentServiceServer.
func (s *Service) GetResult(ctx context.Context, in *pb.GetResultRequest) (*pb.TurnResult, error) {
	if in.GetResultRef() == "" {
		return nil, s.status(ctx, agent.Errorf(agent.CodeInvalid, "result_ref is required"))
	}
	res, err := s.store.ResultByRef(ctx, tenantOf(ctx), in.GetResultRef())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return toPBResult(res, contract.TurnWorkflowID(tenantOf(ctx), res.JobID)), nil
}

// ListAgents implements pb.AgentServiceServer.
func (s *Service) ListAgents(ctx context.Context, in *pb.ListAgentsRequest) (*pb.ListAgentsResponse, error) {
	tenant := tenantOf(ctx)
	agents, err := s.store.ListAgents(ctx, tenant)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	def, err := s.store.DefaultAgent(ctx, tenant)
	if err != nil && !agent.IsCode(err, agent.CodeNotFound) {
		return nil, s.status(ctx, err)
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
	if err := ownStream(ctx, in.GetStreamId()); err != nil {
		return nil, s.status(ctx, err)
	}
	d := agent.ApprovalDecision{CallID: in.GetCallId(), Approved: in.GetApproved(), Reason: in.GetReason(), Approver: in.GetApprover()}
	if err := d.Validate(); err != nil {
		return nil, s.status(ctx, err)
	}
	ack, err := turnclient.Approve(ctx, s.client, in.GetStreamId(), d)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &pb.ApproveResponse{CallId: ack.CallID, Outcome: ack.Outcome}, nil
}

// ListPendingApprovals implements pb.AgentServiceServer.
func (s *Service) ListPendingApprovals(ctx context.Context, in *pb.ListPendingApprovalsRequest) (*pb.ListPendingApprovalsResponse, error) {
	if err := ownStream(ctx, in.GetStreamId()); err != nil {
		return nil, s.status(ctx, err)
	}
	pending, err := turnclient.PendingApprovals(ctx, s.client, in.GetStreamId())
	if err != nil {
		return nil, s.status(ctx, err)
	}
	out := &pb.ListPendingApprovalsResponse{}
	for _, p := range pending {
		out.Approvals = append(out.Approvals, toPBPending(p))
	}
	return out, nil
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
		return nil, s.status(ctx, err)
	}
	msg := agent.SendMessage{Prompt: in.GetPrompt(), JobID: in.GetJobId()}
	if c := in.GetContext(); c != nil {
		msg.Context = toTurnRequest(&pb.TurnRequest{Context: c}, "").Context
	}
	if err := msg.Validate(); err != nil {
		return nil, s.status(ctx, err)
	}
	if err := s.checkAgent(ctx, agent.TurnRequest{TenantID: conv.TenantID, AgentID: conv.AgentID}); err != nil {
		return nil, s.status(ctx, err)
	}
	res, err := turnclient.SendMessage(ctx, s.client, s.taskQueue, conv, msg)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return &pb.SendMessageResponse{StreamId: res.TurnWorkflowID, JobId: res.JobID,
		ConversationId: contract.ConversationWorkflowID(conv.TenantID, conv.SessionID)}, nil
}
