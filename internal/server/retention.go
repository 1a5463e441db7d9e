package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// The operator's retention settings (docs/operations/storage.md).
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
	return durationFromEnv(EnvRetentionInterval, &c.RetentionInterval, time.Minute, 24*time.Hour, "1h, 1m to 24h")
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
	put := func() error {
		_, err := schedules.Create(ctx, client.ScheduleOptions{ID: id, Spec: spec, Action: action, Overlap: policy.Overlap})
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return err
		}
		return schedules.GetHandle(ctx, id).Update(ctx, client.ScheduleUpdateOptions{
			DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
				sched := in.Description.Schedule
				if sameRetentionSchedule(sched, spec, action, policy) {
					// Another worker of the same settings put it: an
					// update would only queue behind the scheduler's work.
					return nil, temporal.ErrSkipScheduleUpdate
				}
				sched.Spec, sched.Action, sched.Policy = &spec, action, policy
				return &client.ScheduleUpdate{Schedule: &sched}, nil
			},
		})
	}
	// A server slow to answer (many workers starting at once) is asked
	// again for a while rather than failing the worker's start.
	var err error
	for wait := time.Second; ; wait *= 2 {
		if err = put(); err == nil || wait > 16*time.Second || !retryableSchedule(err) {
			break
		}
		s.logger.Warn("retention schedule not written yet; trying again", zap.Duration("in", wait), zap.Error(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("retention schedule: %w", ctx.Err())
		case <-time.After(wait):
		}
	}
	if err != nil {
		return fmt.Errorf("retention schedule: %w", err)
	}
	s.logger.Info("retention scheduled", zap.String("schedule_id", id), zap.Duration("every", spec.Intervals[0].Every),
		zap.Duration("blobs", s.cfg.Retention.Blobs), zap.Duration("results", s.cfg.Retention.Results),
		zap.Duration("transcripts", s.cfg.Retention.Transcripts))
	return nil
}

// sameRetentionSchedule reports whether a schedule already holds the
// spec, action and policy a worker would write.
func sameRetentionSchedule(sched client.Schedule, spec client.ScheduleSpec, action *client.ScheduleWorkflowAction, policy *client.SchedulePolicies) bool {
	got, ok := sched.Action.(*client.ScheduleWorkflowAction)
	if !ok || sched.Spec == nil || sched.Policy == nil || len(sched.Spec.Intervals) != 1 {
		return false
	}
	name, _ := got.Workflow.(string)
	return sched.Spec.Intervals[0].Every == spec.Intervals[0].Every && sched.Policy.Overlap == policy.Overlap &&
		name == action.Workflow && got.TaskQueue == action.TaskQueue && got.WorkflowRunTimeout == action.WorkflowRunTimeout
}

// retryableSchedule reports whether a schedule call failed for want of
// an answer in time, rather than for what it asked.
func retryableSchedule(err error) bool {
	var unavailable *serviceerror.Unavailable
	var deadline *serviceerror.DeadlineExceeded
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &unavailable) || errors.As(err, &deadline)
}
