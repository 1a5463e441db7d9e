// Package a2a serves the A2A protocol, 1.0 and 0.3 on one endpoint with
// one card: agent cards, and tasks that are turns, read from their event
// logs; 0.3 through a2a-go v0.3's JSON-RPC handler over the door's own
// request handler, 1.0 by the door's JSON-RPC binding over the same
// methods (a2a_v1.go says how the versions are told apart).
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
package a2a

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// A2A: the agents a tenant's catalog exposes through A2A (expose: [a2a])
// are A2A agents (protocol 0.3.0, the version github.com/a2aproject/a2a-go
// v0.3.x implements), each at A2APrefix+id on the HTTP API's listener:
// JSON-RPC there, its agent card at A2APrefix+id+"/.well-known/agent-card.json".
// The SDK's JSON-RPC handler frames the protocol (requests, SSE); the
// methods are a2aServer's, backed by durable turns instead of the SDK's
// in-memory task store and executor, so that any gateway answers for a
// task, after a restart too:
//
//   - a task is a turn; its id is the turn's stream id (turn/{tenant}/{job}),
//     which names its tenant, so another tenant's task is not found (any
//     of the tenant's A2A agents answers for any of its tasks);
//   - its contextId is a session: a message with a contextId goes to the
//     session's Conversation (SendMessage), one without starts a turn of
//     its own under a new contextId, which later messages may name;
//   - its state, status messages and artifacts are read from the turn's
//     event log (a2aTask.apply): tasks/get reads the log, message/stream
//     and tasks/resubscribe follow it.
//
// Identity comes only from the bearer token (the user role), as for the
// gRPC API; the agent card needs the token too, as the tenant whose agent
// it describes is the token's.

// A2APrefix is where the A2A agents answer: A2APrefix + agent id.
const A2APrefix = "/a2a/"

// A2AProtocolVersion is the A2A protocol version served (a2a-go v0.3.x's).
const A2AProtocolVersion = "0.3.0"

// Bounds of the A2A server.
const (
	// a2aCancelWait bounds how long tasks/cancel waits for the turn to
	// end, to answer with the canceled task.
	a2aCancelWait = 15 * time.Second
	// a2aMaxContextID bounds a contextId: it is a session id, and part of
	// the job id of each of its turns.
	a2aMaxContextID = 128
	// a2aArtifact names the answer's artifact.
	a2aArtifact = "answer"
)

// a2aServer serves a Service's agents over A2A: a2asrv.RequestHandler.
type a2aServer struct {
	s      *gateway.Service
	st     Store
	logger *zap.Logger
}

var _ a2asrv.RequestHandler = (*a2aServer)(nil)

// a2aRequestKey holds a request's agent id and base URL in its context.
type a2aRequestKey struct{}

type a2aRequest struct {
	agentID string
	url     string // the agent's JSON-RPC endpoint, as the client reached it
}

// registerA2A adds the A2A agents to mux.
func (a *server) registerA2A(mux *http.ServeMux) {
	m := &a2aServer{s: a.Service(), st: a.st, logger: a.Logger()}
	rpc := a2asrv.NewJSONRPCHandler(m)
	mux.Handle(A2APrefix+"{agent}", m.authenticated(a.endWithStreams(a.a2aVersions(m, rpc))))
	mux.Handle("GET "+A2APrefix+"{agent}"+a2asrv.WellKnownAgentCardPath, m.authenticated(http.HandlerFunc(m.serveCard)))
	mux.Handle("GET "+a2asrv.WellKnownAgentCardPath, m.authenticated(http.HandlerFunc(m.serveDefaultCard)))
}

// authenticated checks a request's bearer token (the user role) with the
// gRPC API's code and puts its caller and agent in the context.
func (m *a2aServer) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := metadata.MD{}
		if h := r.Header.Get("Authorization"); h != "" {
			md.Set("authorization", h)
		}
		ctx, err := m.s.Authorize(metadata.NewIncomingContext(r.Context(), md), pb.AgentService_Stream_FullMethodName)
		if err != nil {
			writeA2AErrorFor(w, r, m.classify(r.Context(), err, nil))
			return
		}
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		id := r.PathValue("agent")
		ctx = context.WithValue(ctx, a2aRequestKey{}, a2aRequest{agentID: id, url: scheme + "://" + r.Host + A2APrefix + id})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// endWithStreams ends a request when EndStreams is called: a stream
// lasts as long as its turn, which may wait a day for an approval, and
// http.Server.Shutdown would wait for it. Its client resubscribes, or
// reads the task, on another gateway.
func (a *server) endWithStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(a.Ending(), cancel)()
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

func a2aRequestOf(ctx context.Context) a2aRequest {
	r, _ := ctx.Value(a2aRequestKey{}).(a2aRequest)
	return r
}

// a2aSecurityScheme names the bearer token in agent cards.
const a2aSecurityScheme a2a.SecuritySchemeName = "bearer"

// agent is the request's agent, when the token's tenant exposes it
// through A2A.
func (m *a2aServer) agent(ctx context.Context) (agent.Agent, error) {
	id := a2aRequestOf(ctx).agentID
	ag, err := m.st.ActiveAgent(ctx, gateway.TenantOf(ctx), id)
	if agent.IsCode(err, agent.CodeNotFound) || (err == nil && !ag.Exposed(agent.ExposeA2A)) {
		return ag, fmt.Errorf("%s: %w", notServed(id), a2a.ErrInvalidRequest)
	}
	if err != nil {
		return ag, m.fail(ctx, err, nil)
	}
	return ag, nil
}

// notServed says that the token's tenant has no agent id exposed
// through A2A, whether it has none or does not expose it.
func notServed(id string) string { return fmt.Sprintf("no agent %q is served over A2A", id) }

// fail is err as an A2A error, with the message a client may see: an
// error the door made is kept as it is; any other is classified
// (classify), a NotFound as notFound.
func (m *a2aServer) fail(ctx context.Context, err error, notFound error) error {
	if _, _, ours := a2aCodeOf(err); ours {
		return err // already the door's, with its message
	}
	return m.classify(ctx, err, notFound)
}

// errA2AStop ends a follow early, without error.
var errA2AStop = errors.New("a2a: stop following")

// OnSendMessage implements a2asrv.RequestHandler: a turn, answered with
// its task when it ends or waits for approval (input-required), or once
// it has started when the client asks not to block.
func (m *a2aServer) OnSendMessage(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	ctx, release, err := m.s.HoldStream(ctx)
	if err != nil {
		return nil, m.fail(ctx, err, a2a.ErrInvalidParams)
	}
	defer release()
	if params != nil && params.Message != nil && params.Message.TaskID != "" {
		return m.continueTask(ctx, params)
	}
	turn, err := m.begin(ctx, params)
	if err != nil {
		return nil, err
	}
	return m.settle(ctx, newA2ATask(turn.streamID, turn.contextID), params, 0, a2a.ErrInvalidParams, turn.follow)
}

// settle follows a task's log (follow) into t until the task ends or
// waits for input at or after the event from, or at once when the client
// asks not to block, and answers with the task as it is then.
func (m *a2aServer) settle(ctx context.Context, t *a2aTask, params *a2a.MessageSendParams, from int64, notFound error,
	follow func(context.Context, func(agent.Event) error) error) (a2a.SendMessageResult, error) {
	blocking := params.Config == nil || params.Config.Blocking == nil || *params.Config.Blocking
	err := follow(ctx, func(e agent.Event) error {
		updates := t.apply(e)
		if e.Index < from {
			return nil // the task as it was before the answer
		}
		if !blocking || t.state.Terminal() || (t.state == a2a.TaskStateInputRequired && len(updates) > 0) {
			return errA2AStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errA2AStop) {
		return nil, m.fail(ctx, err, notFound)
	}
	return t.task(), nil
}

// OnSendMessageStream implements a2asrv.RequestHandler: a turn, streamed
// as its task, then its status and artifact updates as its log says. A
// message for an existing task answers it (answerTask), and the task
// streams on as tasks/resubscribe's does. A client that leaves leaves
// the turn running; it may resubscribe.
func (m *a2aServer) OnSendMessageStream(ctx context.Context, params *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	if params != nil && params.Message != nil && params.Message.TaskID != "" {
		return m.stream(ctx, a2a.ErrInvalidParams, func(ctx context.Context, yield func(a2a.Event, error) bool) error {
			if _, err := m.answerTask(ctx, params); err != nil {
				return err
			}
			return m.resubscribe(ctx, &a2a.TaskIDParams{ID: params.Message.TaskID}, yield)
		})
	}
	return m.stream(ctx, a2a.ErrInvalidParams, func(ctx context.Context, yield func(a2a.Event, error) bool) error {
		turn, err := m.begin(ctx, params)
		if err != nil {
			return err
		}
		t := newA2ATask(turn.streamID, turn.contextID)
		sent := false
		return turn.follow(ctx, func(e agent.Event) error {
			if !sent {
				sent = true
				if !yield(t.task(), nil) {
					return errA2AStop
				}
			}
			return t.yieldUpdates(e, yield)
		})
	})
}

// stream is the events run yields, with a stream slot of the caller's
// tenant held while it runs. run's error ends the stream, as an A2A
// error (notFound for a NotFound), unless it stops the stream or its
// client has left.
func (m *a2aServer) stream(ctx context.Context, notFound error, run func(context.Context, func(a2a.Event, error) bool) error) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ctx, release, err := m.s.HoldStream(ctx)
		if err != nil {
			yield(nil, m.fail(ctx, err, notFound))
			return
		}
		defer release()
		if err := run(ctx, yield); err != nil && !errors.Is(err, errA2AStop) && ctx.Err() == nil {
			yield(nil, m.fail(ctx, err, notFound))
		}
	}
}

// yieldUpdates folds e into the task and yields the updates it makes:
// errA2AStop once the client has left.
func (t *a2aTask) yieldUpdates(e agent.Event, yield func(a2a.Event, error) bool) error {
	for _, ev := range t.apply(e) {
		if !yield(ev, nil) {
			return errA2AStop
		}
	}
	return nil
}

// answerTask takes a message for an existing task as the answer to the
// question its turn asks (an ask_user call, input-required): the first
// that waits, or the one the message's metadata names ("call_id"). The
// answer is the caller's, with the token's roles. A message that decides
// (a2aDecisionOf), or one for a task that waits only for an approval,
// decides the call instead (decideTask). It returns the log's next index
// as it was before the answer. Both versions of the door take input this
// way.
func (m *a2aServer) answerTask(ctx context.Context, params *a2a.MessageSendParams) (int64, error) {
	in, err := decodeA2AMessage(params)
	if err != nil {
		return 0, err
	}
	t, next, done, err := m.read(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(in.taskID)})
	if err != nil {
		return 0, err
	}
	if done {
		return 0, a2aRefusal(agent.CodeConflict, "task %s has ended %s and takes no more input: send a new message in its contextId", in.taskID, t.state)
	}
	decision, decides := a2aDecisionOf(params.Message)
	var pending []agent.PendingQuestion
	if !decides {
		if pending, err = turnclient.PendingQuestions(ctx, m.s.Client(), in.taskID); err != nil {
			return 0, m.fail(ctx, err, a2a.ErrTaskNotFound)
		}
	}
	if len(pending) == 0 {
		return next, m.decideTask(ctx, in, decision, decides)
	}
	callID := in.callID
	if callID == "" {
		callID = pending[0].CallID
	}
	caller := gateway.CallerOf(ctx)
	a := caller.AnswerQuestion(callID, in.prompt)
	if err := a.Validate(); err != nil {
		return 0, fmt.Errorf("%s: %w", err.Error(), a2a.ErrInvalidParams)
	}
	if _, err := m.s.AnswerQuestion(ctx, in.taskID, a); err != nil {
		return 0, m.fail(ctx, err, a2a.ErrInvalidParams)
	}
	return next, nil
}

// continueTask answers the question of a task that waits for input and
// follows it, as message/send does a new task: until it ends or waits
// again, or at once when the client asks not to block.
func (m *a2aServer) continueTask(ctx context.Context, params *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	next, err := m.answerTask(ctx, params)
	if err != nil {
		return nil, err
	}
	id := string(params.Message.TaskID)
	return m.settle(ctx, newA2ATask(id, a2aContextOf(id)), params, next, a2a.ErrTaskNotFound,
		func(ctx context.Context, send func(agent.Event) error) error {
			return m.s.Events().Follow(ctx, id, 0, send)
		})
}

// OnResubscribeToTask implements a2asrv.RequestHandler: the task as its
// log has it now, then its updates until it ends.
func (m *a2aServer) OnResubscribeToTask(ctx context.Context, params *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return m.stream(ctx, a2a.ErrTaskNotFound, func(ctx context.Context, yield func(a2a.Event, error) bool) error {
		return m.resubscribe(ctx, params, yield)
	})
}

// resubscribe yields the task as its log has it now, then its updates
// until it ends.
func (m *a2aServer) resubscribe(ctx context.Context, params *a2a.TaskIDParams, yield func(a2a.Event, error) bool) error {
	t, next, done, err := m.read(ctx, params)
	if err != nil {
		return err
	}
	if !yield(t.task(), nil) || done {
		return nil
	}
	return m.s.Events().Follow(ctx, string(params.ID), max(next-1, 0), func(e agent.Event) error {
		return t.yieldUpdates(e, yield)
	})
}

// OnGetTask implements a2asrv.RequestHandler: the task as its turn's log
// has it.
func (m *a2aServer) OnGetTask(ctx context.Context, query *a2a.TaskQueryParams) (*a2a.Task, error) {
	if query == nil {
		return nil, fmt.Errorf("params.id is required: %w", a2a.ErrInvalidParams)
	}
	t, _, _, err := m.read(ctx, &a2a.TaskIDParams{ID: query.ID})
	if err != nil {
		return nil, err
	}
	return t.task(), nil
}

// OnCancelTask implements a2asrv.RequestHandler: cancels the task's turn
// and answers with the task once it has ended (or after a2aCancelWait).
func (m *a2aServer) OnCancelTask(ctx context.Context, params *a2a.TaskIDParams) (*a2a.Task, error) {
	t, _, done, err := m.read(ctx, params)
	if err != nil {
		return nil, err
	}
	if done {
		return nil, fmt.Errorf("task %s has already ended %s: %w", params.ID, t.state, a2a.ErrTaskNotCancelable)
	}
	id := string(params.ID)
	req := agent.CancelRequest{Reason: "cancelled over A2A", RequestedBy: gateway.CallerOf(ctx).Name}
	if err := m.s.CancelTurn(ctx, id, req); err != nil {
		if t, _, done, rerr := m.read(ctx, params); rerr == nil && done {
			return nil, fmt.Errorf("task %s has already ended %s: %w", id, t.state, a2a.ErrTaskNotCancelable)
		}
		return nil, m.fail(ctx, err, a2a.ErrTaskNotFound)
	}
	wctx, cancel := context.WithTimeout(ctx, a2aCancelWait)
	defer cancel()
	canceled := newA2ATask(id, t.contextID)
	err = m.s.Events().Follow(wctx, id, 0, func(e agent.Event) error {
		canceled.apply(e)
		return nil
	})
	if err != nil && wctx.Err() == nil {
		// Not followed (its tenant's streams are all open, say): the
		// task as it was read before the cancel.
		telemetry.Logger(ctx, m.logger).Warn("a2a cancel: the turn's log was not followed", zap.String("stream_id", id), zap.Error(err))
		return t.task(), nil
	}
	return canceled.task(), nil
}

// read reads the task's turn log: the task, the log's next index and
// whether the turn has ended. Another tenant's task is not found.
func (m *a2aServer) read(ctx context.Context, params *a2a.TaskIDParams) (*a2aTask, int64, bool, error) {
	if params == nil || params.ID == "" {
		return nil, 0, false, fmt.Errorf("params.id is required: %w", a2a.ErrInvalidParams)
	}
	if _, err := m.agent(ctx); err != nil {
		return nil, 0, false, err
	}
	return m.readLog(ctx, string(params.ID))
}

// readLog reads the log of the task id, as read does, for an agent
// already found to be served: as every door reads a log
// (Service.Events: at once, also during a local model call).
func (m *a2aServer) readLog(ctx context.Context, id string) (*a2aTask, int64, bool, error) {
	if err := gateway.OwnStream(ctx, id); err != nil {
		return nil, 0, false, fmt.Errorf("task %q not found: %w", id, a2a.ErrTaskNotFound)
	}
	t := newA2ATask(id, a2aContextOf(id))
	var after int64
	for {
		page, err := m.s.Events().Read(ctx, id, after, gateway.MaxEventsPage, 0)
		if err != nil {
			return nil, 0, false, m.fail(ctx, err, a2a.ErrTaskNotFound)
		}
		if page.TenantID != "" && page.TenantID != gateway.TenantOf(ctx) {
			return nil, 0, false, fmt.Errorf("task %q not found: %w", id, a2a.ErrTaskNotFound)
		}
		for _, e := range page.Events {
			t.apply(e)
			after = e.Index
		}
		if len(page.Events) == 0 || after >= page.Next-1 {
			return t, page.Next, page.Done, nil
		}
	}
}

// OnGetTaskPushConfig implements a2asrv.RequestHandler: no push notifications.
func (m *a2aServer) OnGetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

// OnListTaskPushConfig implements a2asrv.RequestHandler: no push notifications.
func (m *a2aServer) OnListTaskPushConfig(context.Context, *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

// OnSetTaskPushConfig implements a2asrv.RequestHandler: no push notifications.
func (m *a2aServer) OnSetTaskPushConfig(context.Context, *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

// OnDeleteTaskPushConfig implements a2asrv.RequestHandler: no push notifications.
func (m *a2aServer) OnDeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigParams) error {
	return a2a.ErrPushNotificationNotSupported
}

// OnGetExtendedAgentCard implements a2asrv.RequestHandler: the card, as
// the public one needs the token already.
func (m *a2aServer) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	ag, err := m.agent(ctx)
	if err != nil {
		return nil, err
	}
	return a2aCard(ag, a2aRequestOf(ctx).url), nil
}

// Door serves A2A (1.0 and 0.3) on the HTTP API's listener.
// Store is what the door reads of a tenant's agents (store.Store, through
// internal/gateway/doors).
type Store interface {
	ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error)
	// DefaultAgent is the tenant's default agent's id; "" for none.
	DefaultAgent(ctx context.Context, tenantID string) (string, error)
}

// New is the A2A door, serving the agents of st.
func New(st Store) gateway.Door {
	return gateway.NewDoor(agent.ChannelA2A, func(mux *http.ServeMux, api *gateway.HTTPAPI) { (&server{HTTPAPI: api, st: st}).registerA2A(mux) })
}

// server is the door on one HTTP API: its handlers are server's methods,
// with the core's helpers and turn service (Service) at hand.
type server struct {
	*gateway.HTTPAPI
	st Store
}
