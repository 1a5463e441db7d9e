package ws

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
	"google.golang.org/protobuf/proto"
)

// The commands a client sends on its socket, and how each is done.

// socketCommandKind is a command of the socket: its type, the gRPC call it
// is authorized as and whose request it carries (msg, an empty one), and
// how it is done, with that call's context.
type socketCommandKind struct {
	typ    string
	method string
	msg    proto.Message
	do     func(s *socket, ctx context.Context, cmd socketCommand) error
}

// socketCommandKinds are the socket's commands, in the order errors list
// them.
var socketCommandKinds = []socketCommandKind{
	command(SocketCommandStart, pb.AgentService_Stream_FullMethodName, &pb.TurnRequest{}, (*socket).start),
	command(SocketCommandMessage, pb.AgentService_SendMessage_FullMethodName, &pb.SendMessageRequest{}, (*socket).message),
	command(SocketCommandFollow, pb.AgentService_Resume_FullMethodName, &pb.ResumeRequest{}, (*socket).resume),
	command(SocketCommandApprove, pb.AgentService_Approve_FullMethodName, &pb.ApproveRequest{}, unary((*gateway.Service).Approve)),
	command(SocketCommandCancel, pb.AgentService_Cancel_FullMethodName, &pb.CancelRequest{}, unary((*gateway.Service).Cancel)),
}

// command is a kind of command whose request is a Req.
func command[Req proto.Message](typ, method string, msg Req, do func(s *socket, ctx context.Context, cmd socketCommand, in Req) error) socketCommandKind {
	return socketCommandKind{typ: typ, method: method, msg: msg, do: func(s *socket, ctx context.Context, cmd socketCommand) error {
		return do(s, ctx, cmd, cmd.msg.(Req))
	}}
}

// unary is a command that is one call of the service, acked with its
// answer.
func unary[Req, Res proto.Message](call func(*gateway.Service, context.Context, Req) (Res, error)) func(*socket, context.Context, socketCommand, Req) error {
	return func(s *socket, ctx context.Context, cmd socketCommand, in Req) error {
		res, err := call(s.a.Service(), ctx, in)
		if err != nil {
			return err
		}
		return s.ack(cmd, res)
	}
}

// socketCommands are the commands' types.
var socketCommands = func() []string {
	types := make([]string, len(socketCommandKinds))
	for i, k := range socketCommandKinds {
		types[i] = k.typ
	}
	return types
}()

// do runs a command, authorized as its call.
func (s *socket) do(cmd socketCommand) {
	ctx, err := s.authorized(cmd.kind.method)
	if err == nil {
		err = cmd.kind.do(s, ctx, cmd)
	}
	if err != nil && s.ctx.Err() == nil {
		s.fail(cmd, "", err)
	}
}

// start starts a turn and follows it, as Stream does; the ack (the
// turn's stream and job ids) comes before its first event.
func (s *socket) start(ctx context.Context, cmd socketCommand, in *pb.TurnRequest) error {
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
func (s *socket) message(ctx context.Context, cmd socketCommand, in *pb.SendMessageRequest) error {
	res, err := s.a.Service().SendMessage(ctx, in)
	if err == nil {
		err = s.ack(cmd, res)
	}
	if err != nil {
		return err
	}
	s.follow(cmd, res.GetStreamId(), func(fctx context.Context, send func(agent.Event) error) error {
		return s.a.Service().Events().Follow(fctx, res.GetStreamId(), 0, send)
	})
	return nil
}

// resume follows a stream after an index, as Resume does.
func (s *socket) resume(ctx context.Context, cmd socketCommand, in *pb.ResumeRequest) error {
	err := gateway.OwnStream(ctx, in.GetStreamId())
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

// socketCommand is a decoded command: its type, id, kind and request.
type socketCommand struct {
	Type string
	ID   string
	kind *socketCommandKind
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
	i := slices.IndexFunc(socketCommandKinds, func(k socketCommandKind) bool { return k.typ == cmd.Type })
	if i < 0 {
		typ := cmd.Type
		cmd.Type = ""
		return cmd, agent.Errorf(agent.CodeInvalid, "unknown command type %s: want %s", gateway.Clip(typ), strings.Join(socketCommands, ", "))
	}
	cmd.kind = &socketCommandKinds[i]
	// A new request of the kind's, to read the command's fields into.
	cmd.msg = cmd.kind.msg.ProtoReflect().New().Interface()
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
