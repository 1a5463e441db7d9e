package gateway_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/agentflow/agentflow/internal/gateway"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// pki writes a CA and certificates signed by it into dir.
type pki struct {
	dir  string
	ca   *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{dir: t.TempDir(), next: 2}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	p.ca, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	p.key = key
	p.write(t, "ca.pem", "CERTIFICATE", der)
	return p
}

func (p *pki) write(t *testing.T, name, typ string, der []byte) string {
	t.Helper()
	file := filepath.Join(p.dir, name)
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return file
}

// issue writes a certificate and key for name, for a server or a client.
func (p *pki) issue(t *testing.T, name string, usage x509.ExtKeyUsage) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.next), Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	p.next++
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	return p.write(t, name+".pem", "CERTIFICATE", der), p.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
}

// TestMutualTLS: with a client CA, only clients with a certificate it
// signed connect; the bearer token still says who they are.
func TestMutualTLS(t *testing.T) {
	p := newPKI(t)
	serverCert, serverKey := p.issue(t, "gateway", x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := p.issue(t, "client", x509.ExtKeyUsageClientAuth)
	ca := filepath.Join(p.dir, "ca.pem")

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

	other := newPKI(t)
	strangerCert, strangerKey := other.issue(t, "stranger", x509.ExtKeyUsageClientAuth)
	require.Error(t, call(ca, strangerCert, strangerKey), "a certificate of another CA is refused")

	_, err = gateway.TLSConfig{CertFile: serverCert}.Credentials()
	require.ErrorContains(t, err, "both a certificate and a key")
	_, err = gateway.TLSConfig{CertFile: serverCert, KeyFile: serverKey, ClientCAFile: serverKey}.Credentials()
	require.ErrorContains(t, err, "holds no PEM certificate")
}
