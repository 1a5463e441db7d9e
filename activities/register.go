package activities

import (
	"context"

	"go.temporal.io/sdk/activity"

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
	registerChecked(r, a, contract.Route, a.Route)
	registerChecked(r, a, contract.LoadAgent, a.LoadAgent)
	registerChecked(r, a, contract.CallModel, a.CallModel)
	registerChecked(r, a, contract.AwaitModel, a.AwaitModel)
	registerChecked(r, a, contract.ExecuteTool, a.ExecuteTool)
	registerChecked(r, a, contract.RunProgram, a.RunProgram)
	registerChecked(r, a, contract.SaveResult, a.SaveResult)
	registerChecked(r, a, contract.SealStream, a.SealStream)
	registerChecked(r, a, contract.Summarize, a.Summarize)
	registerChecked(r, a, contract.Prepare, a.Prepare)
	registerChecked(r, a, contract.AgentOnBusy, a.AgentOnBusy)
	registerChecked(r, a, contract.ExtractMemories, a.ExtractMemories)
	registerChecked(r, a, contract.ScoreEvalCase, a.ScoreEvalCase)
	registerChecked(r, a, contract.IngestPage, a.IngestPage)
	registerNoResult(r, contract.BeginEval, a.BeginEval)
	registerNoResult(r, contract.PrepareEvalCase, a.PrepareEvalCase)
	registerNoResult(r, contract.FinishEval, a.FinishEval)
	registerNoResult(r, contract.Deliver, a.Deliver)
	registerNoResult(r, contract.InterruptModel, a.InterruptModel)
	registerNoResult(r, contract.RecordApproval, a.RecordApproval)
	registerNoResult(r, contract.ObserveEvents, a.ObserveEvents)
	registerNoResult(r, contract.AdmitTool, a.AdmitTool)
	registerNoResult(r, contract.WatchForeign, a.WatchForeign)
	// Classified, not weighed: a recorded prompt, within a turn request's
	// bounds, and a sweep's counts.
	registerUnchecked(r, contract.PrepareReplay, a.PrepareReplay)
	registerUnchecked(r, contract.SweepRetention, a.SweepRetention)
}

// registerChecked registers fn under name with its result weighed
// against the payload budget (checked) and its error classified.
func registerChecked[In, Out any](r Registry, a *Activities, name string, fn func(context.Context, In) (Out, error)) {
	r.RegisterActivityWithOptions(checked(a, name, fn), activity.RegisterOptions{Name: name})
}

// registerUnchecked registers fn under name with its error classified.
func registerUnchecked[In, Out any](r Registry, name string, fn func(context.Context, In) (Out, error)) {
	r.RegisterActivityWithOptions(func(ctx context.Context, in In) (Out, error) {
		out, err := fn(ctx, in)
		return out, contract.Failure(err)
	}, activity.RegisterOptions{Name: name})
}

// registerNoResult registers fn, which returns only an error, under name
// with its error classified.
func registerNoResult[In any](r Registry, name string, fn func(context.Context, In) error) {
	r.RegisterActivityWithOptions(func(ctx context.Context, in In) error {
		return contract.Failure(fn(ctx, in))
	}, activity.RegisterOptions{Name: name})
}
