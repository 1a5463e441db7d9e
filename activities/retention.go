package activities

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/store"
)

// sweepProgress is a SweepRetention's heartbeat: what it has deleted so
// far, and which tenants' kinds it has finished, so that the next attempt
// (after a worker was killed, say) goes on where it was. An attempt that
// died mid-batch lost nothing: each batch commits with its audit row, and
// what a batch did not commit is still expired for the next.
type sweepProgress struct {
	Result   contract.RetentionResult `json:"result"`
	Finished []string                 `json:"finished,omitempty"` // tenant + "/" + kind
}

// SweepRetention deletes, batch by batch, what each tenant's TTLs have
// expired (store.RetentionPlan, store.Sweep), heartbeating after every
// batch.
func (a *Activities) SweepRetention(ctx context.Context, in contract.SweepRetentionInput) (contract.RetentionResult, error) {
	var p sweepProgress
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &p) // unreadable: start over, which is harmless
	}
	finished := map[string]bool{}
	for _, f := range p.Finished {
		finished[f] = true
	}
	plan, err := a.store.RetentionPlan(ctx)
	if err != nil {
		return contract.RetentionResult{}, err
	}
	for _, t := range plan {
		for _, kind := range store.RetentionKinds {
			ttl := ttlOf(t, kind)
			key := t.TenantID + "/" + string(kind)
			if ttl == 0 || finished[key] {
				continue
			}
			if err := a.sweepKind(ctx, in, t.TenantID, kind, in.Now.Add(-ttl), &p); err != nil {
				return contract.RetentionResult{}, err
			}
			p.Finished = append(p.Finished, key)
			activity.RecordHeartbeat(ctx, p)
		}
	}
	a.log(ctx).Info("retention sweep done", zap.String("run_id", in.RunID), zap.Int("tenants", len(plan)), zap.Int("kinds_swept", len(p.Result.Swept)))
	return p.Result, nil
}

// sweepKind sweeps a tenant's kind batch by batch, adding what each
// deleted to p.
func (a *Activities) sweepKind(ctx context.Context, in contract.SweepRetentionInput, tenantID string, kind store.RetentionKind, before time.Time, p *sweepProgress) error {
	i := -1
	for j, s := range p.Result.Swept {
		if s.TenantID == tenantID && s.Kind == string(kind) {
			i = j
		}
	}
	for {
		got, err := a.store.Sweep(ctx, store.Sweep{RunID: in.RunID, TenantID: tenantID, Kind: kind, Before: before})
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		if got.Deleted > 0 {
			if i < 0 {
				p.Result.Swept = append(p.Result.Swept, contract.RetentionSwept{TenantID: tenantID, Kind: string(kind)})
				i = len(p.Result.Swept) - 1
			}
			s := &p.Result.Swept[i]
			s.Deleted += got.Deleted
			s.Freed += got.Freed
			s.Objects += got.Objects
		}
		activity.RecordHeartbeat(ctx, *p)
		if !got.More {
			return nil
		}
	}
}

func ttlOf(t store.TenantRetention, kind store.RetentionKind) time.Duration {
	switch kind {
	case store.RetainBlobs:
		return t.Retention.Blobs
	case store.RetainResults:
		return t.Retention.Results
	default:
		return t.Retention.Transcripts
	}
}
