package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog/pglive"
	"github.com/agentflow/agentflow/internal/gateway/evalapi"
	"github.com/agentflow/agentflow/internal/gateway/knowledgeapi"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// EventSource follows a turn's event log (eventlog.Follower).
type EventSource interface {
	Follow(ctx context.Context, streamID string, after int64, send func(agent.Event) error) error
	// FollowNew follows the stream that start starts, from its first event.
	FollowNew(ctx context.Context, streamID string, start func() (string, error), send func(agent.Event) error) error
	// Read returns a page of the events after after (at most limit; 0:
	// all) as they are now, without waiting on the turn; with wait, up to
	// wait for the first when there is none yet.
	Read(ctx context.Context, streamID string, after int64, limit int, wait time.Duration) (agent.EventsPage, error)
}

// Options configure a Service.
type Options struct {
	Client client.Client
	Store  *store.Store
	Events EventSource
	Tokens []Token // the bearer tokens accepted, with their tenants and roles
	// OIDC, when set, accepts the JWTs of an OIDC issuer beside Tokens:
	// their claims give the tenant, roles and name.
	OIDC      *oidcauth.Verifier
	TaskQueue string
	Logger    *zap.Logger
	// MaxStreamsPerTenant bounds each tenant's open streams in this
	// process: every request that follows a turn's events, on any door
	// (gRPC Stream and Resume, ListEvents calls that wait, SSE, WebSocket
	// connections, chat completions, the AI SDK, AG-UI, A2A and MCP),
	// together. Default
	// (0): DefaultMaxStreamsPerTenant.
	MaxStreamsPerTenant int
	// Vault applies the tenants' PII redaction to prompts before a turn
	// or a conversation hears of them (nil: none is applied).
	Vault *redact.Vault
	// Tenants, when set, is the process's cache of tenants' runtime
	// settings: a turn that names no agent is checked against it (a
	// default agent or rules) instead of reading the catalog, and a
	// prompt is redacted by the tenant's PII settings.
	Tenants *tenant.Cache
	// Secrets resolves the secrets a door checks a request with (the
	// Telegram door's webhook_secret), for the tenant of the context
	// (secrets.WithTenant); nil: no door can check one.
	Secrets secrets.Resolver
	// Payloads decodes payloads the Service reads from histories (a run's
	// request, a conversation's input): payloadstore.Converter when the
	// client keeps large payloads in an object store. Default: the SDK's
	// default data converter.
	Payloads converter.DataConverter
	// Knowledge serves the collections: the HTTP API's routes and
	// KnowledgeService (KnowledgeOptions).
	Knowledge KnowledgeOptions
	// Memories serves the callers' long-term memories: /v1/memories
	// (memories.go) and KnowledgeService's memory methods. Default: none,
	// and they answer Unavailable.
	Memories MemoryStore
	// Timeline links turns' timelines to the Temporal Web UI and a trace
	// viewer (timeline.go). Default: no links.
	Timeline TimelineOptions
}

// Service implements pb.AgentServiceServer.
type Service struct {
	pb.UnimplementedAgentServiceServer
	client    client.Client
	store     *store.Store
	events    EventSource
	tokens    []Token
	oidc      *oidcauth.Verifier
	taskQueue string
	logger    *zap.Logger
	tenants   *tenant.Cache
	vault     *redact.Vault
	secrets   secrets.Resolver
	payloads  converter.DataConverter
	// knowledge serves KnowledgeService and the knowledge routes.
	knowledge *knowledgeapi.API
	memories  MemoryStore
	timeline  TimelineOptions
	// channel is the door whose turns this Service starts
	// (agent.TurnRequest.Channel): agent.ChannelGRPC, or the one a copy
	// made for a door (forChannel) names.
	channel string
	// starting holds a slot per turn being started (maxStarting).
	starting chan struct{}
	// streams counts each tenant's open streams.
	streams *streamSlots
	// ending is done once EndStreams is called: Stream and Resume calls
	// end with GoingAway, and new ones are refused with it.
	ending     context.Context
	endStreams context.CancelFunc
}

// maxStarting bounds the turns a gateway process starts at once. A burst of
// a thousand Stream calls would otherwise put a thousand starts on the
// server together, and on a loaded server the last of them outlast the
// client's per-call timeout all at once; taking turns, each start is quick
// and the burst is through sooner (BENCHMARKS.md, scale).
const maxStarting = 64

// New returns a Service; it needs at least one token, or OIDC.
func New(o Options) (*Service, error) {
	if len(o.Tokens) == 0 && o.OIDC == nil {
		return nil, errors.New("gateway: no bearer tokens configured (AGENTFLOW_TOKENS=<token>=<tenant>[:<roles>[:<name>]],…, or an OIDC issuer, AGENTFLOW_OIDC_ISSUER)")
	}
	for _, t := range o.Tokens {
		if t.Tenant == "" || len(t.Roles) == 0 || t.hash == [32]byte{} {
			return nil, fmt.Errorf("gateway: token %q: make tokens with NewToken or ParseTokens", t.Name)
		}
	}
	o.TaskQueue = cmp.Or(o.TaskQueue, contract.TaskQueue)
	o.Logger = cmp.Or(o.Logger, zap.NewNop())
	switch {
	case o.MaxStreamsPerTenant < 0:
		return nil, fmt.Errorf("gateway: %d streams per tenant: want a positive number (AGENTFLOW_MAX_STREAMS_PER_TENANT)", o.MaxStreamsPerTenant)
	case o.MaxStreamsPerTenant == 0:
		o.MaxStreamsPerTenant = DefaultMaxStreamsPerTenant
	}
	streams := newStreamSlots(o.MaxStreamsPerTenant)
	s := &Service{client: o.Client, store: o.Store, events: heldEvents{src: o.Events, streams: streams}, tokens: o.Tokens, oidc: o.OIDC,
		taskQueue: o.TaskQueue, logger: o.Logger, tenants: o.Tenants, vault: o.Vault, secrets: o.Secrets, starting: make(chan struct{}, maxStarting), streams: streams,
		channel: agent.ChannelGRPC, payloads: o.Payloads}
	if s.payloads == nil {
		s.payloads = converter.GetDefaultDataConverter()
	}
	s.knowledge = newKnowledge(s, o)
	s.memories = o.Memories
	s.timeline = o.Timeline
	s.ending, s.endStreams = context.WithCancel(context.Background())
	return s, nil
}

// forChannel is the Service for the door channel: the same Service, whose
// turns and messages carry channel. The copy shares every slot, stream
// and client with s; only the channel differs, and no request can name
// another.
func (s *Service) forChannel(channel string) *Service {
	c := *s
	c.channel = channel
	return &c
}

// EndStreams ends the Stream and Resume calls being served, each with
// GoingAway (Unavailable, saying after which event to resume), and
// refuses new ones the same way: for a gateway that is shutting down,
// whose gRPC server's GracefulStop would otherwise wait for every turn
// being followed to end. Call it once GracefulStop has begun (it sends
// the clients GOAWAY).
func (s *Service) EndStreams() { s.endStreams() }

// Register adds the AgentService to g. Calls reach it unauthenticated
// unless g has the interceptors NewGRPCServer installs.
func (s *Service) Register(g *grpc.Server) { pb.RegisterAgentServiceServer(g, s) }

// NewGRPCServer returns a server with the services (cat may be nil),
// authentication, health and reflection.
func NewGRPCServer(s *Service, cat *CatalogService, opts ...grpc.ServerOption) *grpc.Server {
	opts = append(opts, grpc.InTapHandle(s.tapAuth), grpc.ChainUnaryInterceptor(s.unaryAuth), grpc.ChainStreamInterceptor(s.streamAuth))
	g := grpc.NewServer(opts...)
	s.Register(g)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(pb.AgentService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	if cat != nil {
		pb.RegisterCatalogServiceServer(g, catalogServer{Service: cat.api(s), c: cat})
		hs.SetServingStatus(pb.CatalogService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	}
	evalapi.New(s.store, s.client, s.taskQueue, apiCore{s}).RegisterGRPC(g)
	hs.SetServingStatus(pb.EvalService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	s.knowledge.RegisterGRPC(g)
	hs.SetServingStatus(pb.KnowledgeService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(g, hs)
	reflection.Register(g)
	return g
}

// Invoke implements pb.AgentServiceServer.
func (s *Service) Invoke(ctx context.Context, in *pb.InvokeRequest) (*pb.TurnResult, error) {
	req, run, err := s.start(ctx, in.GetTurn())
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	res, err := s.result(ctx, req, run)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return toPBResult(res, run.GetID()), nil
}

// result is a started turn's result. A turn with a window for Workflow
// Streams subscribers (stream_window_sec) closes only once the window has
// passed, but it stores its result before its last event: the result is
// read from the store once the log has ended, so the window delays the
// workflow's close and nothing its caller waits for. A turn that ends
// with no stored result (one rejected before it started) is read from
// the workflow.
func (s *Service) result(ctx context.Context, req agent.TurnRequest, run client.WorkflowRun) (agent.TurnResult, error) {
	if req.StreamWindow() > 0 {
		err := s.events.Follow(ctx, run.GetID(), 0, func(agent.Event) error { return nil })
		if err != nil {
			return agent.TurnResult{}, err
		}
		res, err := s.store.Result(ctx, req.TenantID, req.JobID)
		if err == nil {
			return res, nil
		}
		if !agent.IsCode(err, agent.CodeNotFound) {
			return agent.TurnResult{}, err
		}
	}
	return turnclient.Result(ctx, run)
}

// Stream implements pb.AgentServiceServer.
func (s *Service) Stream(in *pb.StreamRequest, ss grpc.ServerStreamingServer[pb.StreamEvent]) error {
	ctx := ss.Context()
	req, err := s.Prepare(ctx, in.GetTurn())
	if err != nil {
		return s.StatusOf(ctx, err)
	}
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	return s.send(ss, streamID, 0, func(ctx context.Context, send func(agent.Event) error) error {
		return s.FollowNew(ctx, req, nil, send)
	})
}

// Resume implements pb.AgentServiceServer.
func (s *Service) Resume(in *pb.ResumeRequest, ss grpc.ServerStreamingServer[pb.StreamEvent]) error {
	ctx := ss.Context()
	if err := OwnStream(ctx, in.GetStreamId()); err != nil {
		return s.StatusOf(ctx, err)
	}
	return s.send(ss, in.GetStreamId(), in.GetAfterIndex(), func(ctx context.Context, send func(agent.Event) error) error {
		return s.events.Follow(ctx, in.GetStreamId(), in.GetAfterIndex(), send)
	})
}

// send runs follow with a function that sends events to the client, and
// returns its outcome as the call's status. A gateway that ends its
// streams (EndStreams) ends this one with GoingAway, naming the last
// event the client got: after it is where the client resumes.
func (s *Service) send(ss grpc.ServerStreamingServer[pb.StreamEvent], streamID string, after int64,
	follow func(ctx context.Context, send func(agent.Event) error) error) error {
	if s.ending.Err() != nil {
		return GoingAway(streamID, after)
	}
	ctx, cancel := context.WithCancel(ss.Context())
	defer cancel()
	defer context.AfterFunc(s.ending, cancel)()
	last := after
	var sendErr error
	err := follow(ctx, func(e agent.Event) error {
		if sendErr = ss.Send(toPBEvent(e)); sendErr == nil {
			last = e.Index
		}
		return sendErr
	})
	switch {
	case err != nil && errors.Is(err, sendErr):
		// The client's stream broke: gRPC's own error says how.
		return sendErr
	case err != nil && s.ending.Err() != nil && ss.Context().Err() == nil:
		return GoingAway(streamID, last)
	}
	return s.StatusOf(ss.Context(), err)
}

// GetResult implements pb.AgentServiceServer.
func (s *Service) GetResult(ctx context.Context, in *pb.GetResultRequest) (*pb.TurnResult, error) {
	if in.GetResultRef() == "" {
		return nil, s.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "result_ref is required"))
	}
	res, err := s.store.ResultByRef(ctx, TenantOf(ctx), in.GetResultRef())
	if err == nil && ownPerson(ctx, "result", res.JobID) != nil {
		err = agent.Errorf(agent.CodeNotFound, "result %s not found", Clip(in.GetResultRef()))
	}
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return toPBResult(res, contract.TurnWorkflowID(TenantOf(ctx), res.JobID)), nil
}

// Cancel implements pb.AgentServiceServer.
func (s *Service) Cancel(ctx context.Context, in *pb.CancelRequest) (*pb.CancelResponse, error) {
	if err := OwnStream(ctx, in.GetStreamId()); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	req := agent.CancelRequest{Reason: in.GetReason(), RequestedBy: CallerOf(ctx).Name}
	if err := req.Validate(); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	// The reason is kept with the turn and logged.
	if err := s.redactForTurn(ctx, in.GetStreamId(), &req.Reason); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	if err := s.CancelTurn(ctx, in.GetStreamId(), req); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return &pb.CancelResponse{}, nil
}

// CancelTurn asks a running turn to stop (turnclient.Cancel; a turn that
// has ended is CodeConflict), then interrupts its model call in flight on
// the live path (pglive.Interrupt): the worker running it stops it at
// once, where the signal alone would reach a local call only at its
// workflow task's next heartbeat. Every door's cancel is this one.
func (s *Service) CancelTurn(ctx context.Context, workflowID string, req agent.CancelRequest) error {
	if err := turnclient.Cancel(ctx, s.client, workflowID, req); err != nil {
		return err
	}
	if s.store == nil {
		return nil
	}
	if err := pglive.Interrupt(ctx, s.store.Pool(), workflowID); err != nil {
		// The signal is in: the turn stops all the same, later.
		s.logger.Warn("interrupting the model call failed", zap.String("stream_id", workflowID), zap.Error(err))
	}
	return nil
}

func NewJobID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return time.Now().UTC().Format("20060102-150405-") + hex.EncodeToString(b[:])
}

// pageSize is a request's page_size: def when 0, else 1 to most.
func pageSize(n int32, def, most int) (int, error) {
	switch {
	case n < 0 || int(n) > most:
		return 0, agent.Errorf(agent.CodeInvalid, "page_size %d: want 0 (%d) to %d", n, def, most)
	case n == 0:
		return def, nil
	}
	return int(n), nil
}
