package server

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/doors"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/oidcauth"
	"github.com/agentflow/agentflow/internal/payloadstore"
)

// newGateway serves the gRPC API, and the HTTP API unless it is off. With
// OIDC it first discovers the issuer and fetches its keys: a gateway that
// could not tell a good token from a bad one does not start.
func (s *Server) newGateway(ctx context.Context) error {
	if s.cfg.OIDC != nil {
		var err error
		if s.oidc, err = oidcauth.New(ctx, *s.cfg.OIDC); err != nil {
			return err
		}
		s.logger.Info("accepting OIDC tokens", zap.String("issuer", s.cfg.OIDC.Issuer), zap.String("audience", s.cfg.OIDC.Audience))
	}
	c, err := s.gatewayTemporal(ctx)
	if err != nil {
		return err
	}
	// Knowledge search embeds its queries with the configured providers,
	// through the same gates as every other model call.
	embedder, err := llm.New(s.cfg.Model)
	if err != nil {
		return fmt.Errorf("model providers: %w", err)
	}
	svc, err := gateway.New(gateway.Options{Client: c, Store: s.store, Events: s.follower, Tokens: s.cfg.Tokens, OIDC: s.oidc,
		TaskQueue: s.cfg.TaskQueue, Logger: s.logger, MaxStreamsPerTenant: s.cfg.MaxStreamsPerTenant, Tenants: s.tenants, Vault: s.vault,
		Secrets: s.secrets(), Payloads: payloadstore.Converter(s.payloads),
		Knowledge: gateway.KnowledgeOptions{Store: s.knowledge, Embedder: metered.Embedder{Gates: s.gates, Inner: embedder}},
		// Listing and erasing memories embed nothing.
		Memories: s.knowledge.Memories(nil, s.memoryModel()),
		Timeline: gateway.TimelineOptions{WebUIURL: s.cfg.WebUIURL, Namespace: s.cfg.Namespace, TraceURL: s.cfg.TraceURL}})
	if err != nil {
		return err
	}
	s.svc = svc
	// The gRPC API's calls by method and status code, in /metrics, whether
	// or not traces are exported.
	opts := s.tracing.GRPCServerOptions(s.metrics.MeterProvider)
	if s.cfg.GRPCTLS.Enabled() {
		creds, err := s.cfg.GRPCTLS.Credentials()
		if err != nil {
			return err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	cat := gateway.NewCatalogService(s.store, s.tools, s.tenants, s.logger)
	s.grpc = gateway.NewGRPCServer(svc, cat, opts...)
	if s.apiLn == nil {
		return nil
	}
	// The HTTP API's calls are the gRPC API's, traced and counted the same.
	httpOpts := s.cfg.httpOptions()
	httpOpts.ServerOptions = s.tracing.GRPCServerOptions(s.metrics.MeterProvider)
	httpOpts.Doors = doors.All(s.store)
	if s.api, err = gateway.NewHTTPAPI(svc, cat, httpOpts); err != nil {
		return err
	}
	// Headers are bounded here (in time and bytes), bodies by the API
	// (gateway.HTTPOptions): no ReadTimeout, which would cut the long
	// answers of streams too.
	s.apiHTTP = &http.Server{Handler: s.api, ReadHeaderTimeout: cmp.Or(s.cfg.HTTPHeaderTimeout, DefaultHTTPHeaderTimeout),
		IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10, ErrorLog: httpErrorLog(s.logger)}
	// Shutdown waits for neither event streams nor WebSockets: end them.
	s.apiHTTP.RegisterOnShutdown(s.api.EndStreams)
	return nil
}
