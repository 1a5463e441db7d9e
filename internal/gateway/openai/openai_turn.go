package openai

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// What a chat completion and a response share: a request that creates a
// turn is authorized as the work it does, read, and its turn started (in
// a session: its message sent); the answer follows the turn through the
// same pump (openai_stream.go), holding one of the tenant's streams.

// turnAsk is the turn a create request asks for.
type turnAsk struct {
	// model is the agent; prompt the turn's prompt.
	model, prompt string
	// schema is the turn's output schema, named schemaParam in the
	// request; none in a session.
	schema      json.RawMessage
	schemaParam string
	// session is the session the message goes to ("": a new turn), jobID
	// the turn's job id (the Idempotency-Key header).
	session, jobID string
	// goOn, when set, starts no turn: it acts on a turn that runs (decides
	// what it waits for) and returns it, to be followed.
	goOn func(ctx context.Context) (gateway.Turn, error)
}

// createHeaders reads and checks a create request's headers: the session
// it continues and its idempotency key.
func createHeaders(r *http.Request) (session, jobID string, err error) {
	for _, h := range []string{headerSession, headerIdempotency} {
		if v := r.Header.Get(h); v != "" {
			if err := agent.ValidateID(h, v); err != nil {
				return "", "", err
			}
		}
	}
	return r.Header.Get(headerSession), r.Header.Get(headerIdempotency), nil
}

// createMethod is the gRPC method whose work a create request does:
// continuing a session is SendMessage's, a new turn Stream's.
func createMethod(session string) string {
	if session != "" {
		return pb.AgentService_SendMessage_FullMethodName
	}
	return pb.AgentService_Stream_FullMethodName
}

// create serves a request that creates a turn. The caller is
// authorized by its session header, read reads the body into the turn it
// asks for, and respond renders the turn: at once when read says the
// answer does not follow it (a background response), else holding one of
// the tenant's streams, taken before the turn starts.
func (o openAI) create(w http.ResponseWriter, r *http.Request,
	read func(r *http.Request, ask turnAsk) (turnAsk, bool, error), respond func(r *http.Request, turn gateway.Turn)) {
	session, jobID, err := createHeaders(r)
	var ctx context.Context
	if err == nil {
		ctx, err = o.authorize(r, createMethod(session))
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	r = r.WithContext(ctx)
	ask, follows, err := read(r, turnAsk{session: session, jobID: jobID})
	if err == nil && ask.session != "" && ask.schema != nil {
		err = badParam(ask.schemaParam, codeUnsupportedParameter,
			"%s json_schema is not supported in a session: a session's messages answer in their agent's format", ask.schemaParam)
	}
	if err != nil {
		o.fail(w, r, err)
		return
	}
	release := func() {}
	if follows {
		ctx, release, err = o.s.HoldStream(ctx)
		if err != nil {
			o.fail(w, r, err)
			return
		}
	}
	defer release()
	r = r.WithContext(ctx)
	turn, err := o.turn(ctx, ask, follows)
	if err != nil {
		o.fail(w, r, err)
		return
	}
	respond(r, turn)
}

// turn starts the turn ask names: a message to its session, or a new
// turn, prepared as Stream prepares one, which following starts (or
// attaches to its job's run); started at once unless follows. A request
// that goes on with a turn (ask.goOn) starts none.
func (o openAI) turn(ctx context.Context, ask turnAsk, follows bool) (gateway.Turn, error) {
	switch {
	case ask.goOn != nil:
		return ask.goOn(ctx)
	case ask.session != "":
		return o.s.SendToSession(ctx, ask.session, ask.model, ask.prompt, ask.jobID)
	}
	req, err := o.s.Prepare(ctx, &pb.TurnRequest{AgentId: ask.model, Prompt: ask.prompt, JobId: ask.jobID, OutputSchemaJson: string(ask.schema)})
	if err != nil {
		return gateway.Turn{}, err
	}
	streamID := contract.TurnWorkflowID(req.TenantID, req.JobID)
	turn := gateway.Turn{StreamID: streamID, JobID: req.JobID}
	if !follows {
		_, err := o.s.StartPrepared(ctx, req)
		return turn, err
	}
	turn.Follow = func(ctx context.Context, send func(agent.Event) error) error {
		return o.s.Events().FollowNew(ctx, streamID, func() (string, error) {
			run, err := o.s.StartPrepared(ctx, req)
			if err != nil {
				return "", err
			}
			return run.GetRunID(), nil
		}, send)
	}
	return turn, nil
}
