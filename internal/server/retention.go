package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// The operator's retention settings (README "Retention").
const (
	EnvRetentionBlobs       = "AGENTFLOW_RETENTION_BLOBS"
	EnvRetentionResults     = "AGENTFLOW_RETENTION_RESULTS"
	EnvRetentionTranscripts = "AGENTFLOW_RETENTION_TRANSCRIPTS"
	EnvRetentionInterval    = "AGENTFLOW_RETENTION_INTERVAL"
)

// DefaultRetentionInterval is how often the retention schedule sweeps.
const DefaultRetentionInterval = time.Hour

// retentionFromEnv reads the operator's TTLs (agent.ParseTTL: 30d, 36h;
// unset keeps forever) and the sweep's interval (1m to 24h).
func retentionFromEnv(c *Config) error {
	for _, p := range []struct {
		env string
		dst *time.Duration
	}{
		{EnvRetentionBlobs, &c.Retention.Blobs},
		{EnvRetentionResults, &c.Retention.Results},
		{EnvRetentionTranscripts, &c.Retention.Transcripts},
	} {
		d, err := agent.ParseTTL(os.Getenv(p.env))
		if err != nil {
			return fmt.Errorf("%s: %w", p.env, err)
		}
		*p.dst = d
	}
	if v := os.Getenv(EnvRetentionInterval); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Minute || d > 24*time.Hour {
			return fmt.Errorf("%s=%q: want a duration such as 1h, 1m to 24h", EnvRetentionInterval, v)
		}
		c.RetentionInterval = d
	}
	return nil
}

// scheduleRetention creates the schedule that starts the Retention
// sweep, or brings it to this worker's settings: every worker does this
// at start, so the last to start sets them, and a second start changes
// nothing. A run still going when the next is due makes that one skip.
// The schedule runs whether or not any TTL is set: a tenant's catalog may
// set its own, and a sweep with nothing to do is a query per tenant.
func (s *Server) scheduleRetention(ctx context.Context) error {
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: cmp.Or(s.cfg.RetentionInterval, DefaultRetentionInterval)}}}
	id := contract.RetentionScheduleID(s.cfg.TaskQueue)
	action := &client.ScheduleWorkflowAction{
		ID: id, Workflow: contract.Retention, Args: []any{contract.RetentionInput{}},
		TaskQueue: s.cfg.TaskQueue, WorkflowRunTimeout: 24 * time.Hour,
	}
	policy := &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP}
	schedules := s.client.ScheduleClient()
	_, err := schedules.Create(ctx, client.ScheduleOptions{ID: id, Spec: spec, Action: action, Overlap: policy.Overlap})
	if errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
		err = schedules.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				sched := in.Description.Schedule
				sched.Spec, sched.Action, sched.Policy = &spec, action, policy
				return &client.ScheduleUpdate{Schedule: &sched}, nil
			},
		})
	}
	if err != nil {
		return fmt.Errorf("retention schedule: %w", err)
	}
	s.logger.Info("retention scheduled", zap.String("schedule_id", id), zap.Duration("every", spec.Intervals[0].Every),
		zap.Duration("blobs", s.cfg.Retention.Blobs), zap.Duration("results", s.cfg.Retention.Results),
		zap.Duration("transcripts", s.cfg.Retention.Transcripts))
	return nil
}
