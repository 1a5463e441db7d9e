package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/contract"
)

// Retention sweeps what every tenant's TTLs have expired, once: one
// SweepRetention activity that pages through tenants, kinds and batches,
// recording its place in heartbeats, so that a worker killed midway
// hands the rest to the next attempt. Each batch is its own transaction
// with its audit row, so an attempt that dies loses no record and a
// retry deletes only what is left. The cutoffs are this run's start less
// each TTL, the same for every attempt. A schedule starts it
// (contract.RetentionScheduleID), one run at a time.
func Retention(ctx workflow.Context, _ contract.RetentionInput) (contract.RetentionResult, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 6 * time.Hour,
		HeartbeatTimeout:    time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
		Summary:             "sweep expired blobs, results and transcripts",
	})
	in := contract.SweepRetentionInput{RunID: workflow.GetInfo(ctx).WorkflowExecution.ID, Now: workflow.Now(ctx)}
	var out contract.RetentionResult
	err := workflow.ExecuteActivity(ctx, contract.SweepRetention, in).Get(ctx, &out)
	return out, err
}
