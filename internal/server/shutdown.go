package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/agentflow/agentflow/internal/nexusdoor"
)

// Run serves until ctx is done, a part fails or the worker stops by
// itself, then shuts the process down (shutdown) and returns the first
// failure, if any.
func (s *Server) Run(ctx context.Context) error {
	if s.cfg.Has(RoleWorker) {
		if err := s.worker.Start(); err != nil {
			return fmt.Errorf("start worker: %w", err)
		}
		// shutdown stops it; this is for a return before that.
		defer s.worker.Stop()
		s.logger.Info("worker started", zap.String("task_queue", s.cfg.TaskQueue), zap.String("namespace", s.cfg.Namespace),
			zap.String("deployment", s.cfg.Deployment.Name), zap.String("build_id", s.cfg.Deployment.BuildID))
		for i, w := range s.nexus {
			if err := w.Start(); err != nil {
				return fmt.Errorf("start nexus worker: %w", err)
			}
			defer w.Stop()
			s.logger.Info("nexus service serving", zap.String("service", nexusdoor.Service),
				zap.String("task_queue", s.cfg.NexusBindings[i].TaskQueue), zap.String("tenant", s.cfg.NexusBindings[i].TenantID))
		}
	}

	// What activities finishing after a SIGTERM and the gateway's last
	// calls use — the live path, the catalog cache — and the admin
	// endpoint, which says unready meanwhile, run until the worker and
	// the gateway have stopped, not until ctx ends. The store and the
	// Temporal client stay open until Close.
	base, stopBase := context.WithCancel(context.WithoutCancel(ctx))
	defer stopBase()
	g, gctx := errgroup.WithContext(base)
	g.Go(func() error { return s.hub.Run(gctx) })
	if s.interrupts != nil {
		g.Go(func() error { return s.interrupts.Run(gctx) })
	}
	g.Go(func() error { return s.tenants.Run(gctx) })
	if s.grpc != nil {
		s.logger.Info("gateway serving", zap.String("addr", s.GRPCAddr()))
		g.Go(serving("serve grpc", func() error { return s.grpc.Serve(s.grpcLn) }))
	}
	if s.api != nil {
		s.logger.Info("HTTP API serving", zap.String("addr", s.HTTPAPIAddr()))
		g.Go(s.api.Serve)
		g.Go(serving("serve http api", func() error { return s.apiHTTP.Serve(s.apiLn) }))
	}
	if s.http != nil {
		g.Go(serving("serve http", func() error { return s.http.Serve(s.httpLn) }))
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return s.http.Shutdown(sctx)
		})
	}
	g.Go(func() error {
		var err error
		select {
		case <-ctx.Done():
		case <-gctx.Done(): // a part failed: g.Wait returns its error
		case werr := <-s.fatal:
			err = fmt.Errorf("the worker stopped: %w", werr)
			s.logger.Error("worker stopped by itself; shutting down", zap.Error(werr))
		}
		s.shutdown()
		stopBase()
		return err
	})
	return g.Wait()
}

// shutdown stops the process in the order that loses nothing. /healthz
// turns unready first. Then, at once and side by side: the gateway stops
// taking calls and connections (gRPC GOAWAY, the HTTP listener closed)
// and ends its streams with a hint to resume elsewhere (GoingAway, an
// event stream's retry), waiting up to StopTimeout for the other calls in
// flight; and
// the worker stops polling and lets its activities in flight finish, up
// to StopTimeout, before it cancels what is left (to be retried on
// another worker). Run stops the rest once both are done.
func (s *Server) shutdown() {
	s.draining.Store(true)
	begin := time.Now()
	s.logger.Info("shutting down: not ready", zap.Duration("stop_timeout", s.stopTimeout()))
	var wg sync.WaitGroup
	if s.grpc != nil {
		wg.Go(s.stopGRPC)
	}
	if s.api != nil {
		wg.Go(s.stopHTTPAPI)
	}
	if s.cfg.Has(RoleWorker) {
		for _, w := range s.nexus {
			wg.Go(w.Stop)
		}
		wg.Go(func() {
			start := time.Now()
			s.worker.Stop()
			s.logger.Info("worker stopped", zap.Duration("took", time.Since(start)))
		})
	}
	wg.Wait()
	s.logger.Info("shut down", zap.Duration("took", time.Since(begin)))
}

// stopGRPC sends the gRPC API's clients GOAWAY and refuses new
// connections, ends the streams being served (GoingAway), and waits for
// the other calls in flight (an Invoke lasts as long as its turn), up to
// the stop timeout.
func (s *Server) stopGRPC() {
	done := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(done) }()
	s.svc.EndStreams()
	select {
	case <-done:
	case <-time.After(s.stopTimeout()):
		s.grpc.Stop()
		<-done
	}
}

// stopHTTPAPI closes the HTTP API's listener and its idle connections,
// ends its event streams and WebSockets (with a reconnection hint), and
// waits for the requests in flight, up to the stop timeout.
func (s *Server) stopHTTPAPI() {
	sctx, cancel := context.WithTimeout(context.Background(), s.stopTimeout())
	defer cancel()
	if err := s.apiHTTP.Shutdown(sctx); err != nil {
		_ = s.apiHTTP.Close()
	}
	s.api.Stop(time.Second)
}

// stopTimeout is the worker's StopTimeout, or its default.
func (s *Server) stopTimeout() time.Duration {
	return cmp.Or(s.cfg.StopTimeout, DefaultStopTimeout)
}

// gatewayTemporal is the Temporal client the gateway starts turns with:
// the worker's, so that a turn started here gets its first workflow task
// in the start reply (eager start) — except when the worker is
// versioned. An eager task goes to the worker in this process whatever
// build the deployment's routing would send the turn to; a client with
// no worker of its own on the connection never asks for one.
func (s *Server) gatewayTemporal(ctx context.Context) (client.Client, error) {
	if !s.cfg.Has(RoleWorker) || !s.cfg.Deployment.On() {
		return s.client, nil
	}
	c, err := client.NewClientFromExistingWithContext(ctx, s.client, s.clientOpts)
	if err != nil {
		return nil, fmt.Errorf("temporal client for the gateway: %w", err)
	}
	s.gatewayClient = c
	return c, nil
}

// serving runs serve, naming what failed as what; an HTTP server shut
// down (http.ErrServerClosed) ended as asked.
func serving(what string, serve func() error) func() error {
	return func() error {
		if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
}
