package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
)

// TLSConfig is the gateway's TLS: its certificate and key, and, for
// mutual TLS, the CA that client certificates must chain to. The bearer
// token still names the tenant and its roles; a client certificate is a
// second factor for who may connect at all.
type TLSConfig struct {
	CertFile, KeyFile string
	// ClientCAFile, when set, makes a client certificate signed by it
	// required.
	ClientCAFile string
}

// Enabled reports whether TLS is configured.
func (c TLSConfig) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.ClientCAFile != "" }

// Credentials loads the files into server credentials.
func (c TLSConfig) Credentials() (credentials.TransportCredentials, error) {
	if c.CertFile == "" || c.KeyFile == "" {
		return nil, fmt.Errorf("gateway TLS: both a certificate and a key are needed (AGENTFLOW_GRPC_TLS_CERT, AGENTFLOW_GRPC_TLS_KEY)")
	}
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("gateway TLS: load certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if c.ClientCAFile != "" {
		pool, err := loadPool(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("gateway TLS: client CA: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return credentials.NewTLS(cfg), nil
}

func loadPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// ClientTLS is a client's TLS for the gateway: the CA the gateway's
// certificate chains to (empty: the system's), and for mutual TLS the
// client's certificate and key.
func ClientTLS(caFile, certFile, keyFile string) (credentials.TransportCredentials, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadPool(caFile)
		if err != nil {
			return nil, fmt.Errorf("gateway CA: %w", err)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return credentials.NewTLS(cfg), nil
}
