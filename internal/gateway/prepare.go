package gateway

import (
	"context"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/redact"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/telemetry"
	"github.com/agentflow/agentflow/internal/tenant"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// startTimeout bounds starting a turn; the turn itself is not bound to the RPC.
const startTimeout = 30 * time.Second

// Prepare checks a turn request and gives it a job id if it has none.
func (s *Service) Prepare(ctx context.Context, in *pb.TurnRequest) (agent.TurnRequest, error) {
	req := toTurnRequest(in, CallerOf(ctx))
	req.Channel = s.channel
	req.Normalize()
	if err := clientIDs(ctx, "job_id", req.JobID, "session_id", req.SessionID, "notify", notifyID(req.Notify)); err != nil {
		return req, err
	}
	if req.JobID == "" {
		req.JobID = NewJobID()
	}
	if err := req.Validate(); err != nil {
		return req, err
	}
	if err := req.Context.Bounded(); err != nil {
		return req, err
	}
	if err := req.CheckNotify(""); err != nil {
		return req, err
	}
	// A schema that does not compile is refused here, before a turn
	// starts (its LoadAgent compiles it again for starts that bypass the
	// gateway).
	if _, err := structured.Compile(req.OutputSchema); err != nil {
		return req, err
	}
	if err := s.checkAgent(ctx, req); err != nil {
		if agent.ErrorCode(err).Class().Public {
			return req, err
		}
		// The database is away: the turn checks the agent again when it
		// loads it, and waits for the database to come back.
		telemetry.Logger(ctx, s.logger).Warn("agent check skipped", zap.String("tenant", req.TenantID), zap.Error(err))
	}
	if err := req.Texts(s.redactor(ctx, req.TenantID, redact.Scope(req.SessionID, req.JobID))); err != nil {
		return req, err
	}
	// A value redacted may be longer than the value: the bounds hold for
	// what the turn is given.
	if err := req.Validate(); err != nil {
		return req, err
	}
	return req, req.Context.Bounded()
}

// redactor returns the tenant's PII redaction (redact) of texts on their
// way in, for agent.TurnRequest.Texts and the like: every text a request
// carries goes through it before it is stored, or a workflow or the model
// hears of it.
func (s *Service) redactor(ctx context.Context, tenantID, scope string) func(texts ...*string) error {
	return func(texts ...*string) error { return s.redact(ctx, tenantID, scope, texts...) }
}

// redact applies the tenant's PII redaction to texts on their way in
// (tenant.Intake): what it finds never reaches a workflow's history,
// the model, the transcript or a log.
func (s *Service) redact(ctx context.Context, tenantID, scope string, texts ...*string) error {
	n, err := s.intake().Texts(ctx, tenantID, scope, texts...)
	s.redacted(ctx, tenantID, n)
	return err
}

func (s *Service) intake() tenant.Intake { return tenant.Intake{Tenants: s.tenants, Vault: s.vault} }

// redacted logs how many values a redaction replaced: the count only.
func (s *Service) redacted(ctx context.Context, tenantID string, n int) {
	if n > 0 {
		telemetry.Logger(ctx, s.logger).Info("pii redacted", zap.String("tenant", tenantID), zap.Int("values", n))
	}
}

// StartPrepared starts a prepared turn, or attaches to the run of its job
// when that run is the same request; a job id whose run is another
// request's is CodeConflict (turnclient.Start).
//
// A start the server did not answer in time is made again until
// startTimeout: it is keyed by the turn's workflow id and attaches to the
// run an earlier try started (the same request), so a repeat is harmless.
func (s *Service) StartPrepared(ctx context.Context, req agent.TurnRequest) (client.WorkflowRun, error) {
	select {
	case s.starting <- struct{}{}:
		defer func() { <-s.starting }()
	case <-ctx.Done():
		return nil, agent.Errorf(agent.CodeUnavailable, "the client left before turn %q could start", contract.TurnWorkflowID(req.TenantID, req.JobID))
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), startTimeout)
	defer cancel()
	wait := 100 * time.Millisecond
	for {
		run, err := turnclient.StartWith(sctx, s.client, s.payloads, s.taskQueue, req)
		if err == nil || !agent.IsCode(err, agent.CodeUnavailable) {
			return run, err
		}
		telemetry.Logger(ctx, s.logger).Warn("turn not started in time; starting it again", zap.String("tenant", req.TenantID), zap.String("job_id", req.JobID),
			zap.Duration("wait", wait), zap.Error(err))
		select {
		case <-sctx.Done():
			return nil, err
		case <-time.After(wait):
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// checkAgent refuses a turn whose agent does not exist, or does not let
// it choose the model it names, before anything is started; the turn
// checks again when it loads the agent.
func (s *Service) checkAgent(ctx context.Context, req agent.TurnRequest) error {
	if req.AgentID != "" {
		ag, err := s.store.ActiveAgent(ctx, req.TenantID, req.AgentID)
		if v := req.AgentVersion; v > 0 && err == nil && v != ag.Version {
			ag, err = s.store.AgentVersion(ctx, req.TenantID, req.AgentID, v)
		}
		if agent.IsCode(err, agent.CodeNotFound) {
			return agent.WithCode(agent.CodeAgentNotFound, err)
		}
		if err != nil {
			return err
		}
		// A model the agent does not allow, or a deliver target it lacks,
		// is refused here too (the turn checks the version it pins), so
		// that no turn is started for it.
		if err := ag.CheckModel(req.Model); err != nil {
			return err
		}
		return ag.CheckDeliver(req)
	}
	if s.tenants != nil {
		settings, err := s.tenants.Settings(ctx, req.TenantID)
		if err != nil {
			return err
		}
		if settings.DefaultAgent == "" && settings.Table.Len() == 0 {
			return agent.Errorf(agent.CodeNotFound, "tenant %q has neither routing rules nor a default agent: name an agent_id", req.TenantID)
		}
		return nil
	}
	r, err := s.store.TenantSettings(ctx, req.TenantID)
	if err != nil {
		return err
	}
	if r.DefaultAgent == "" && len(r.Rules) == 0 {
		return agent.Errorf(agent.CodeNotFound, "tenant %q has neither routing rules nor a default agent: name an agent_id", req.TenantID)
	}
	return nil
}
