package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Database waits: from dbWaitFirst, doubling up to dbWaitMax.
const (
	dbWaitFirst = time.Second
	dbWaitMax   = 30 * time.Second
)

// dbStep runs one of the turn's database steps (Route, LoadAgent,
// SaveResult, RecordApproval) as a local activity. A failure a retry may
// fix — the database is away — does not fail the turn: the step waits,
// says so in the turn's current details, and runs again, until until
// (zero: for as long as it takes). A failure that names its cause (an
// unknown agent, a rate limit) returns at once.
func dbStep(ctx workflow.Context, name string, until time.Time, in, out any) error {
	opts := localOptions()
	opts.Summary = name // the step's name is what the timeline shows
	lctx := workflow.WithLocalActivityOptions(ctx, opts)
	err := workflow.ExecuteLocalActivity(lctx, name, in).Get(ctx, out)
	return outlast(lctx, name, until, in, out, err, func(err error) bool { return !permanent(err) })
}

// outlast runs a local activity that failed with err again, after a
// wait, while retry says its failure is one a later try may not have,
// and until allows. Runs before change did not.
func outlast(lctx workflow.Context, name string, until time.Time, in, out any, err error, retry func(error) bool) error {
	wait := dbWaitFirst
	for err != nil && retry(err) && lctx.Err() == nil {
		if !until.IsZero() && !workflow.Now(lctx).Add(wait).Before(until) {
			// The details are in the log, not in the result.
			workflow.GetLogger(lctx).Error("database step failed until the turn's deadline", "step", name, "error", contract.ErrorOf(err).Message)
			return agent.Errorf(agent.CodeUnavailable, "the database did not answer %s within the turn's timeout", name)
		}
		msg := contract.ErrorOf(err).Message
		workflow.GetLogger(lctx).Warn("database step failed; waiting to run it again", "step", name, "wait", wait, "error", msg)
		workflow.SetCurrentDetails(lctx, fmt.Sprintf("waiting for the database (%s, again in %s): %s", name, wait, contract.OneLine(msg, 200)))
		timer := workflow.NewTimerWithOptions(lctx, wait, workflow.TimerOptions{Summary: "waiting for the database"})
		if err := timer.Get(lctx, nil); err != nil {
			return err
		}
		err = workflow.ExecuteLocalActivity(lctx, name, in).Get(lctx, out)
		wait = min(wait*2, dbWaitMax)
	}
	return err
}

// unavailable reports a failure that says the database was away.
func unavailable(err error) bool { return contract.ErrorOf(err).Code == agent.CodeUnavailable }

// permanent reports a failure no retry can fix: a non-retryable
// application error, or a cancellation.
func permanent(err error) bool {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.NonRetryable()
	}
	var canceled *temporal.CanceledError
	return errors.As(err, &canceled)
}
