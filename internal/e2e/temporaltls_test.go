package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/testpki"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// TestTemporalOverMutualTLS: a worker reaches a Temporal frontend that
// takes only mutual TLS — as Temporal Cloud's does — with the settings
// every Temporal client reads (TEMPORAL_TLS_CLIENT_CERT_PATH and its
// kin): its turns run. A client without a certificate the frontend's CA
// signed is refused at the handshake. The frontend is a TLS proxy the test
// runs before the dev server.
func TestTemporalOverMutualTLS(t *testing.T) {
	ca := testpki.New(t)
	clientCert, clientKey := ca.Issue(t, "worker", x509.ExtKeyUsageClientAuth)
	backend, namespace := devtest.Temporal(t)
	front := startTLSProxy(t, ca, backend)

	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", clientCert)
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", clientKey)
	t.Setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", ca.CertFile)
	conn, err := server.TemporalConnection()
	require.NoError(t, err)
	require.NotNil(t, conn.ConnectionOptions.TLS)

	srv := testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{testCatalog},
		TemporalAddress: front.addr, Namespace: namespace, TemporalHTTPAddress: devtest.TemporalHTTPAddress(t),
		TemporalConnection: conn})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "tls-" + testserver.RandomID(), Prompt: "What is 12.5 * 4?"}
	run, err := srv.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(srv.TaskQueue, req), contract.AgentTurn, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status)
	require.Positive(t, front.verified.Load(), "the worker presented its certificate")

	// TLS with the CA but no certificate of the worker's own: refused.
	t.Setenv("TEMPORAL_TLS_CLIENT_CERT_PATH", "")
	t.Setenv("TEMPORAL_TLS_CLIENT_KEY_PATH", "")
	bare, err := server.TemporalConnection()
	require.NoError(t, err)
	bare.HostPort, bare.Namespace = front.addr, namespace
	dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
	defer dcancel()
	c, err := client.DialContext(dctx, bare)
	if err == nil {
		c.Close()
	}
	require.Error(t, err, "a client without a certificate connected")
	// The client may see the refusal before the proxy's side of the
	// handshake has counted it.
	require.Eventually(t, func() bool { return front.refused.Load() > 0 }, 10*time.Second, 10*time.Millisecond, "the frontend refused a handshake")
}

// tlsProxy takes mutual TLS on addr and passes the connection on to a
// plaintext backend.
type tlsProxy struct {
	addr              string
	verified, refused atomic.Int32
}

func startTLSProxy(t *testing.T, ca *testpki.CA, backend string) *tlsProxy {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{ca.KeyPair(t, "frontend", x509.ExtKeyUsageServerAuth)},
		ClientCAs:    ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert,
		NextProtos: []string{"h2"}, MinVersion: tls.VersionTLS12,
	})
	require.NoError(t, err)
	p := &tlsProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { p.pipe(c.(*tls.Conn), backend) })
		}
	})
	return p
}

func (p *tlsProxy) pipe(c *tls.Conn, backend string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		p.refused.Add(1)
		return
	}
	_ = c.SetDeadline(time.Time{})
	p.verified.Add(1)
	b, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	// Either side's end ends both copies.
	_ = c.Close()
	_ = b.Close()
	<-done
}
