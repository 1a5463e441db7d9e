package signals_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/signals"
)

// drainAfter waits a minute, then takes what the channel holds.
func drainAfter(ctx workflow.Context) ([]int, error) {
	ch := workflow.GetSignalChannel(ctx, "n")
	if err := workflow.Sleep(ctx, time.Minute); err != nil {
		return nil, err
	}
	var got []int
	signals.Drain(ch, func(n int) { got = append(got, n) })
	return got, nil
}

// takeUntil takes each value as it comes until a minute has passed.
func takeUntil(ctx workflow.Context) ([]int, error) {
	var got []int
	done := false
	sel := workflow.NewSelector(ctx)
	sel.AddFuture(workflow.NewTimer(ctx, time.Minute), func(workflow.Future) { done = true })
	signals.On(sel, workflow.GetSignalChannel(ctx, "n"), func(n int) { got = append(got, n) })
	for !done {
		sel.Select(ctx)
	}
	return got, nil
}

// serveUntil serves the channel until a minute has passed; take refuses
// negative numbers.
func serveUntil(ctx workflow.Context) ([]int, error) {
	var got []int
	signals.Serve(ctx, workflow.GetSignalChannel(ctx, "n"), "n", func(_ workflow.Context, n int) error {
		if n < 0 {
			return errors.New("negative")
		}
		got = append(got, n)
		return nil
	})
	if err := workflow.Sleep(ctx, time.Minute); err != nil {
		return nil, err
	}
	return got, nil
}

func TestReceive(t *testing.T) {
	for _, tc := range []struct {
		name string
		wf   func(workflow.Context) ([]int, error)
		want []int
	}{
		{"drain", drainAfter, []int{1, 2, -4, 3}},
		{"on", takeUntil, []int{1, 2, -4, 3}},
		{"serve", serveUntil, []int{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.RegisterWorkflow(tc.wf)
			// A payload that does not decode sits between good ones: it is
			// skipped, and no way of receiving stops at it. Serve's take
			// refuses the negative one; Drain's and On's take everything.
			for i, v := range []any{1, "not a number", 2, -4, 3} {
				env.RegisterDelayedCallback(func() { env.SignalWorkflow("n", v) }, time.Duration(i+1)*time.Second)
			}
			env.ExecuteWorkflow(tc.wf)
			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError())
			var got []int
			require.NoError(t, env.GetWorkflowResult(&got))
			require.Equal(t, tc.want, got)
		})
	}
}
