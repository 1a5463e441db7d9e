package gateway_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestErrorTable walks every domain code through the gateway: the status
// code is the table's, by name, and only errors written for the caller
// keep their text.
func TestErrorTable(t *testing.T) {
	want := map[agent.Code]codes.Code{
		agent.CodeInvalid:          codes.InvalidArgument,
		agent.CodeNotFound:         codes.NotFound,
		agent.CodeAgentNotFound:    codes.NotFound,
		agent.CodeUnauthenticated:  codes.Unauthenticated,
		agent.CodePermissionDenied: codes.PermissionDenied,
		agent.CodeConflict:         codes.FailedPrecondition,
		agent.CodeRateLimited:      codes.ResourceExhausted,
		agent.CodeModelRejected:    codes.FailedPrecondition,
		agent.CodeContextLength:    codes.FailedPrecondition,
		agent.CodeInvalidOutput:    codes.FailedPrecondition,
		agent.CodeGuardrailTripped: codes.FailedPrecondition,
		agent.CodeModelFailed:      codes.Unavailable,
		agent.CodeMaxIterations:    codes.ResourceExhausted,
		agent.CodeTokenBudget:      codes.ResourceExhausted,
		agent.CodeBudget:           codes.ResourceExhausted,
		agent.CodeTimeout:          codes.DeadlineExceeded,
		agent.CodeCanceled:         codes.Canceled,
		agent.CodeUnavailable:      codes.Unavailable,
		agent.CodeInternal:         codes.Internal,
	}
	// The HTTP API's status for each code.
	wantHTTP := map[agent.Code]int{
		agent.CodeInvalid:          http.StatusBadRequest,
		agent.CodeNotFound:         http.StatusNotFound,
		agent.CodeAgentNotFound:    http.StatusNotFound,
		agent.CodeUnauthenticated:  http.StatusUnauthorized,
		agent.CodePermissionDenied: http.StatusForbidden,
		agent.CodeConflict:         http.StatusConflict,
		agent.CodeRateLimited:      http.StatusTooManyRequests,
		agent.CodeModelRejected:    http.StatusUnprocessableEntity,
		agent.CodeContextLength:    http.StatusUnprocessableEntity,
		agent.CodeInvalidOutput:    http.StatusUnprocessableEntity,
		agent.CodeGuardrailTripped: http.StatusUnprocessableEntity,
		agent.CodeModelFailed:      http.StatusBadGateway,
		agent.CodeMaxIterations:    http.StatusUnprocessableEntity,
		agent.CodeTokenBudget:      http.StatusUnprocessableEntity,
		agent.CodeBudget:           http.StatusTooManyRequests,
		agent.CodeTimeout:          http.StatusGatewayTimeout,
		agent.CodeCanceled:         http.StatusConflict,
		agent.CodeUnavailable:      http.StatusServiceUnavailable,
		agent.CodeInternal:         http.StatusInternalServerError,
	}
	require.ElementsMatch(t, agent.Codes(), keys(want), "every code has a gRPC code here")
	require.ElementsMatch(t, agent.Codes(), keys(wantHTTP), "every code has an HTTP status here")
	for _, code := range agent.Codes() {
		t.Run(string(code), func(t *testing.T) {
			require.Equal(t, wantHTTP[code], code.Class().HTTP)
			core, logs := observer.New(zap.DebugLevel)
			err := gateway.Status(context.Background(), zap.New(core),
				&agent.Error{Code: code, Message: "the detail", Err: errSecret})
			st := status.Convert(err)
			require.Equal(t, want[code], st.Code())
			// The status says the error's type, for clients that tell
			// AgentNotFound from NotFound, and the HTTP API.
			info, ok := gateway.ErrorInfoOf(st)
			require.True(t, ok)
			require.Equal(t, gateway.ErrorDomain, info.GetDomain())
			require.Equal(t, code.Class().Type, info.GetReason())
			if !code.Class().Public {
				require.Contains(t, st.Message(), info.GetMetadata()["reference"])
			}
			if code.Class().Public {
				require.Equal(t, "the detail: "+errSecret.Error(), st.Message())
				require.Zero(t, logs.Len())
				return
			}
			require.NotContains(t, st.Message(), "detail")
			require.NotContains(t, st.Message(), "password")
			require.Contains(t, st.Message(), "reference ")
			require.Equal(t, 1, logs.Len(), "the details are in the log")
			entry := logs.All()[0]
			require.Contains(t, st.Message(), entry.ContextMap()["ref"])
			require.Contains(t, entry.ContextMap()["error"], "the detail")
		})
	}

	t.Run("an error without a code", func(t *testing.T) {
		err := gateway.Status(context.Background(), zap.NewNop(), errSecret)
		require.Equal(t, codes.Internal, status.Code(err))
		require.NotContains(t, status.Convert(err).Message(), "password")
	})
	t.Run("a caller that went away", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		require.Equal(t, codes.Canceled, status.Code(gateway.Status(ctx, zap.NewNop(), errSecret)))
	})
}

type secretError struct{}

func (secretError) Error() string {
	return `dial tcp 10.0.0.7:5432: password authentication failed for user "agentflow"`
}

var errSecret error = secretError{}

func keys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestDatabaseDownIsNotLeaked: with the database refusing connections,
// a call fails as Unavailable with a reference, never with the
// database's own words; the log has them.
func TestDatabaseDownIsNotLeaked(t *testing.T) {
	ctx := context.Background()
	dbURL := devtest.Database(t)
	core, logs := observer.New(zap.WarnLevel)
	logger := zap.New(core)
	st, err := store.Open(ctx, dbURL, store.Options{Logger: logger})
	require.NoError(t, err)
	defer st.Close()
	client := serveGateway(t, gateway.Options{Store: st, Logger: logger})
	as := fixture{}.as("tok")

	_, err = client.ListAgents(as, &pb.ListAgentsRequest{})
	require.NoError(t, err, "the database is up")

	devtest.RefuseConnections(t, dbURL)
	_, err = client.ListAgents(as, &pb.ListAgentsRequest{})
	require.Error(t, err)
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	msg := status.Convert(err).Message()
	require.Contains(t, msg, "reference ")
	for _, leak := range []string{"database", "connect", "SQLSTATE", "postgres", "pgx", "FATAL"} {
		require.NotContains(t, msg, leak)
	}
	require.Equal(t, 1, logs.FilterMessage("request failed").Len())
}

// TestTemporalDownIsUnavailable: with nothing listening where Temporal
// should be, starting a turn fails as Unavailable with a reference, never
// with the connection's own words. The start is tried again for the
// gateway's start timeout (30 s) first: Temporal may only be slow.
func TestTemporalDownIsUnavailable(t *testing.T) {
	ctx := context.Background()
	core, logs := observer.New(zap.WarnLevel)
	logger := zap.New(core)
	st, err := store.Open(ctx, devtest.Database(t), store.Options{Logger: logger})
	require.NoError(t, err)
	defer st.Close()
	kinds, err := tools.NewRegistry(tools.Deps{Logger: logger}, tools.Builtin()...)
	require.NoError(t, err)
	require.NoError(t, testserver.ApplyCatalogs(ctx, st, kinds, "tenant: demo\ndefault_agent: a\nagents:\n  - {id: a, model: 'openai:gpt-4o-mini'}\n"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	require.NoError(t, ln.Close())
	tc, err := client.NewLazyClient(client.Options{HostPort: down})
	require.NoError(t, err)
	defer tc.Close()
	client := serveGateway(t, gateway.Options{Client: tc, Store: st, TaskQueue: "q", Logger: logger})

	cctx, cancel := context.WithTimeout(fixture{}.as("tok"), time.Minute)
	defer cancel()
	_, err = client.Invoke(cctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "hi"}})
	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	msg := status.Convert(err).Message()
	require.Contains(t, msg, "reference ")
	for _, leak := range []string{down, "connect", "dial", "refused"} {
		require.NotContains(t, msg, leak)
	}
	require.Equal(t, 1, logs.FilterMessage("request failed").Len())
}

// serveGateway serves a gateway of opts, with token "tok" of tenant demo,
// until the test ends, and returns a client of it.
func serveGateway(t *testing.T, opts gateway.Options) pb.AgentServiceClient {
	t.Helper()
	tok, err := gateway.NewToken("tok", "demo", "", gateway.RoleUser)
	require.NoError(t, err)
	opts.Tokens = []gateway.Token{tok}
	svc, err := gateway.New(opts)
	require.NoError(t, err)
	g := gateway.NewGRPCServer(svc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewAgentServiceClient(conn)
}

// TestGoingAway: a stream a stopping gateway ends says where to resume,
// and when.
func TestGoingAway(t *testing.T) {
	st := status.Convert(gateway.GoingAway("turn/demo/j1", 12))
	require.Equal(t, codes.Unavailable, st.Code())
	require.Contains(t, st.Message(), `resume stream "turn/demo/j1" after event 12`)
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			info = d
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	require.NotNil(t, info)
	require.Equal(t, agent.ErrTypeUnavailable, info.GetReason())
	require.Equal(t, gateway.ErrorDomain, info.GetDomain())
	require.Equal(t, map[string]string{"stream_id": "turn/demo/j1", "after_index": "12"}, info.GetMetadata())
	require.NotNil(t, retry)
	require.Equal(t, gateway.ReconnectDelay, retry.GetRetryDelay().AsDuration())
}
