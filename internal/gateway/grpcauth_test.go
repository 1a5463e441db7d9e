package gateway_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestGRPCRefusesBeforeTheMessage: on the native gRPC port a call whose
// credential cannot be accepted is refused from its headers, before its
// message is read: here none is ever sent, and the refusal comes anyway
// (grpc-go reads a unary call's message before any interceptor runs, so
// without the check the server would wait for it). A call with a token
// goes on to read its message.
func TestGRPCRefusesBeforeTheMessage(t *testing.T) {
	tok, err := gateway.NewToken("secret-tok", "demo", "user")
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Tokens: []gateway.Token{tok}, Logger: zap.NewNop()})
	require.NoError(t, err)
	g := gateway.NewGRPCServer(svc, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })

	for _, tc := range []struct {
		name, authorization string
		want                codes.Code
		message             string
	}{
		{"no token", "", codes.Unauthenticated, "missing bearer token"},
		{"not a bearer token", "Basic dXNlcjpwYXNz", codes.Unauthenticated, "malformed authorization"},
		{"an unknown token", "Bearer nobody", codes.Unauthenticated, "unknown token"},
		// Past the check, the server reads the message, which never
		// comes: the client's end of sending is the next thing it sees.
		{"a token", "Bearer secret-tok", codes.Internal, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tc.authorization != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, "authorization", tc.authorization)
			}
			s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, pb.AgentService_Invoke_FullMethodName)
			require.NoError(t, err)
			if tc.want != codes.Unauthenticated {
				require.NoError(t, s.CloseSend())
			}
			err = s.RecvMsg(&pb.TurnResult{})
			require.Equal(t, tc.want, status.Code(err), "%v", err)
			require.Contains(t, status.Convert(err).Message(), tc.message)
		})
	}
}
