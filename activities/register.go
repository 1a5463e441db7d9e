package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Registry is where activities are registered: a worker, or a test
// environment.
type Registry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers every activity under its contract name. Errors are
// classified here, once: an activity returns domain errors, and
// contract.Failure makes each the Temporal failure of its code.
func (a *Activities) Register(r Registry) {
	r.RegisterActivityWithOptions(classified(a.Route), activity.RegisterOptions{Name: contract.Route})
	r.RegisterActivityWithOptions(classified(a.LoadAgent), activity.RegisterOptions{Name: contract.LoadAgent})
	r.RegisterActivityWithOptions(classified(a.CallModel), activity.RegisterOptions{Name: contract.CallModel})
	r.RegisterActivityWithOptions(classified(a.ExecuteTool), activity.RegisterOptions{Name: contract.ExecuteTool})
	r.RegisterActivityWithOptions(classified(a.SaveResult), activity.RegisterOptions{Name: contract.SaveResult})
	r.RegisterActivityWithOptions(func(ctx context.Context, rec agent.ApprovalRecord) error {
		return contract.Failure(a.RecordApproval(ctx, rec))
	}, activity.RegisterOptions{Name: contract.RecordApproval})
}

func classified[In, Out any](f func(context.Context, In) (Out, error)) func(context.Context, In) (Out, error) {
	return func(ctx context.Context, in In) (Out, error) {
		out, err := f(ctx, in)
		return out, contract.Failure(err)
	}
}
