package server

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
)

// resets records the ResetStickyTaskQueue calls a client makes, by
// workflow id.
type resets struct {
	mu  sync.Mutex
	ids []string
}

func (r *resets) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if in, ok := req.(*workflowservice.ResetStickyTaskQueueRequest); ok {
		r.mu.Lock()
		r.ids = append(r.ids, in.GetExecution().GetWorkflowId())
		r.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *resets) of() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ids...)
}

// TestStickyResetOnRetry: an activity's retried attempt resets its
// workflow's sticky queue before it runs, on the real server (which
// accepts the call); a first attempt and a local activity's retries do
// not.
func TestStickyResetOnRetry(t *testing.T) {
	address, namespace := devtest.Temporal(t)
	r := &resets{}
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace, Logger: SDKLogger(zap.NewNop()),
		ConnectionOptions: client.ConnectionOptions{DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(r.intercept)}}})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	queue := "sticky-" + rand.Text()
	w := worker.New(c, queue, worker.Options{
		Interceptors: []interceptor.WorkerInterceptor{&stickyReset{temporal: c, logger: zap.NewNop()}},
	})
	// Fails its first attempt; the second reports whether it ran after
	// the reset (the interceptor resets before the activity runs).
	flaky := func(ctx context.Context, name string) (int, error) {
		if n := activity.GetInfo(ctx).Attempt; n == 1 {
			return 0, errors.New("first attempt fails")
		}
		return len(r.of()), nil
	}
	w.RegisterActivityWithOptions(flaky, activity.RegisterOptions{Name: "Flaky"})
	w.RegisterWorkflowWithOptions(func(ctx workflow.Context, local bool) (int, error) {
		retry := &temporal.RetryPolicy{InitialInterval: 10 * time.Millisecond, MaximumAttempts: 2}
		var n int
		if local {
			ctx = workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
			err := workflow.ExecuteLocalActivity(ctx, "Flaky", "x").Get(ctx, &n)
			return n, err
		}
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
		err := workflow.ExecuteActivity(ctx, "Flaky", "x").Get(ctx, &n)
		return n, err
	}, workflow.RegisterOptions{Name: "StickyTest"})
	require.NoError(t, w.Start())
	t.Cleanup(w.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(id string, local bool) int {
		we, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: queue}, "StickyTest", local)
		require.NoError(t, err)
		var n int
		require.NoError(t, we.Get(ctx, &n))
		return n
	}
	local := "sticky-local-" + rand.Text()
	require.Zero(t, run(local, true), "a local activity's retry runs inside its workflow task: no reset")
	regular := "sticky-activity-" + rand.Text()
	require.Equal(t, 1, run(regular, false), "the retried attempt ran after the reset")
	require.Equal(t, []string{regular}, r.of(), "one reset, of the activity's workflow, for its one retry")
}
