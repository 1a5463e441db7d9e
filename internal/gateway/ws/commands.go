package ws

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"google.golang.org/protobuf/proto"
)

// The commands a client sends on its socket, and how each is done.

// do runs a command.
func (s *socket) do(cmd socketCommand) {
	var err error
	switch in := cmd.msg.(type) {
	case *pb.TurnRequest:
		err = s.start(cmd, in)
	case *pb.SendMessageRequest:
		err = s.message(cmd, in)
	case *pb.ResumeRequest:
		err = s.resume(cmd, in)
	case *pb.ApproveRequest:
		var ctx context.Context
		if ctx, err = s.authorized(pb.AgentService_Approve_FullMethodName); err == nil {
			var res *pb.ApproveResponse
			if res, err = s.a.Service().Approve(ctx, in); err == nil {
				err = s.ack(cmd, res)
			}
		}
	case *pb.CancelRequest:
		var ctx context.Context
		if ctx, err = s.authorized(pb.AgentService_Cancel_FullMethodName); err == nil {
			var res *pb.CancelResponse
			if res, err = s.a.Service().Cancel(ctx, in); err == nil {
				err = s.ack(cmd, res)
			}
		}
	}
	if err != nil && s.ctx.Err() == nil {
		s.fail(cmd, "", err)
	}
}

// start starts a turn and follows it, as Stream does; the ack (the
// turn's stream and job ids) comes before its first event.
func (s *socket) start(cmd socketCommand, in *pb.TurnRequest) error {
	ctx, err := s.authorized(pb.AgentService_Stream_FullMethodName)
	if err != nil {
		return err
	}
	req, err := s.a.Service().Prepare(ctx, in)
	if err != nil {
		return err
	}
	s.follow(cmd, contract.TurnWorkflowID(req.TenantID, req.JobID), func(fctx context.Context, send func(agent.Event) error) error {
		return s.a.Service().FollowNew(fctx, req, func(streamID string) error {
			return s.ack(cmd, &pb.StartResponse{StreamId: streamID, JobId: req.JobID})
		}, send)
	})
	return nil
}

// message sends a conversation message, acks it and follows its turn.
func (s *socket) message(cmd socketCommand, in *pb.SendMessageRequest) error {
	ctx, err := s.authorized(pb.AgentService_SendMessage_FullMethodName)
	if err != nil {
		return err
	}
	res, err := s.a.Service().SendMessage(ctx, in)
	if err != nil {
		return err
	}
	if err := s.ack(cmd, res); err != nil {
		return err
	}
	s.follow(cmd, res.GetStreamId(), func(fctx context.Context, send func(agent.Event) error) error {
		return s.a.Service().Events().Follow(fctx, res.GetStreamId(), 0, send)
	})
	return nil
}

// resume follows a stream after an index, as Resume does.
func (s *socket) resume(cmd socketCommand, in *pb.ResumeRequest) error {
	ctx, err := s.authorized(pb.AgentService_Resume_FullMethodName)
	if err == nil {
		err = gateway.OwnStream(ctx, in.GetStreamId())
	}
	if err == nil && in.GetAfterIndex() < 0 {
		err = agent.ValidateAfter(in.GetAfterIndex(), 0)
	}
	if err != nil {
		return err
	}
	if err := s.ack(cmd, in); err != nil {
		return err
	}
	s.follow(cmd, in.GetStreamId(), func(fctx context.Context, send func(agent.Event) error) error {
		return s.a.Service().Events().Follow(fctx, in.GetStreamId(), in.GetAfterIndex(), send)
	})
	return nil
}

// follow makes fn the stream the socket follows, in place of the one it
// followed. A failure of fn is an error reply to cmd, naming the stream.
func (s *socket) follow(cmd socketCommand, streamID string, fn func(ctx context.Context, send func(agent.Event) error) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.following; f != nil {
		f.cancel()
		<-f.done
	}
	ctx, cancel := context.WithCancel(s.ctx)
	f := &socketFollow{cancel: cancel, done: make(chan struct{})}
	s.following = f
	s.wg.Go(func() {
		defer close(f.done)
		defer cancel()
		err := fn(ctx, func(e agent.Event) error {
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			return s.send(ctx, data)
		})
		if err != nil && ctx.Err() == nil && !errors.Is(err, errSlowClient) {
			s.fail(cmd, streamID, err)
		}
	})
}

// socketCommand is a decoded command: its type, id and request.
type socketCommand struct {
	Type string
	ID   string
	msg  proto.Message
}

// decodeCommand reads a command: one JSON object whose "type" names it,
// whose "id" (optional, a string of at most 64 bytes) comes back on its
// answer, and whose other members are the fields of its gRPC request,
// read as the HTTP API reads a body (strictly: an unknown field is an
// error). The id is returned when it could be read, so that an error can
// name the command.
func decodeCommand(data []byte) (socketCommand, error) {
	var cmd socketCommand
	if err := gateway.OneJSONValue(data); err != nil {
		return cmd, agent.Errorf(agent.CodeInvalid, "a command is a JSON object: %s", strings.TrimPrefix(err.Error(), "request body "))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		return cmd, agent.Errorf(agent.CodeInvalid, "a command is a JSON object, with a type")
	}
	if raw, ok := fields["id"]; ok {
		var id string
		if err := json.Unmarshal(raw, &id); err != nil || len(id) > maxCommandID {
			return cmd, agent.Errorf(agent.CodeInvalid, "a command's id is a string of at most %d bytes", maxCommandID)
		}
		cmd.ID = id
	}
	if err := json.Unmarshal(fields["type"], &cmd.Type); err != nil || cmd.Type == "" {
		cmd.Type = ""
		return cmd, agent.Errorf(agent.CodeInvalid, "a command needs a type: %s", strings.Join(socketCommands, ", "))
	}
	switch cmd.Type {
	case SocketCommandStart:
		cmd.msg = &pb.TurnRequest{}
	case SocketCommandMessage:
		cmd.msg = &pb.SendMessageRequest{}
	case SocketCommandFollow:
		cmd.msg = &pb.ResumeRequest{}
	case SocketCommandApprove:
		cmd.msg = &pb.ApproveRequest{}
	case SocketCommandCancel:
		cmd.msg = &pb.CancelRequest{}
	default:
		typ := cmd.Type
		cmd.Type = ""
		return cmd, agent.Errorf(agent.CodeInvalid, "unknown command type %s: want %s", gateway.Clip(typ), strings.Join(socketCommands, ", "))
	}
	delete(fields, "type")
	delete(fields, "id")
	rest, err := json.Marshal(fields)
	if err != nil {
		return cmd, agent.Errorf(agent.CodeInvalid, "%s command: %v", cmd.Type, err)
	}
	if err := gateway.UnmarshalMessage(rest, cmd.msg); err != nil {
		return cmd, agent.Errorf(agent.CodeInvalid, "%s command: %s", cmd.Type, strings.TrimPrefix(err.Error(), "request body: "))
	}
	return cmd, nil
}

var socketCommands = []string{SocketCommandStart, SocketCommandMessage, SocketCommandFollow, SocketCommandApprove, SocketCommandCancel}
