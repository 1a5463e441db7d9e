package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"go.temporal.io/api/serviceerror"
)

// Turn is a turn a door started, or sent a message for, and how to
// follow its events from the first.
type Turn struct {
	StreamID, JobID string
	Follow          func(ctx context.Context, send func(agent.Event) error) error
}

// SendToSession sends prompt to session's Conversation as a message for
// the agent model, once CheckSession allows it, and returns the turn that
// answers.
func (s *Service) SendToSession(ctx context.Context, session, model, prompt, jobID string) (Turn, error) {
	if err := s.CheckSession(ctx, session, model); err != nil {
		return Turn{}, err
	}
	res, err := s.SendMessage(ctx, &pb.SendMessageRequest{SessionId: session, AgentId: model, Prompt: prompt, JobId: jobID})
	if err != nil {
		return Turn{}, err
	}
	streamID := res.GetStreamId()
	return Turn{StreamID: streamID, JobID: res.GetJobId(), Follow: func(ctx context.Context, send func(agent.Event) error) error {
		return s.FollowStarted(ctx, streamID, send)
	}}, nil
}

// CheckSession refuses a message for a session whose Conversation runs
// another agent than model: a Conversation keeps the agent it started
// with, and the answer would not be model's. The agent is read from the
// input of the Conversation's current run; a session without one is
// anyone's. A session id reserved for a door's (clientIDs) is refused.
func (s *Service) CheckSession(ctx context.Context, session, model string) error {
	if err := clientIDs(ctx, "session_id", session); err != nil {
		return err
	}
	id := contract.ConversationWorkflowID(TenantOf(ctx), session)
	it := s.Client().GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return nil
	}
	ev, err := it.Next()
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &notFound):
		return nil
	case err != nil:
		return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("read conversation %s: %w", id, err))
	}
	start := ev.GetWorkflowExecutionStartedEventAttributes()
	if start == nil {
		return nil
	}
	var in agent.ConversationInput
	if err := s.payloads.FromPayloads(start.GetInput(), &in); err != nil {
		return fmt.Errorf("decode the input of conversation %s: %w", id, err)
	}
	if in.AgentID != model {
		whose := fmt.Sprintf("agent %q", in.AgentID)
		if in.AgentID == "" {
			whose = "no agent (its messages are routed)"
		}
		return agent.Errorf(agent.CodeConflict, "session %q is a conversation with %s: name that agent as the model, or use another session", session, whose)
	}
	return nil
}

// FollowStarted follows a turn a Conversation starts. SendMessage returns
// once the turn has started, or when the Conversation rolls over to its
// next run, which starts it: a turn not found yet is looked for again,
// for up to startTimeout.
func (s *Service) FollowStarted(ctx context.Context, streamID string, send func(agent.Event) error) error {
	sent := false
	deadline := time.Now().Add(startTimeout)
	wait := 100 * time.Millisecond
	for {
		err := s.Events().Follow(ctx, streamID, 0, func(e agent.Event) error {
			sent = true
			return send(e)
		})
		if sent || !agent.IsCode(err, agent.CodeNotFound) || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// ForkSession implements pb.AgentServiceServer: a new session with the
// transcript up to a turn (store.ForkSession), and, to edit or regenerate
// that turn, its first message.
func (s *Service) ForkSession(ctx context.Context, in *pb.ForkSessionRequest) (*pb.ForkSessionResponse, error) {
	f := store.Fork{TenantID: TenantOf(ctx), From: in.GetSessionId(), To: in.GetNewSessionId(), JobID: in.GetJobId(),
		Before: in.GetBefore() || in.GetEditPrompt() != "" || in.GetRegenerate()}
	if in.GetEditPrompt() != "" && in.GetRegenerate() {
		return nil, s.StatusOf(ctx, agent.Errorf(agent.CodeInvalid, "edit_prompt and regenerate: send one — an edit is a new prompt, regenerate sends the same one"))
	}
	// The copy is the caller's session: it may copy a person's only as
	// staff, and may not take a door's id.
	if err := ownPerson(ctx, "session", f.From); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	if err := clientIDs(ctx, "new_session_id", f.To); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	if f.To == "" {
		id := NewJobID()
		f.To = fmt.Sprintf("%.150s-fork-%s", strings.TrimPrefix(f.From, agent.DerivedPrefix), id[len(id)-8:])
	}
	conv := agent.ConversationInput{TenantID: f.TenantID, SessionID: f.To, AgentID: in.GetAgentId(), AgentVersion: int(in.GetAgentVersion()),
		History: in.GetHistory()}
	if err := conv.Validate(); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	var msg *agent.SendMessage
	if in.GetEditPrompt() != "" {
		msg = &agent.SendMessage{Prompt: in.GetEditPrompt(), Caller: CallerOf(ctx).Caller(), Channel: s.channel}
		if err := msg.Validate(); err != nil {
			return nil, s.StatusOf(ctx, err)
		}
	}
	if msg != nil || in.GetRegenerate() {
		// A regenerated turn sends the same prompt and names no targets.
		var deliver []agent.DeliverTo
		if msg != nil {
			deliver = msg.Deliver
		}
		if err := s.checkAgent(ctx, agent.TurnRequest{TenantID: conv.TenantID, AgentID: conv.AgentID, AgentVersion: conv.AgentVersion, Deliver: deliver}); err != nil {
			return nil, s.StatusOf(ctx, err)
		}
	}
	n, prompt, err := s.store.ForkSession(ctx, f)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	out := &pb.ForkSessionResponse{SessionId: f.To, ConversationId: contract.ConversationWorkflowID(f.TenantID, f.To), Messages: int32(n)}
	if in.GetRegenerate() {
		msg = &agent.SendMessage{Prompt: prompt, Caller: CallerOf(ctx).Caller(), Channel: s.channel}
	}
	if msg == nil {
		return out, nil
	}
	if err := msg.Texts(s.redactor(ctx, conv.TenantID, redact.Scope(conv.SessionID, ""))); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	res, err := turnclient.SendMessage(ctx, s.client, s.taskQueue, conv, *msg)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	out.StreamId, out.JobId = res.TurnWorkflowID, res.JobID
	return out, nil
}

// GetTranscript implements pb.AgentServiceServer: the transcript query of
// the caller's tenant's conversation; a person's only for staff
// (ownPerson).
func (s *Service) GetTranscript(ctx context.Context, in *pb.GetTranscriptRequest) (*pb.Transcript, error) {
	conv := agent.ConversationInput{TenantID: TenantOf(ctx), SessionID: in.GetSessionId()}
	if err := conv.Validate(); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	if err := ownPerson(ctx, "session", conv.SessionID); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	id := contract.ConversationWorkflowID(conv.TenantID, conv.SessionID)
	t, err := turnclient.Transcript(ctx, s.client, id)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	mem, err := s.store.SessionMemory(ctx, conv.TenantID, conv.SessionID, 1)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	out := &pb.Transcript{ConversationId: id, SessionId: conv.SessionID, Turns: int32(t.Turns), Digest: t.Digest, Runs: int32(t.Runs),
		Summary: mem.Summary, SummarySeq: mem.SummarySeq}
	for _, e := range t.Window {
		out.Entries = append(out.Entries, &pb.TranscriptEntry{JobId: e.JobID, StreamId: contract.TurnWorkflowID(conv.TenantID, e.JobID),
			Prompt: e.Prompt, Output: e.Output, Status: e.Status, ResultRef: e.ResultRef})
	}
	for _, m := range t.Pending {
		out.Pending = append(out.Pending, &pb.PendingMessage{JobId: m.JobID, StreamId: contract.TurnWorkflowID(conv.TenantID, m.JobID), Prompt: m.Prompt})
	}
	return out, nil
}

// SendMessageTo sends msg, as the caller's and through the service's
// channel, to the Conversation conv of the caller's tenant: the one path
// of SendMessage and of doors whose messages name what the API's do not
// (the Telegram door's deliver targets). Only the door that derived a
// reserved session or job id (WithDerived) may use it.
func (s *Service) SendMessageTo(ctx context.Context, conv agent.ConversationInput, msg agent.SendMessage) (agent.SendMessageResult, error) {
	conv.TenantID = TenantOf(ctx)
	msg.Caller, msg.Channel = CallerOf(ctx).Caller(), s.channel
	if err := clientIDs(ctx, "session_id", conv.SessionID, "job_id", msg.JobID); err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	if err := conv.Validate(); err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	if err := msg.Validate(); err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	if err := s.checkAgent(ctx, agent.TurnRequest{TenantID: conv.TenantID, AgentID: conv.AgentID, AgentVersion: conv.AgentVersion, Deliver: msg.Deliver}); err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	// A closed session's turn would be refused at its start: the sender
	// hears it now. (The turn's start is where the rule holds.)
	st, err := s.store.SessionState(ctx, conv.TenantID, conv.SessionID)
	if err == nil {
		err = st.Refusal(conv.SessionID)
	}
	if err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	if err := msg.Texts(s.redactor(ctx, conv.TenantID, redact.Scope(conv.SessionID, ""))); err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	res, err := turnclient.SendMessage(ctx, s.client, s.taskQueue, conv, msg)
	if err != nil {
		return agent.SendMessageResult{}, s.StatusOf(ctx, err)
	}
	return res, nil
}

// SendMessage implements pb.AgentServiceServer.
func (s *Service) SendMessage(ctx context.Context, in *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	conv := agent.ConversationInput{TenantID: TenantOf(ctx), SessionID: in.GetSessionId(), AgentID: in.GetAgentId(),
		AgentVersion: int(in.GetAgentVersion()), History: in.GetHistory()}
	if err := conv.Validate(); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	msg := agent.SendMessage{Prompt: in.GetPrompt(), JobID: in.GetJobId(), Context: toContext(in.GetContext()),
		OnBusy: in.GetOnBusy(), StopAt: in.GetStopAt(), Deliver: toDeliverTo(in.GetDeliver())}
	res, err := s.SendMessageTo(ctx, conv, msg)
	if err != nil {
		return nil, err
	}
	return &pb.SendMessageResponse{StreamId: res.TurnWorkflowID, JobId: res.JobID, Steered: res.Steered,
		ConversationId: contract.ConversationWorkflowID(conv.TenantID, conv.SessionID)}, nil
}
