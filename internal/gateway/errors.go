package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// Status is the one way an error leaves the gateway, by agent's table of
// codes: an error whose message is written for the caller (an invalid
// request, an unknown agent) keeps it; any other reaches the client as a
// plain message with a reference, and the log has the details under the
// same reference. A status Status made already is passed on as it is, so
// that a door may pass on what a method of the service answered.
func Status(ctx context.Context, logger *zap.Logger, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil && !IsBodyError(err) {
		// The caller went away or ran out of time: that is the answer.
		// (A body cut off ends the request's context too, and is
		// answered as what it is.)
		return status.FromContextError(ctx.Err()).Err()
	}
	if st, ok := status.FromError(err); ok {
		if _, typed := ErrorInfoOf(st); typed {
			return err // already classified: a door may pass on what a method answered
		}
	}
	code := agent.ErrorCode(err)
	if code == agent.CodeInternal && store.Unavailable(err) {
		code = agent.CodeUnavailable
	}
	class := code.Class()
	if class.Public {
		return typed(status.New(codes.Code(class.GRPC), err.Error()), code, "")
	}
	ref := newRef()
	telemetry.Logger(ctx, logger).Error("request failed", zap.String("ref", ref), zap.String("code", string(code)),
		zap.String("tenant", TenantOf(ctx)), zap.Error(err))
	msg := "internal error"
	if code == agent.CodeUnavailable {
		msg = "a service agentflow depends on is unavailable; try again later"
	}
	return typed(status.Newf(codes.Code(class.GRPC), "%s (reference %s)", msg, ref), code, ref)
}

// ErrorDomain (the API's package) is the domain of the google.rpc.ErrorInfo that every error
// status of the gateway carries: its reason is the error's type in agent's
// table (AgentNotFound, Conflict, …), and an internal error's metadata
// has its "reference". The HTTP API's problem details are made from it.
const ErrorDomain = "agentflow.v1"

// typed adds the error's type (and reference) to st as an ErrorInfo,
// and to a limit the client may fit in shortly (RateLimited) the wait
// before it tries again as a RetryInfo (LimitRetryAfter).
func typed(st *status.Status, code agent.Code, ref string) error {
	info := &errdetails.ErrorInfo{Reason: code.Class().Type, Domain: ErrorDomain}
	if ref != "" {
		info.Metadata = map[string]string{"reference": ref}
	}
	details := []protoadapt.MessageV1{info}
	if code == agent.CodeRateLimited {
		details = append(details, &errdetails.RetryInfo{RetryDelay: durationpb.New(LimitRetryAfter)})
	}
	if withInfo, err := st.WithDetails(details...); err == nil {
		st = withInfo
	}
	return st.Err()
}

// RetryAfterOf is the wait a status asks of its client before it tries
// again (its RetryInfo), or 0.
func RetryAfterOf(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

// ReconnectDelay is how long a gateway that is shutting down tells its
// streaming clients to wait before they reconnect: a gRPC stream's
// RetryInfo (GoingAway), an event stream's retry field.
const ReconnectDelay = time.Second

// GoingAway is how a Stream or Resume call ends when the gateway shuts
// down: Unavailable, with a RetryInfo (ReconnectDelay) and an ErrorInfo
// of type Unavailable whose metadata names the stream ("stream_id") and
// the last event the client got ("after_index"). The client resumes with
// Resume after that event, on another gateway or on this one once it is
// back: the turn goes on meanwhile, and no event is missed or repeated.
func GoingAway(streamID string, after int64) error {
	st := status.Newf(codes.Unavailable, "the gateway is shutting down: resume stream %q after event %d (Resume with after_index), on another gateway or this one once it is back", streamID, after)
	info := &errdetails.ErrorInfo{Reason: agent.CodeUnavailable.Class().Type, Domain: ErrorDomain,
		Metadata: map[string]string{"stream_id": streamID, "after_index": strconv.FormatInt(after, 10)}}
	if d, err := st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(ReconnectDelay)}); err == nil {
		st = d
	}
	return st.Err()
}

// ErrorInfoOf returns the ErrorInfo that Status added to st.
func ErrorInfoOf(st *status.Status) (*errdetails.ErrorInfo, bool) {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info, true
		}
	}
	return nil, false
}

// newRef is a short random id that ties a client's error to the log.
func newRef() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Service) StatusOf(ctx context.Context, err error) error { return Status(ctx, s.logger, err) }
