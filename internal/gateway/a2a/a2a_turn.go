package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// A message as the turn it starts or continues: its input read and
// checked, and the turn begun.

// a2aTurn is a message's turn, ready to follow.
type a2aTurn struct {
	streamID, contextID string
	// follow starts the turn (or finds it started) and follows its log.
	follow func(ctx context.Context, send func(agent.Event) error) error
}

// begin checks a message and makes its turn: nothing is started when
// the message or the agent is refused.
func (m *a2aServer) begin(ctx context.Context, params *a2a.MessageSendParams) (a2aTurn, error) {
	ag, err := m.agent(ctx)
	if err != nil {
		return a2aTurn{}, err
	}
	in, err := decodeA2AMessage(params)
	if err != nil {
		return a2aTurn{}, err
	}
	session := in.contextID != ""
	if !session {
		in.contextID = gateway.NewJobID()
	}
	jobID := in.contextID + a2aJobSep + gateway.NewJobID()
	var turn a2aTurn
	if session {
		o := m.s
		if err := o.CheckSession(ctx, in.contextID, ag.ID); err != nil {
			return a2aTurn{}, m.fail(ctx, err, a2a.ErrInvalidParams)
		}
		res, err := m.s.SendMessage(ctx, &pb.SendMessageRequest{SessionId: in.contextID, AgentId: ag.ID, Prompt: in.prompt, JobId: jobID})
		if err != nil {
			return a2aTurn{}, m.fail(ctx, err, a2a.ErrInvalidParams)
		}
		streamID := res.GetStreamId()
		turn = a2aTurn{streamID: streamID, contextID: in.contextID,
			follow: func(ctx context.Context, send func(agent.Event) error) error {
				return o.FollowStarted(ctx, streamID, send)
			}}
		return turn, nil
	}
	req, err := m.s.Prepare(ctx, &pb.TurnRequest{AgentId: ag.ID, Prompt: in.prompt, JobId: jobID})
	if err != nil {
		return a2aTurn{}, m.fail(ctx, err, a2a.ErrInvalidParams)
	}
	return a2aTurn{streamID: "turn/" + req.TenantID + "/" + req.JobID, contextID: in.contextID,
		follow: func(ctx context.Context, send func(agent.Event) error) error {
			return m.s.FollowNew(ctx, req, nil, send)
		}}, nil
}

// a2aJobSep separates the contextId from the rest of an A2A turn's job
// id, so that a task's contextId is read from its id.
const a2aJobSep = "~"

// a2aContextOf is the contextId of a task: the part of its job id before
// a2aJobSep, or the job id of a turn started otherwise.
func a2aContextOf(streamID string) string {
	job := streamID[strings.LastIndex(streamID, "/")+1:]
	if i := strings.LastIndex(job, a2aJobSep); i > 0 {
		return job[:i]
	}
	return job
}

// a2aInput is what a message asks: its prompt and contextId, and the
// task it continues, when it answers a task's question.
type a2aInput struct {
	prompt, contextID, taskID string
	// callID is the question the message answers, when its metadata
	// names one ("call_id"); else the first that waits.
	callID string
}

// decodeA2AMessage reads the prompt of a message/send or message/stream:
// its text parts, and its data parts as JSON, joined. File parts, a
// message for an existing task and an agent's message are refused.
func decodeA2AMessage(params *a2a.MessageSendParams) (a2aInput, error) {
	if params == nil || params.Message == nil {
		return a2aInput{}, fmt.Errorf("params.message is required: %w", a2a.ErrInvalidParams)
	}
	msg := params.Message
	if msg.Role != a2a.MessageRoleUser {
		return a2aInput{}, fmt.Errorf("message.role is %q: want \"user\": %w", msg.Role, a2a.ErrInvalidParams)
	}
	if err := checkContextID(msg.ContextID); err != nil {
		return a2aInput{}, err
	}
	var texts []string
	for i, p := range msg.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case *a2a.TextPart:
			texts = append(texts, p.Text)
		case a2a.DataPart:
			b, err := json.Marshal(p.Data)
			if err != nil {
				return a2aInput{}, fmt.Errorf("message.parts[%d]: data is not JSON: %w", i, a2a.ErrInvalidParams)
			}
			texts = append(texts, string(b))
		default:
			return a2aInput{}, fmt.Errorf("message.parts[%d] is a %T: send text or data parts: %w", i, p, a2a.ErrUnsupportedContentType)
		}
	}
	prompt := strings.Join(texts, "\n\n")
	switch {
	case strings.TrimSpace(prompt) == "":
		return a2aInput{}, fmt.Errorf("the message has no text: %w", a2a.ErrInvalidParams)
	case len(prompt) > agent.MaxPromptBytes:
		return a2aInput{}, fmt.Errorf("the message is %d bytes of text; the limit is %d: %w", len(prompt), agent.MaxPromptBytes, a2a.ErrInvalidParams)
	}
	in := a2aInput{prompt: prompt, contextID: msg.ContextID, taskID: string(msg.TaskID)}
	if id, ok := msg.Metadata["call_id"].(string); ok {
		in.callID = id
	}
	return in, nil
}

// checkContextID refuses a contextId that cannot be a session id.
func checkContextID(id string) error {
	if len(id) > a2aMaxContextID {
		return fmt.Errorf("contextId is %d bytes; the limit is %d: %w", len(id), a2aMaxContextID, a2a.ErrInvalidParams)
	}
	for _, c := range id {
		if unicode.IsSpace(c) || unicode.IsControl(c) || c == '/' || string(c) == a2aJobSep || c == unicode.ReplacementChar {
			return fmt.Errorf("contextId %q may not contain spaces, control characters, '/' or %q: %w", id, a2aJobSep, a2a.ErrInvalidParams)
		}
	}
	return nil
}
