package gateway

import (
	"context"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/agent"
)

type tenantKey struct{}

// tenantOf returns the tenant the interceptors put in ctx.
func tenantOf(ctx context.Context) string {
	t, _ := ctx.Value(tenantKey{}).(string)
	return t
}

// public methods need no token.
func public(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// authenticate maps the bearer token to its tenant. Tokens are compared in
// constant time, and never logged.
func (s *Service) authenticate(ctx context.Context) (context.Context, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return nil, agent.Errorf(agent.CodeUnauthenticated, "missing bearer token: send the metadata \"authorization: Bearer <token>\"")
	}
	token, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || token == "" {
		return nil, agent.Errorf(agent.CodeUnauthenticated, "malformed authorization: want \"Bearer <token>\"")
	}
	tenant := ""
	for t, ten := range s.tokens {
		if subtle.ConstantTimeCompare([]byte(t), []byte(token)) == 1 {
			tenant = ten
		}
	}
	if tenant == "" {
		return nil, agent.Errorf(agent.CodeUnauthenticated, "unknown token")
	}
	return context.WithValue(ctx, tenantKey{}, tenant), nil
}

func (s *Service) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if public(info.FullMethod) {
		return h(ctx, req)
	}
	actx, err := s.authenticate(ctx)
	if err != nil {
		return nil, s.status(ctx, err)
	}
	return h(actx, req)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (a authedStream) Context() context.Context { return a.ctx }

func (s *Service) streamAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if public(info.FullMethod) {
		return h(srv, ss)
	}
	ctx, err := s.authenticate(ss.Context())
	if err != nil {
		return s.status(ss.Context(), err)
	}
	return h(srv, authedStream{ServerStream: ss, ctx: ctx})
}
