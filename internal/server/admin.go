package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"
)

// newHTTP serves /healthz, /health, /livez and /metrics, unless HTTPAddr is off.
func (s *Server) newHTTP() error {
	if s.httpLn == nil {
		return nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	// The name seed 004's service answers its health checks on.
	mux.HandleFunc("GET /health", s.healthz)
	// Liveness: the process serves. Restarting it would not bring a
	// dependency back, so an outage fails /healthz, not this.
	mux.HandleFunc("GET /livez", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}))
	if s.cfg.Profiling {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	s.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return nil
}

// healthz reports readiness per dependency: 200 when Postgres and
// Temporal answer, 503 (what a load balancer takes out of rotation)
// when either does not. The live path (Postgres LISTEN) only degrades
// streaming to log reads, so it is reported but does not fail the check;
// so is an OIDC issuer whose keys could not be fetched again, since the
// keys held keep verifying (an issuer unreachable at start fails New).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	rep := health{Status: "ok"}
	draining := s.draining.Load()
	if draining {
		// First, for a load balancer or Kubernetes to take the process out
		// of rotation while what is in flight finishes.
		rep.Status = "unavailable"
		rep.Checks = append(rep.Checks, check{Name: "shutdown", Status: "unavailable", Error: "shutting down: finishing what is in flight"})
	}
	rep.check(ctx, "postgres", func(ctx context.Context) error { return s.store.Pool().Ping(ctx) })
	rep.check(ctx, "temporal", func(ctx context.Context) error {
		_, err := s.client.CheckHealth(ctx, &client.CheckHealthRequest{})
		return err
	})
	if s.cfg.Deployment.On() && s.cfg.Has(RoleWorker) {
		// A versioned worker gets no task, and its build cannot be made
		// current, until the server has registered it.
		rep.check(ctx, "deployment", func(ctx context.Context) error {
			return s.registered.Check(ctx, s.client, s.cfg.Deployment, s.cfg.TaskQueue)
		})
	}
	live := check{Name: "live_path", Status: "ok"}
	if !s.hub.Connected() {
		live.Status, live.Error = "degraded", "not listening for stream notifications; followers read the log"
	}
	rep.Checks = append(rep.Checks, live)
	if s.knowledge != nil {
		rep.KnowledgeIndex = s.knowledge.VectorIndex()
	}
	if s.oidc != nil {
		// Keys held keep verifying while the issuer is away.
		c := check{Name: "oidc", Status: "ok"}
		if err := s.oidc.Health(); err != nil {
			c.Status, c.Error = "degraded", err.Error()
		}
		rep.Checks = append(rep.Checks, c)
	}
	code := http.StatusOK
	if rep.Status != "ok" {
		code = http.StatusServiceUnavailable
		if !draining {
			s.logger.Warn("not ready", zap.Any("checks", rep.Checks))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(rep)
}

// health is /healthz's answer.
type health struct {
	Status string  `json:"status"` // ok | unavailable
	Checks []check `json:"checks"`
	// KnowledgeIndex is how knowledge search finds vectors: "exact" (a
	// scan of every embedding) or "pgvector" (knowledge.Store.VectorIndex).
	KnowledgeIndex string `json:"knowledge_vector_index,omitempty"`
}

type check struct {
	Name      string  `json:"name"`
	Status    string  `json:"status"` // ok | unavailable | degraded
	LatencyMS float64 `json:"latency_ms"`
	Error     string  `json:"error,omitempty"`
}

func (h *health) check(ctx context.Context, name string, probe func(context.Context) error) {
	start := time.Now()
	err := probe(ctx)
	c := check{Name: name, Status: "ok", LatencyMS: float64(time.Since(start).Microseconds()) / 1000}
	if err != nil {
		c.Status, c.Error, h.Status = "unavailable", err.Error(), "unavailable"
	}
	h.Checks = append(h.Checks, c)
}
