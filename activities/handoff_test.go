package activities

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/internal/contract"
)

// TestAwaitModelRetryTakesOver: an AwaitModel attempt the server gave up
// on (its heartbeat answered "not found" on a loaded worker) leaves the
// handed-off call running, and the attempt after it takes the call's
// result — the model is not asked again; an attempt that is cancelled
// stops the call.
func TestAwaitModelRetryTakesOver(t *testing.T) {
	in := contract.CallModelInput{TenantID: "acme", JobID: "job-1", Seq: 3}
	for _, tc := range []struct {
		name      string
		cause     error
		abandoned bool
	}{
		{"heartbeat answered not found", serviceerror.NewNotFound("workflow execution already completed"), true},
		{"heartbeat never got through", serviceerror.NewUnavailable("frontend unreachable"), true},
		{"cancelled by the turn", errors.New("canceled"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &Activities{}
			stopped := false
			call := &handedCall{done: make(chan struct{})}
			call.cancel = func() { stopped = true; close(call.done) } // a stopped call ends
			a.handoffs.put(handOffKey(in), call)

			// The first attempt's context ends while the call runs.
			ended, end := context.WithCancelCause(context.Background())
			end(tc.cause)
			_, err := awaitIn(ended, a, in)
			require.Error(t, err)
			require.Equal(t, !tc.abandoned, stopped, "the call is stopped only when the turn cancelled the attempt")
			if !tc.abandoned {
				require.Nil(t, held(a, in), "a stopped call is forgotten")
				return
			}

			// The next attempt finds the call and takes its result.
			call.res = contract.CallModelResult{Content: "the answer", Attempt: 1}
			close(call.done)
			res, err := awaitIn(context.Background(), a, in)
			require.NoError(t, err)
			require.Equal(t, "the answer", res.Content)
			require.False(t, stopped)
			require.Nil(t, held(a, in), "a taken result is forgotten")
		})
	}
	t.Run("a retry that went elsewhere", func(t *testing.T) {
		a := &Activities{}
		a.handoffs.reclaim = 10 * time.Millisecond
		stopped := make(chan struct{})
		call := &handedCall{done: make(chan struct{})}
		call.cancel = func() { close(stopped); close(call.done) }
		a.handoffs.put(handOffKey(in), call)
		ended, end := context.WithCancelCause(context.Background())
		end(serviceerror.NewNotFound("timed out"))
		_, err := awaitIn(ended, a, in)
		require.Error(t, err)
		<-stopped // no attempt came for it: it is stopped
		require.Nil(t, held(a, in), "and forgotten")
	})
}

// held is the call a handed off under in's key; nil for none.
func held(a *Activities, in contract.CallModelInput) *handedCall {
	a.handoffs.mu.Lock()
	defer a.handoffs.mu.Unlock()
	return a.handoffs.calls[handOffKey(in)]
}

// awaitIn runs AwaitModel as an activity whose context derives from ctx.
func awaitIn(ctx context.Context, a *Activities, in contract.CallModelInput) (contract.CallModelResult, error) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.SetWorkerOptions(worker.Options{BackgroundActivityContext: ctx})
	env.RegisterActivity(a.AwaitModel)
	val, err := env.ExecuteActivity(a.AwaitModel, in)
	if err != nil {
		return contract.CallModelResult{}, err
	}
	var res contract.CallModelResult
	return res, val.Get(&res)
}
