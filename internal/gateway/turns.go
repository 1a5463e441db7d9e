package gateway

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Start implements pb.AgentServiceServer: Stream's start without the
// stream, for clients that follow the turn another way (Resume,
// ListEvents) or not at all.
func (s *Service) Start(ctx context.Context, in *pb.StartRequest) (*pb.StartResponse, error) {
	req, run, err := s.start(ctx, in.GetTurn())
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return &pb.StartResponse{StreamId: run.GetID(), JobId: req.JobID}, nil
}

// start checks a request and starts its turn, or attaches to the run of
// the same request under its job id.
func (s *Service) start(ctx context.Context, in *pb.TurnRequest) (agent.TurnRequest, client.WorkflowRun, error) {
	req, err := s.Prepare(ctx, in)
	if err != nil {
		return req, nil, err
	}
	run, err := s.StartPrepared(ctx, req)
	return req, run, err
}

// MaxEventsPage is the most events a ListEvents page holds.
const MaxEventsPage = 1000

// MaxEventsWaitSec is the longest a ListEvents call waits for an event
// (wait_sec): short of the idle timeouts of common proxies, so that a
// long poll is answered before one cuts it.
const MaxEventsWaitSec = 60

// ListEvents implements pb.AgentServiceServer: one read of the turn's
// events as they are when it asks (EventSource.Read), never waiting on
// the turn; with wait_sec, a long poll for the next event. A page is cut
// short of maxPageBytes too, and is then not done.
func (s *Service) ListEvents(ctx context.Context, in *pb.ListEventsRequest) (*pb.ListEventsResponse, error) {
	if err := OwnStream(ctx, in.GetStreamId()); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	size, err := pageSize(in.GetPageSize(), MaxEventsPage, MaxEventsPage)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	if in.GetAfterIndex() < 0 {
		return nil, s.StatusOf(ctx, agent.ValidateAfter(in.GetAfterIndex(), 0))
	}
	if w := in.GetWaitSec(); w < 0 || w > MaxEventsWaitSec {
		return nil, s.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "wait_sec %d: want 0 (answer at once) to %d seconds", w, MaxEventsWaitSec))
	}
	wait, rctx := time.Duration(in.GetWaitSec())*time.Second, ctx
	if wait > 0 {
		// A gateway that shuts down ends the wait as it ends a stream:
		// read again, on another gateway.
		var stop context.CancelFunc
		rctx, stop = context.WithCancel(ctx)
		defer stop()
		defer context.AfterFunc(s.ending, stop)()
	}
	page, err := s.events.Read(rctx, in.GetStreamId(), in.GetAfterIndex(), size, wait)
	if err != nil && ctx.Err() == nil && rctx.Err() != nil {
		return nil, GoingAway(in.GetStreamId(), in.GetAfterIndex())
	}
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	if page.TenantID != "" && page.TenantID != TenantOf(ctx) {
		// A turn that runs as another tenant than its id names.
		return nil, s.StatusOf(ctx, agent.Errorf(agent.CodeNotFound, "stream %q not found", in.GetStreamId()))
	}
	out := &pb.ListEventsResponse{NextIndex: page.Next, Done: page.Done}
	bytes := 0
	for i, e := range page.Events {
		ev := toPBEvent(e)
		n := proto.Size(ev)
		if i > 0 && bytes+n > maxPageBytes {
			out.Done = false
			break
		}
		out.Events = append(out.Events, ev)
		bytes += n
	}
	return out, nil
}
