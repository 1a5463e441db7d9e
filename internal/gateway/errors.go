package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/telemetry"
)

// Status is the one way an error leaves the gateway, by agent's table of
// codes: an error whose message is written for the caller (an invalid
// request, an unknown agent) keeps it; any other reaches the client as a
// plain message with a reference, and the log has the details under the
// same reference.
func Status(ctx context.Context, logger *zap.Logger, err error) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		// The caller went away or ran out of time: that is the answer.
		return status.FromContextError(ctx.Err()).Err()
	}
	code := agent.ErrorCode(err)
	if code == agent.CodeInternal && store.Unavailable(err) {
		code = agent.CodeUnavailable
	}
	class := code.Class()
	if class.Public {
		return status.Error(codes.Code(class.GRPC), err.Error())
	}
	ref := newRef()
	telemetry.Logger(ctx, logger).Error("request failed", zap.String("ref", ref), zap.String("code", string(code)),
		zap.String("tenant", tenantOf(ctx)), zap.Error(err))
	msg := "internal error"
	if code == agent.CodeUnavailable {
		msg = "a service agentflow depends on is unavailable; try again later"
	}
	return status.Errorf(codes.Code(class.GRPC), "%s (reference %s)", msg, ref)
}

// newRef is a short random id that ties a client's error to the log.
func newRef() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Service) status(ctx context.Context, err error) error { return Status(ctx, s.logger, err) }
