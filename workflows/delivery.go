package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/contract"
)

// deliveryRetry is how long a receiver may be away: attempts back off
// from 1s to 10 minutes, 12 in all (about an hour).
var deliveryRetry = &temporal.RetryPolicy{
	InitialInterval:    time.Second,
	BackoffCoefficient: 2,
	MaximumInterval:    10 * time.Minute,
	MaximumAttempts:    12,
}

// delivering has the turn's SaveResult start the Delivery of its result
// to the agent's deliver targets (agent.Agent.Deliver). It holds no
// state.
type delivering struct {
	t *turn // the core: its agent
}

func (d *delivering) start(_ workflow.Context, t *turn, _ *contract.TurnCarry) error {
	d.t = t
	return nil
}

func (d *delivering) carry(*contract.TurnCarry) error { return nil }

func (d *delivering) beforeSave(in *contract.SaveResultInput) {
	in.Deliver = d.t.agent.Deliver
}

// Delivery pushes an ended turn's result to each of its deliver targets,
// one Deliver activity a target, all at once; each retries on its own
// (deliveryRetry), with the delivery's id as its idempotency key. It is
// a workflow of its own, started by the turn's SaveResult, rather than a
// step of the turn, so that a receiver that is slow or down for an hour
// neither holds the turn open nor changes what a turn records; its id,
// deliver/<turn workflow id>, makes a retried start harmless and puts
// its attempts in the Web UI beside the turn. It fails when a target
// was not reached.
func Delivery(ctx workflow.Context, in contract.DeliveryInput) error {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy:         deliveryRetry,
		Summary:             "deliver " + in.StreamID,
	})
	futures := make([]workflow.Future, len(in.Deliveries))
	for i, d := range in.Deliveries {
		futures[i] = workflow.ExecuteActivity(ctx, contract.Deliver, contract.DeliverInput{
			TenantID: in.TenantID, JobID: in.JobID, StreamID: in.StreamID, SessionID: in.SessionID, Delivery: d,
		})
	}
	var errs []error
	for i, f := range futures {
		if err := f.Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("delivery failed", "delivery_id", in.Deliveries[i].ID, "error", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
