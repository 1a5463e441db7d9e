package server

import (
	"fmt"
	"net"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
)

// TemporalConnection is how a process reaches the Temporal frontend
// besides its address and namespace: TLS or mutual TLS, an API key
// (Temporal Cloud), and gRPC metadata, read from the settings every
// Temporal client reads (go.temporal.io/sdk/contrib/envconfig):
// TEMPORAL_TLS, TEMPORAL_TLS_CLIENT_CERT_PATH, TEMPORAL_TLS_CLIENT_KEY_PATH,
// TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME,
// TEMPORAL_API_KEY (which turns TLS on), TEMPORAL_GRPC_META_<NAME>, and
// the profile TEMPORAL_PROFILE names in the file TEMPORAL_CONFIG_FILE
// names — only a file named so: a server process reads no file of its
// user's home by surprise. Certificates are read here, once: a
// certificate that cannot be read fails the process at start, and a
// renewed one is taken by a restart.
//
// The options hold only TLS, Credentials and HeadersProvider (and the
// profile's address and namespace, which the settings TEMPORAL_ADDRESS and
// TEMPORAL_NAMESPACE override); the caller sets the rest. Without any of
// these settings the connection is plaintext with no credentials.
func TemporalConnection() (client.Options, error) {
	_, named := os.LookupEnv("TEMPORAL_CONFIG_FILE")
	prof, err := envconfig.LoadClientConfigProfile(envconfig.LoadClientConfigProfileOptions{DisableFile: !named})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal connection settings: %w", err)
	}
	opts, err := prof.ToClientOptions(envconfig.ToClientOptionsRequest{})
	if err != nil {
		return client.Options{}, fmt.Errorf("temporal connection settings (TEMPORAL_TLS_*, TEMPORAL_API_KEY): %w", err)
	}
	return opts, nil
}

// Compression is the SDK's compression of requests to the Temporal
// frontend at address under setting (Config.TemporalCompression).
func Compression(address, setting string) (client.GrpcCompression, error) {
	switch setting {
	case "gzip":
		return &client.GrpcCompressionGzip{}, nil
	case "none":
		return &client.GrpcCompressionNone{}, nil
	case "":
		if Loopback(address) {
			return &client.GrpcCompressionNone{}, nil
		}
		return &client.GrpcCompressionGzip{}, nil
	}
	return nil, fmt.Errorf("AGENTFLOW_TEMPORAL_COMPRESSION=%q: want gzip, none, or nothing (none for a loopback address, else gzip)", setting)
}

// Loopback reports whether a host:port (or a bare host) names this
// machine: a local stack's Temporal frontend, or a listener only this
// machine reaches.
func Loopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip := net.ParseIP(host)
	return host == "localhost" || ip != nil && ip.IsLoopback()
}
