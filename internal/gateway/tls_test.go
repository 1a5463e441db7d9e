package gateway_test

import (
	"context"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/testpki"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestMutualTLS: with a client CA, only clients with a certificate it
// signed connect; the bearer token still says who they are.
func TestMutualTLS(t *testing.T) {
	p := testpki.New(t)
	serverCert, serverKey := p.Issue(t, "gateway", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := p.Issue(t, "client", x509.ExtKeyUsageClientAuth)
	ca := p.CertFile

	creds, err := gateway.TLSConfig{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: ca}.Credentials()
	require.NoError(t, err)
	tok, err := gateway.NewToken("tok", "demo", "")
	require.NoError(t, err)
	svc, err := gateway.New(gateway.Options{Tokens: []gateway.Token{tok}, Logger: zap.NewNop()})
	require.NoError(t, err)
	g := gateway.NewGRPCServer(svc, nil, grpc.Creds(creds))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)

	call := func(caFile, cert, key string) error {
		c, err := gateway.ClientTLS(caFile, cert, key)
		require.NoError(t, err)
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(c))
		require.NoError(t, err)
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: pb.AgentService_ServiceDesc.ServiceName})
		return err
	}
	require.NoError(t, call(ca, clientCert, clientKey))
	require.Error(t, call(ca, "", ""), "no client certificate, no connection")

	other := testpki.New(t)
	strangerCert, strangerKey := other.Issue(t, "stranger", x509.ExtKeyUsageClientAuth)
	require.Error(t, call(ca, strangerCert, strangerKey), "a certificate of another CA is refused")

	_, err = gateway.TLSConfig{CertFile: serverCert}.Credentials()
	require.ErrorContains(t, err, "both a certificate and a key")
	_, err = gateway.TLSConfig{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: serverKey}.Credentials()
	require.ErrorContains(t, err, "holds no PEM certificate")
}
