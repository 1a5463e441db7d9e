package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/tap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/telemetry"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// methodRoles says which role each method needs. A method missing here is
// open to no token: a new RPC is refused until it is given a role.
var methodRoles = map[string]Role{
	pb.AgentService_Invoke_FullMethodName:                RoleUser,
	pb.AgentService_Start_FullMethodName:                 RoleUser,
	pb.AgentService_ListEvents_FullMethodName:            RoleUser,
	pb.AgentService_Stream_FullMethodName:                RoleUser,
	pb.AgentService_Resume_FullMethodName:                RoleUser,
	pb.AgentService_GetResult_FullMethodName:             RoleUser,
	pb.AgentService_ListAgents_FullMethodName:            RoleUser,
	pb.AgentService_SendMessage_FullMethodName:           RoleUser,
	pb.AgentService_GetTranscript_FullMethodName:         RoleUser,
	pb.AgentService_ForkSession_FullMethodName:           RoleUser,
	pb.AgentService_Cancel_FullMethodName:                RoleUser,
	pb.AgentService_ListDeliveries_FullMethodName:        RoleUser,
	pb.AgentService_Approve_FullMethodName:               RoleApprover,
	pb.AgentService_ListPendingApprovals_FullMethodName:  RoleApprover,
	pb.AgentService_ListGrants_FullMethodName:            RoleApprover,
	pb.AgentService_RevokeGrant_FullMethodName:           RoleApprover,
	pb.AgentService_Answer_FullMethodName:                roleAnswerer,
	pb.AgentService_ListPendingQuestions_FullMethodName:  roleAnswerer,
	pb.CatalogService_UpsertCatalog_FullMethodName:       RoleAdmin,
	pb.CatalogService_ListRules_FullMethodName:           RoleAdmin,
	pb.CatalogService_RouteDryRun_FullMethodName:         RoleAdmin,
	pb.CatalogService_StreamCatalog_FullMethodName:       RoleAdmin,
	pb.CatalogService_GetProcess_FullMethodName:          RoleAdmin,
	pb.CatalogService_ListProcesses_FullMethodName:       RoleAdmin,
	pb.CatalogService_ListProcessVersions_FullMethodName: RoleAdmin,
	pb.CatalogService_GetUsage_FullMethodName:            RoleAdmin,
	pb.EvalService_StartEval_FullMethodName:              RoleAdmin,
	pb.EvalService_GetEval_FullMethodName:                RoleAdmin,
	pb.EvalService_RecordDataset_FullMethodName:          RoleAdmin,
	pb.KnowledgeService_CreateCollection_FullMethodName:  RoleAdmin,
	pb.KnowledgeService_DeleteCollection_FullMethodName:  RoleAdmin,
	pb.KnowledgeService_ListCollections_FullMethodName:   RoleUser,
	pb.KnowledgeService_GetCollection_FullMethodName:     RoleUser,
	pb.KnowledgeService_IngestDocuments_FullMethodName:   RoleUser,
	pb.KnowledgeService_GetIngest_FullMethodName:         RoleUser,
	pb.KnowledgeService_ListDocuments_FullMethodName:     RoleUser,
	pb.KnowledgeService_GetDocument_FullMethodName:       RoleUser,
	pb.KnowledgeService_DeleteDocument_FullMethodName:    RoleUser,
	pb.KnowledgeService_SearchCollection_FullMethodName:  RoleUser,
	pb.KnowledgeService_ListMemories_FullMethodName:      RoleUser,
	pb.KnowledgeService_DeleteMemory_FullMethodName:      RoleUser,
	// Erasing one's own memories needs the user role, another's the admin
	// role: memoryCore.erase checks which.
	pb.KnowledgeService_EraseMemories_FullMethodName: roleAnswerer,
}

// roleAnswerer opens a method to a token with any role of the API (user,
// approver or admin): a question asks for a role of its own (its tool's
// config), which the turn checks against the answerer's.
const roleAnswerer Role = "user, approver or admin"

// opens reports whether a token may call a method that needs role need.
func opens(caller Token, need Role) bool {
	if need == roleAnswerer {
		return slices.ContainsFunc(AllRoles(), caller.Has)
	}
	return caller.Has(need)
}

type CallerKey struct{}

// CallerOf returns the token the interceptors authenticated the call with.
func CallerOf(ctx context.Context) Token {
	t, _ := ctx.Value(CallerKey{}).(Token)
	return t
}

// TenantOf returns the tenant of the call's token.
func TenantOf(ctx context.Context) string { return CallerOf(ctx).Tenant }

// public methods need no token.
func public(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") ||
		strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// Authorize finds the call's bearer token and checks that it may call the
// method. Static tokens are compared by hash in constant time; a JWT of
// the OIDC issuer is verified (fromOIDC). Tokens are never logged.
func (s *Service) Authorize(ctx context.Context, method string) (context.Context, error) {
	caller, err := s.Authenticate(ctx)
	if err != nil {
		return nil, err
	}
	need, ok := methodRoles[method]
	switch {
	case !ok:
		return nil, agent.Errorf(agent.CodePermissionDenied, "%s is not open to tokens", method)
	case !opens(caller, need):
		return nil, agent.Errorf(agent.CodePermissionDenied, "token %s has the roles %s; %s needs the role %s",
			caller.Name, roleList(caller.Roles), method[strings.LastIndex(method, "/")+1:], need)
	}
	return context.WithValue(ctx, CallerKey{}, caller), nil
}

// WithAuthorization is ctx as a gRPC call carrying an HTTP request's
// Authorization values, for Authorize and Authenticate: how every HTTP
// door's credential is checked as a gRPC call's is.
func WithAuthorization(ctx context.Context, authorization []string) context.Context {
	md := metadata.MD{}
	md.Set("authorization", authorization...) // none: no credential
	return metadata.NewIncomingContext(ctx, md)
}

// Authenticate finds the call's bearer token, whatever its roles: the
// one place where a credential becomes an identity, for every door of the
// gateway (gRPC, the HTTP API, SSE, WebSocket, /v1, the AI SDK, MCP, A2A,
// AG-UI and the chat page all come through here).
func (s *Service) Authenticate(ctx context.Context) (Token, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) > 0 {
		if m, ok := ctx.Value(authMemoKey{}).(authMemo); ok && m.authorization == vals[0] {
			return m.caller, m.err
		}
	}
	secret, caller, found, err := s.screen(vals)
	switch {
	case err != nil:
		return Token{}, err
	case found:
		return caller, nil
	}
	return s.fromOIDC(ctx, secret)
}

// screen reads a call's bearer token and finds its static token, without
// I/O: a static token's holder (found), or a secret that may be a JWT of
// the OIDC issuer, for fromOIDC to verify; anything else is
// CodeUnauthenticated.
func (s *Service) screen(authorization []string) (secret string, caller Token, found bool, err error) {
	if len(authorization) == 0 {
		return "", Token{}, false, agent.Errorf(agent.CodeUnauthenticated, "missing bearer token: send the metadata \"authorization: Bearer <token>\"")
	}
	secret, ok := strings.CutPrefix(authorization[0], "Bearer ")
	if !ok || secret == "" {
		return "", Token{}, false, agent.Errorf(agent.CodeUnauthenticated, "malformed authorization: want \"Bearer <token>\"")
	}
	hash := sha256.Sum256([]byte(secret))
	for _, t := range s.tokens {
		if t.matches(hash) {
			caller, found = t, true
		}
	}
	if found || (s.oidc != nil && strings.Count(secret, ".") == 2) {
		return secret, caller, found, nil
	}
	return "", Token{}, false, agent.Errorf(agent.CodeUnauthenticated, "unknown token")
}

// tapAuth refuses a gRPC call whose credential cannot be accepted before
// a byte of its message is read: grpc-go reads a unary call's message
// before any interceptor runs, so an anonymous caller could otherwise
// make the server hold messages of up to the message limit on as many
// streams as it opens. It runs on the connection's reader, so it checks
// only what costs no I/O (screen); the interceptors authenticate every
// call in full as before, an OIDC token's signature included.
func (s *Service) tapAuth(ctx context.Context, info *tap.Info) (context.Context, error) {
	if public(info.FullMethodName) {
		return ctx, nil
	}
	if _, _, _, err := s.screen(info.Header.Get("authorization")); err != nil {
		return nil, s.StatusOf(ctx, err)
	}
	return ctx, nil
}

// authMemo is an HTTP request's credential as authenticate found it
// before the request's body was read (HTTPAPI.admit): its door, which
// checks the same header, is answered from it rather than verifying it
// twice (and logging a refused token twice).
type authMemo struct {
	authorization string
	caller        Token
	err           error
}

type authMemoKey struct{}

// fromOIDC verifies a JWT of the OIDC issuer and makes a caller of the
// identity its claims give. A refused token is Unauthenticated with a
// plain message and a reference, and the log says why under the same
// reference, at info: the client's token is at fault, not the gateway.
// Whether it expired is the client's to know (it signs in again); which
// claim or key was wrong is the operator's. Keys that cannot be fetched
// are the issuer's fault: Unavailable, which Status logs.
func (s *Service) fromOIDC(ctx context.Context, raw string) (Token, error) {
	id, err := s.oidc.Verify(ctx, raw)
	if err == nil {
		roles := make([]Role, len(id.Roles))
		for i, r := range id.Roles {
			roles[i] = Role(r)
		}
		return Token{Tenant: id.Tenant, Name: id.Name, Roles: roles, Issuer: id.Issuer, Subject: id.Subject}, nil
	}
	var refused *oidcauth.Error
	if !errors.As(err, &refused) || refused.Reason == oidcauth.KeysUnavailable {
		return Token{}, agent.WithCode(agent.CodeUnavailable, fmt.Errorf("OIDC issuer %s: %w", s.oidc.Issuer(), err))
	}
	ref := newRef()
	telemetry.Logger(ctx, s.logger).Info("bearer token refused", zap.String("ref", ref), zap.String("reason", string(refused.Reason)),
		zap.String("issuer", s.oidc.Issuer()), zap.Error(refused.Err))
	msg := "invalid bearer token"
	if refused.Reason == oidcauth.Expired {
		msg = "the bearer token has expired"
	}
	return Token{}, agent.Errorf(agent.CodeUnauthenticated, "%s (reference %s)", msg, ref)
}

func roleList(roles []Role) string {
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, "+")
}

func (s *Service) unaryAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if public(info.FullMethod) {
		return h(ctx, req)
	}
	actx, err := s.Authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, s.StatusOf(ctx, err)
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
	ctx, err := s.Authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return s.StatusOf(ss.Context(), err)
	}
	return h(srv, authedStream{ServerStream: ss, ctx: ctx})
}
