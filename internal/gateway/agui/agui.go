// Package agui serves the AG-UI protocol (1.0) at AGUIPath: RunAgentInput
// in, AG-UI's event stream out, for the agents the catalog exposes
// through it; a turn that waits for a person is an interrupt of the run,
// which the client's next run resumes.
//
// A door: it builds on the gateway's core and must not import another door,
// the workflows or the store.
package agui

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// AG-UI: an agent the tenant's catalog exposes through AG-UI (expose:
// [ag_ui]) is an AG-UI agent at AGUIPath, for front ends such as
// CopilotKit (@ag-ui/client's HttpAgent). A run is a POST of AG-UI's
// RunAgentInput (agui_request.go), answered with AG-UI's events as
// Server-Sent Events (agui_map.go), mapped from the turn's event log as
// it streams, through the follower every channel reads.
//
// The run is a durable turn: its runId is the turn's job id (a new one
// when the input has none), so that a run sent again with the same runId
// attaches to the same turn and reads it from its start; a threadId is a
// session, whose Conversation answers the message with its transcript as
// the history, as the OpenAI-compatible endpoint's session header does.
// A request is authorized as the gRPC call whose work it does (Stream,
// SendMessage with a thread, Approve or Answer for a resume), with the
// bearer token the only identity; an agent the caller's tenant does not
// expose through AG-UI is not found, and nothing is started. A 1.0
// client's run whose turn waits for a person ends with an interrupt, and
// its next run, which resumes it, goes on with the same turn
// (agui_resume.go). A client that disconnects leaves the turn running,
// as every stream of the gateway does: it is durable, and is cancelled
// over the Cancel API.

// AGUIPath is where an agent's AG-UI runs are posted.
const AGUIPath = "/ag-ui/{agent_id}"

func (a *server) registerAGUI(mux *http.ServeMux) {
	mux.HandleFunc("POST "+AGUIPath, a.aguiRun)
	a.RefuseOtherMethods(mux, AGUIPath)
}

// aguiRun answers a run: the turn's AG-UI events.
func (a *server) aguiRun(w http.ResponseWriter, r *http.Request) {
	agentID := r.PathValue("agent_id")
	var in aguiInput
	// The run's stream is held before its turn is started or its
	// message sent.
	r, release, ok := a.OpenChat(w, r, pb.AgentService_Stream_FullMethodName, func(ctx context.Context, body []byte) error {
		err := agent.ValidateID("agent_id", agentID)
		if err == nil {
			in, err = decodeAGUIInput(body)
		}
		if err == nil {
			err = a.aguiExposed(ctx, agentID)
		}
		return err
	})
	if !ok {
		return
	}
	defer release()
	var run aguiTurn
	var err error
	switch {
	case len(in.Resume) > 0:
		run, err = a.aguiResumeTurn(r, agentID, in)
	case in.ThreadID == "":
		run, err = a.aguiStart(r.Context(), agentID, in)
	default:
		run, err = a.aguiSend(r, agentID, in)
	}
	if err != nil {
		a.Refuse(w, r, err)
		return
	}
	m := newAGUIMapper(run.threadID, run.runID, run.jobID, in.interruptAware())
	if len(in.Resume) > 0 {
		calls := make([]string, len(in.Resume))
		for i, rs := range in.Resume {
			calls[i] = rs.Interrupt.CallID
		}
		m.resume(calls)
	}
	s := &aguiStream{a: a, w: w, r: r, m: m, streamID: run.streamID}
	s.serve(run.follow)
}

// aguiExposed refuses an agent the caller's tenant does not serve over
// AG-UI: not in its catalog, or not exposed.
func (a *server) aguiExposed(ctx context.Context, agentID string) error {
	ag, err := a.st.ActiveAgent(ctx, gateway.TenantOf(ctx), agentID)
	switch {
	case agent.IsCode(err, agent.CodeNotFound) || (err == nil && !ag.Exposed(agent.ExposeAGUI)):
		return agent.Errorf(agent.CodeAgentNotFound, "agent %q is not served over AG-UI: your tenant's catalog has no agent of that id with expose: [%s]", agentID, agent.ExposeAGUI)
	case err != nil:
		return err
	}
	return nil
}

// aguiTurn is the turn that answers a run, and how to follow it from its
// first event.
type aguiTurn struct {
	threadID, runID, jobID, streamID string
	follow                           func(ctx context.Context, send func(agent.Event) error) error
}

// aguiStart prepares a turn of its own, as Stream does; following it
// starts it, or attaches to the turn of the same runId.
func (a *server) aguiStart(ctx context.Context, agentID string, in aguiInput) (aguiTurn, error) {
	req, err := a.Service().Prepare(ctx, &pb.TurnRequest{AgentId: agentID, Prompt: in.Prompt, JobId: in.RunID})
	if err != nil {
		return aguiTurn{}, err
	}
	return aguiTurn{threadID: req.JobID, runID: req.JobID, jobID: req.JobID, streamID: contract.TurnWorkflowID(req.TenantID, req.JobID),
		follow: func(ctx context.Context, send func(agent.Event) error) error {
			return a.Service().FollowNew(ctx, req, nil, send)
		}}, nil
}

// aguiSend sends the message to the thread's Conversation, as the
// OpenAI-compatible endpoint does a session's, and follows the turn that
// answers it.
func (a *server) aguiSend(r *http.Request, agentID string, in aguiInput) (aguiTurn, error) {
	ctx, err := a.Caller(r, r.Header.Values("Authorization"), pb.AgentService_SendMessage_FullMethodName)
	if err == nil && in.interruptAware() {
		err = a.aguiWaiting(ctx, in.ThreadID)
	}
	if err != nil {
		return aguiTurn{}, err
	}
	chat, err := a.Service().SendToSession(ctx, in.ThreadID, agentID, in.Prompt, in.RunID)
	if err != nil {
		return aguiTurn{}, err
	}
	return aguiTurn{threadID: in.ThreadID, runID: chat.JobID, jobID: chat.JobID, streamID: chat.StreamID, follow: chat.Follow}, nil
}

// aguiWaiting refuses a 1.0 client's new message on a thread whose turn
// waits for a person: in AG-UI 1.0 a thread's open interrupts block new
// input until a run resumes them. (The message would queue behind the
// waiting turn, and its run wait with it.) A client from before 1.0 sends
// its messages as it always has.
func (a *server) aguiWaiting(ctx context.Context, thread string) error {
	streamID, err := a.Service().SessionTurn(ctx, thread)
	if err != nil || streamID == "" {
		return err
	}
	v, err := a.Service().Client().QueryWorkflow(ctx, streamID, "", contract.QueryStatus)
	var st agent.TurnStatus
	if err != nil || v.Get(&st) != nil {
		return nil // the turn has just ended, or cannot say: the message goes to the thread
	}
	if st.Status != agent.StreamWaitingApproval && st.Status != agent.StreamWaitingInput {
		return nil
	}
	return agent.Errorf(agent.CodeConflict, "thread %q waits for a person (its turn %q is %s): resume the interrupts its last run ended with (RunAgentInput.resume) before sending a new message",
		thread, st.JobID, st.Status)
}

// aguiStream answers one run with its turn's AG-UI events.
type aguiStream struct {
	a        *server
	w        http.ResponseWriter
	r        *http.Request
	m        *aguiMapper
	streamID string
	st       *gateway.EventWriter
}

// serve answers with the AG-UI events of the events follow sends
// (HTTPAPI.ServeChat): a refusal before the first event — the run's turn
// refused, another request's runId — is a problem with its HTTP status;
// a failure after it is a RUN_ERROR.
func (s *aguiStream) serve(follow func(ctx context.Context, send func(agent.Event) error) error) {
	s.st = s.a.NewEventWriter(s.w, s.r)
	s.st.OnBegin = func(h http.Header) { h.Set(gateway.HeaderStreamID, s.streamID) }
	s.a.ServeChat(s.w, s.r, s.st, s, follow)
}

// Event implements gateway.ChatStream: it writes the AG-UI events of e;
// the turn's end, or interrupts that still wait, end the run.
func (s *aguiStream) Event(ctx context.Context, e agent.Event) (end bool, err error) {
	if err := s.write(s.m.add(e)...); err != nil {
		return false, err
	}
	if e.Terminal() {
		return true, nil
	}
	if s.m.waitsAt(e) {
		if end := s.m.interrupt(s.pending(ctx)); len(end) > 0 {
			return true, s.write(end...)
		}
	}
	return false, nil
}

// pending asks the turn which calls still wait for a person: a log read
// after their answers (a run sent again) goes on past their requests.
// When the turn cannot say, they are taken to wait: the run ends with
// their interrupts, and a resume that finds them answered goes on.
func (s *aguiStream) pending(ctx context.Context) func(aguiInterruptID) bool {
	var approvals []agent.PendingApproval
	var questions []agent.PendingQuestion
	var aerr, qerr error
	if s.m.opens(aguiKindApproval) {
		approvals, aerr = turnclient.PendingApprovals(ctx, s.a.Service().Client(), s.streamID)
	}
	if s.m.opens(aguiKindQuestion) {
		questions, qerr = turnclient.PendingQuestions(ctx, s.a.Service().Client(), s.streamID)
	}
	if err := errors.Join(aerr, qerr); err != nil {
		s.a.Logger().Debug("pending approvals and questions unknown; the run ends with its interrupts", zap.String("stream_id", s.streamID), zap.Error(err))
		return func(aguiInterruptID) bool { return true }
	}
	return func(id aguiInterruptID) bool {
		if id.Kind == aguiKindQuestion {
			return slices.ContainsFunc(questions, func(q agent.PendingQuestion) bool { return q.CallID == id.CallID })
		}
		return slices.ContainsFunc(approvals, func(p agent.PendingApproval) bool {
			return p.CallID == id.CallID && (p.ApprovalID == "" || p.ApprovalID == id.ApprovalID)
		})
	}
}

// write writes events, one data line each.
func (s *aguiStream) write(events ...aguiEvent) error { return gateway.WriteData(s.st, events...) }

// Fail answers the follower's outcome when the run has not ended: a
// problem before the stream began, a RUN_ERROR after. A client whose
// stream ends so runs again with the same runId, and reads the turn again
// from its start.
func (s *aguiStream) Fail(err error) {
	ctx := s.r.Context()
	if ctx.Err() != nil {
		return // the client has gone
	}
	if err == nil || s.a.Ending().Err() != nil {
		err = agent.Errorf(agent.CodeUnavailable, "the stream of turn %q ended before the turn did: run again with runId %q to follow it", s.streamID, s.m.runID)
	}
	p, inStream := s.st.Failure(err)
	if !inStream {
		return
	}
	if s.write(aguiEvent{Type: aguiRunError, Message: p.Detail, Code: p.Title}) == nil {
		_ = s.st.Flush()
	}
	s.a.Logger().Debug("ag-ui stream ended by a failure", zap.String("type", p.Title))
}

// Door serves AG-UI on the HTTP API's listener.
// Store is what the door reads of a tenant's agents and turns
// (store.Store, through internal/gateway/doors).
type Store interface {
	ActiveAgent(ctx context.Context, tenantID, agentID string) (agent.Agent, error)
	// Turn is the agent and the session (thread) of a tenant's turn.
	Turn(ctx context.Context, tenantID, jobID string) (Turn, error)
}

// Turn is what a resume checks of the turn it answers.
type Turn struct{ AgentID, SessionID string }

// New is the AG-UI door, serving the agents of st.
func New(st Store) gateway.Door {
	return gateway.NewDoor(agent.ChannelAGUI, func(mux *http.ServeMux, api *gateway.HTTPAPI) { (&server{HTTPAPI: api, st: st}).registerAGUI(mux) })
}

// server is the door on one HTTP API: its handlers are server's methods,
// with the core's helpers and turn service (Service) at hand.
type server struct {
	*gateway.HTTPAPI
	st Store
}
