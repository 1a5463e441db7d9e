package server

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/objstore"
)

// newEgress builds the operator's egress policy, which bounds every
// tenant's allowlist, for the tools' clients and the catalogs' checks:
// what EgressAllow opens, and the platform's own addresses closed.
func (s *Server) newEgress(ctx context.Context) error {
	platform, err := s.platformAddrs()
	if err != nil {
		return err
	}
	if s.egress, err = egress.NewOperator(ctx, egress.OperatorConfig{Allow: s.cfg.EgressAllow, Platform: platform}); err != nil {
		return fmt.Errorf("egress policy: %w", err)
	}
	closed := make([]string, len(platform))
	for i, p := range platform {
		closed[i] = p.Addr
	}
	s.logger.Info("egress policy", zap.Strings("opened", s.cfg.EgressAllow), zap.Strings("platform", closed))
	return nil
}

// temporalHTTPPort is the Temporal frontend's HTTP API port where the
// server's configuration does not choose another (frontend rpc.httpPort,
// 7243 in the server's config templates and its docker image). The dev
// server picks a free one unless told: devstack tells it, and hands the
// address on (TemporalHTTPAddr).
const temporalHTTPPort = "7243"

// platformAddrs are the platform's own listening addresses this process
// knows: the Temporal frontend (gRPC, and HTTP where TemporalHTTPAddr
// says, by default at the server's default port),
// Postgres, the gateway's gRPC and HTTP APIs, the health and metrics
// endpoint, the scripted model it serves, and AGENTFLOW_PLATFORM_ADDRS. A
// listener the process gains belongs here too.
func (s *Server) platformAddrs() ([]egress.PlatformAddr, error) {
	temporal := strings.TrimPrefix(s.cfg.TemporalAddress, "dns:///")
	out := []egress.PlatformAddr{{Addr: temporal, What: "the Temporal frontend's gRPC API", From: "TEMPORAL_ADDRESS"}}
	if s.cfg.TemporalHTTPAddr != "" {
		out = append(out, egress.PlatformAddr{Addr: s.cfg.TemporalHTTPAddr, What: "the Temporal frontend's HTTP API", From: "AGENTFLOW_TEMPORAL_HTTP_ADDR"})
	} else if host, _, err := net.SplitHostPort(temporal); err == nil {
		out = append(out, egress.PlatformAddr{Addr: net.JoinHostPort(host, temporalHTTPPort), What: "the Temporal frontend's HTTP API", From: "TEMPORAL_ADDRESS"})
	}
	db, err := pgconn.ParseConfig(s.cfg.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	seen := map[string]bool{}
	for _, h := range append([]*pgconn.FallbackConfig{{Host: db.Host, Port: db.Port}}, db.Fallbacks...) {
		addr := net.JoinHostPort(h.Host, strconv.Itoa(int(h.Port)))
		// A Unix socket is no TCP address; a host comes once per TLS mode.
		if !strings.HasPrefix(h.Host, "/") && !seen[addr] {
			seen[addr] = true
			out = append(out, egress.PlatformAddr{Addr: addr, What: "Postgres", From: "DATABASE_URL"})
		}
	}
	// A gateway address this process does not listen on is another
	// process's on this machine, most likely.
	if a := listenedOr(s.GRPCAddr(), s.cfg.GRPCAddr); a != "" {
		out = append(out, egress.PlatformAddr{Addr: a, What: "the gateway's gRPC API", From: "AGENTFLOW_GRPC_ADDR"})
	}
	if a := listenedOr(s.HTTPAPIAddr(), s.cfg.HTTPAPIAddr); a != "" {
		out = append(out, egress.PlatformAddr{Addr: a, What: "the gateway's HTTP API", From: "AGENTFLOW_HTTP_API_ADDR"})
	}
	if u, err := url.Parse(s.cfg.ObjectStore.Endpoint); err == nil && s.cfg.ObjectStore.Enabled() && u.Host != "" {
		// Its bucket holds every tenant's large data.
		addr := u.Host
		if u.Port() == "" {
			addr = net.JoinHostPort(u.Hostname(), map[string]string{"http": "80", "https": "443"}[u.Scheme])
		}
		out = append(out, egress.PlatformAddr{Addr: addr, What: "the object store", From: objstore.EnvEndpoint})
	}
	if a := s.HTTPAddr(); a != "" {
		out = append(out, egress.PlatformAddr{Addr: a, What: "the health and metrics endpoint", From: "AGENTFLOW_HTTP_ADDR"})
	}
	if s.scriptURL != "" {
		if u, err := url.Parse(s.scriptURL); err == nil {
			out = append(out, egress.PlatformAddr{Addr: u.Host, What: "the scripted model", From: "AGENTFLOW_SCRIPT"})
		}
	}
	for _, a := range s.cfg.PlatformAddrs {
		out = append(out, egress.PlatformAddr{Addr: a, What: "a platform address", From: egress.EnvPlatformAddrs})
	}
	return out, nil
}

// listenedOr is the address a listener took, or else the configured one
// when it names a port (not "off", not port 0).
func listenedOr(listened, configured string) string {
	if listened != "" {
		return listened
	}
	if _, port, err := net.SplitHostPort(configured); err == nil && port != "0" {
		return configured
	}
	return ""
}
