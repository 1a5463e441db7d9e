// Package testpki makes a certificate authority for tests and issues
// certificates signed by it for servers and clients on loopback, written
// as PEM files into the test's temporary folder. Only tests import it.
//
// It imports nothing of agentflow's.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
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
)

// CA is a test's certificate authority.
type CA struct {
	// Dir holds the PEM files; CertFile is the CA's certificate.
	Dir, CertFile string
	// Pool holds the CA's certificate, for a peer that verifies.
	Pool *x509.CertPool

	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	next int64
}

// New makes a CA valid for an hour around now.
func New(t testing.TB) *CA {
	t.Helper()
	ca := &CA{Dir: t.TempDir(), next: 2, Pool: x509.NewCertPool()}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca.cert, err = x509.ParseCertificate(der)
	require.NoError(t, err)
	ca.key = key
	ca.Pool.AddCert(ca.cert)
	ca.CertFile = ca.write(t, "ca.pem", "CERTIFICATE", der)
	return ca
}

func (ca *CA) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	file := filepath.Join(ca.Dir, name)
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
	return file
}

// Issue writes a certificate and key for name — for 127.0.0.1 and
// localhost, a server (x509.ExtKeyUsageServerAuth) or a client
// (x509.ExtKeyUsageClientAuth) — and returns their files.
func (ca *CA) Issue(t testing.TB, name string, usage x509.ExtKeyUsage) (certFile, keyFile string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(ca.next), Subject: pkix.Name{CommonName: name},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		KeyUsage: x509.KeyUsageDigitalSignature, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	ca.next++
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &k.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(k)
	require.NoError(t, err)
	return ca.write(t, name+".pem", "CERTIFICATE", der), ca.write(t, name+"-key.pem", "EC PRIVATE KEY", kder)
}

// KeyPair issues a certificate for name and loads it.
func (ca *CA) KeyPair(t testing.TB, name string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	certFile, keyFile := ca.Issue(t, name, usage)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	return pair
}
