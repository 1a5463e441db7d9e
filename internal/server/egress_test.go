package server

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/gateway"
)

func TestConfigFromEnvEgress(t *testing.T) {
	c, err := ConfigFromEnv()
	require.NoError(t, err)
	require.Empty(t, c.EgressAllow, "nothing opened by default")
	require.Empty(t, c.PlatformAddrs)

	t.Setenv("AGENTFLOW_EGRESS_ALLOW", "127.0.0.1:8089, 10.0.0.0/8,flights:8089")
	t.Setenv("AGENTFLOW_PLATFORM_ADDRS", "temporal-ui:8080, 127.0.0.1:8233")
	c, err = ConfigFromEnv()
	require.NoError(t, err)
	require.Equal(t, []string{"127.0.0.1:8089", "10.0.0.0/8", "flights:8089"}, c.EgressAllow)
	require.Equal(t, []string{"temporal-ui:8080", "127.0.0.1:8233"}, c.PlatformAddrs)

	t.Setenv("AGENTFLOW_EGRESS_ALLOW", "127.0.0.1:8089,flights")
	_, err = ConfigFromEnv()
	require.EqualError(t, err, `AGENTFLOW_EGRESS_ALLOW entry "flights": name the port too, as in flights:443`)
	t.Setenv("AGENTFLOW_EGRESS_ALLOW", "")
	t.Setenv("AGENTFLOW_PLATFORM_ADDRS", "temporal-ui")
	_, err = ConfigFromEnv()
	require.EqualError(t, err, `AGENTFLOW_PLATFORM_ADDRS entry "temporal-ui": want host:port`)
}

// TestPlatformAddrs: what a process knows of the platform's addresses
// from its own configuration.
func TestPlatformAddrs(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []egress.PlatformAddr
	}{
		{"compose", Config{TemporalAddress: "temporal:7233", DatabaseURL: "postgres://agentflow:pw@postgres:5432/agentflow?sslmode=disable",
			GRPCAddr: "0.0.0.0:50051", HTTPAPIAddr: "0.0.0.0:8080", PlatformAddrs: []string{"temporal-ui:8080"}},
			[]egress.PlatformAddr{
				{Addr: "temporal:7233", What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"},
				{Addr: "temporal:7243", What: "the Temporal frontend's HTTP API", From: "TEMPORAL_ADDRESS"},
				{Addr: "postgres:5432", What: "Postgres", From: "DATABASE_URL"},
				{Addr: "0.0.0.0:50051", What: "the gateway's gRPC API", From: "AGENTFLOW_GRPC_ADDR"},
				{Addr: "0.0.0.0:8080", What: "the gateway's HTTP API", From: "AGENTFLOW_HTTP_API_ADDR"},
				{Addr: "temporal-ui:8080", What: "a platform address", From: "AGENTFLOW_PLATFORM_ADDRS"},
			}},
		{"the HTTP API named", Config{TemporalAddress: "127.0.0.1:7233", TemporalHTTPAddr: "127.0.0.1:41234", DatabaseURL: "postgres://u@127.0.0.1:5432/x"},
			[]egress.PlatformAddr{
				{Addr: "127.0.0.1:7233", What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"},
				{Addr: "127.0.0.1:41234", What: "the Temporal frontend's HTTP API", From: "AGENTFLOW_TEMPORAL_HTTP_ADDR"},
				{Addr: "127.0.0.1:5432", What: "Postgres", From: "DATABASE_URL"},
			}},
		{"gRPC target, socket and fallback hosts", Config{TemporalAddress: "dns:///temporal.internal:7233",
			DatabaseURL: "host=/var/run/postgresql,db1.internal,db2.internal port=5432,5433,5434 dbname=app", GRPCAddr: "127.0.0.1:0", HTTPAPIAddr: "off"},
			[]egress.PlatformAddr{
				{Addr: "temporal.internal:7233", What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"},
				{Addr: "temporal.internal:7243", What: "the Temporal frontend's HTTP API", From: "TEMPORAL_ADDRESS"},
				{Addr: "db1.internal:5433", What: "Postgres", From: "DATABASE_URL"},
				{Addr: "db2.internal:5434", What: "Postgres", From: "DATABASE_URL"},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{cfg: tt.cfg}
			got, err := s.platformAddrs()
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

// A worker whose AGENTFLOW_EGRESS_ALLOW names one of its platform's ports
// fails at start, saying which, before it connects to anything.
func TestNewRefusesOpeningPlatformPorts(t *testing.T) {
	http, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := http.Addr().String()
	require.NoError(t, http.Close())
	cfg := Config{TemporalAddress: "127.0.0.1:7233", DatabaseURL: "postgres://u@127.0.0.1:1/db", TaskQueue: "q",
		HTTPAddr: addr, EgressAllow: []string{"10.0.0.0/8", addr}}
	_, err = New(context.Background(), cfg, zaptest.NewLogger(t))
	require.EqualError(t, err, `egress policy: AGENTFLOW_EGRESS_ALLOW entry "`+addr+`": `+addr+
		` is the health and metrics endpoint, a port of the platform's own, which stays closed`)

	cfg.HTTPAddr, cfg.EgressAllow = "off", []string{"127.0.0.1:7243"}
	_, err = New(context.Background(), cfg, zaptest.NewLogger(t))
	require.ErrorContains(t, err, `"127.0.0.1:7243": 127.0.0.1:7243 is the Temporal frontend's HTTP API`)

	// The gateway's HTTP API, on the port it took.
	tokens, err := gateway.ParseTokens("t=demo")
	require.NoError(t, err)
	cfg.Roles, cfg.Tokens, cfg.GRPCAddr, cfg.HTTPAPIAddr = []string{RoleGateway}, tokens, "127.0.0.1:0", addr
	cfg.EgressAllow = []string{addr}
	_, err = New(context.Background(), cfg, zaptest.NewLogger(t))
	require.EqualError(t, err, `egress policy: AGENTFLOW_EGRESS_ALLOW entry "`+addr+`": `+addr+
		` is the gateway's HTTP API, a port of the platform's own, which stays closed`)
}
