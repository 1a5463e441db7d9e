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

// Register registers every activity under its contract name. Results
// are checked here, once, against the payload budget (checkResult), and
// errors classified: an activity returns domain errors, and
// contract.Failure makes each the Temporal failure of its code.
func (a *Activities) Register(r Registry) {
	r.RegisterActivityWithOptions(checked(a, contract.Route, a.Route), activity.RegisterOptions{Name: contract.Route})
	r.RegisterActivityWithOptions(checked(a, contract.LoadAgent, a.LoadAgent), activity.RegisterOptions{Name: contract.LoadAgent})
	r.RegisterActivityWithOptions(checked(a, contract.CallModel, a.CallModel), activity.RegisterOptions{Name: contract.CallModel})
	r.RegisterActivityWithOptions(checked(a, contract.ExecuteTool, a.ExecuteTool), activity.RegisterOptions{Name: contract.ExecuteTool})
	r.RegisterActivityWithOptions(checked(a, contract.RunProgram, a.RunProgram), activity.RegisterOptions{Name: contract.RunProgram})
	r.RegisterActivityWithOptions(checked(a, contract.SaveResult, a.SaveResult), activity.RegisterOptions{Name: contract.SaveResult})
	r.RegisterActivityWithOptions(checked(a, contract.SealStream, a.SealStream), activity.RegisterOptions{Name: contract.SealStream})
	r.RegisterActivityWithOptions(checked(a, contract.Summarize, a.Summarize), activity.RegisterOptions{Name: contract.Summarize})
	r.RegisterActivityWithOptions(checked(a, contract.Prepare, a.Prepare), activity.RegisterOptions{Name: contract.Prepare})
	r.RegisterActivityWithOptions(checked(a, contract.AgentOnBusy, a.AgentOnBusy), activity.RegisterOptions{Name: contract.AgentOnBusy})
	r.RegisterActivityWithOptions(checked(a, contract.ExtractMemories, a.ExtractMemories), activity.RegisterOptions{Name: contract.ExtractMemories})
	r.RegisterActivityWithOptions(checked(a, contract.ScoreEvalCase, a.ScoreEvalCase), activity.RegisterOptions{Name: contract.ScoreEvalCase})
	r.RegisterActivityWithOptions(func(ctx context.Context, in agent.EvalInput) error {
		return contract.Failure(a.BeginEval(ctx, in))
	}, activity.RegisterOptions{Name: contract.BeginEval})
	r.RegisterActivityWithOptions(func(ctx context.Context, in contract.PrepareEvalCaseInput) error {
		return contract.Failure(a.PrepareEvalCase(ctx, in))
	}, activity.RegisterOptions{Name: contract.PrepareEvalCase})
	r.RegisterActivityWithOptions(func(ctx context.Context, in contract.PrepareReplayInput) (contract.PrepareReplayResult, error) {
		out, err := a.PrepareReplay(ctx, in)
		return out, contract.Failure(err)
	}, activity.RegisterOptions{Name: contract.PrepareReplay})
	r.RegisterActivityWithOptions(func(ctx context.Context, in contract.FinishEvalInput) error {
		return contract.Failure(a.FinishEval(ctx, in))
	}, activity.RegisterOptions{Name: contract.FinishEval})
	r.RegisterActivityWithOptions(func(ctx context.Context, in contract.DeliverInput) error {
		return contract.Failure(a.Deliver(ctx, in))
	}, activity.RegisterOptions{Name: contract.Deliver})
	r.RegisterActivityWithOptions(func(ctx context.Context, in contract.SweepRetentionInput) (contract.RetentionResult, error) {
		out, err := a.SweepRetention(ctx, in)
		return out, contract.Failure(err)
	}, activity.RegisterOptions{Name: contract.SweepRetention})
	r.RegisterActivityWithOptions(checked(a, contract.IngestPage, a.IngestPage), activity.RegisterOptions{Name: contract.IngestPage})
	r.RegisterActivityWithOptions(func(ctx context.Context, in contract.InterruptModelInput) error {
		return contract.Failure(a.InterruptModel(ctx, in))
	}, activity.RegisterOptions{Name: contract.InterruptModel})
	r.RegisterActivityWithOptions(func(ctx context.Context, rec agent.ApprovalRecord) error {
		return contract.Failure(a.RecordApproval(ctx, rec))
	}, activity.RegisterOptions{Name: contract.RecordApproval})
}
