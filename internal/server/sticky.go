package server

import (
	"context"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	"go.uber.org/zap"
)

// stickyReset is a worker interceptor: an activity's retried attempt
// first resets its workflow's sticky task queue (ResetStickyTaskQueue).
//
// Why: an attempt is retried most often because the one before it was
// lost with its worker (its heartbeat timed out), and that worker was
// usually the workflow's sticky one too. Until the server learns it is
// gone, everything sent to the workflow waits on the dead worker's sticky
// queue for its schedule-to-start timeout (5 s) before it goes to the
// normal one: the retried model call's read of its turn's log head (a
// query), and the workflow task that takes the call's result. Reset, they
// go to the normal queue at once. On a live sticky worker the reset costs
// the workflow's next task a replay from history, once per retry.
type stickyReset struct {
	interceptor.WorkerInterceptorBase
	temporal client.Client
	logger   *zap.Logger
}

// stickyResetTimeout bounds the reset: a server that does not answer in
// time costs the attempt no more than this, and the sticky queue's own
// timeout applies as before.
const stickyResetTimeout = 2 * time.Second

func (s *stickyReset) InterceptActivity(ctx context.Context, next interceptor.ActivityInboundInterceptor) interceptor.ActivityInboundInterceptor {
	return &stickyResetActivity{ActivityInboundInterceptorBase: interceptor.ActivityInboundInterceptorBase{Next: next}, root: s}
}

type stickyResetActivity struct {
	interceptor.ActivityInboundInterceptorBase
	root *stickyReset
}

func (a *stickyResetActivity) ExecuteActivity(ctx context.Context, in *interceptor.ExecuteActivityInput) (any, error) {
	if info := activity.GetInfo(ctx); info.Attempt > 1 && !info.IsLocalActivity && info.WorkflowExecution.ID != "" {
		a.root.reset(ctx, info)
	}
	return a.Next.ExecuteActivity(ctx, in)
}

// reset resets the sticky queue of the workflow that scheduled the
// activity. A failure is logged and otherwise ignored: it costs time only.
func (s *stickyReset) reset(ctx context.Context, info activity.Info) {
	ctx, cancel := context.WithTimeout(ctx, stickyResetTimeout)
	defer cancel()
	_, err := s.temporal.WorkflowService().ResetStickyTaskQueue(ctx, &workflowservice.ResetStickyTaskQueueRequest{
		Namespace: info.WorkflowNamespace,
		Execution: &commonpb.WorkflowExecution{WorkflowId: info.WorkflowExecution.ID, RunId: info.WorkflowExecution.RunID},
	})
	if err != nil {
		s.logger.Debug("reset sticky task queue", zap.String("workflow_id", info.WorkflowExecution.ID),
			zap.String("activity", info.ActivityType.Name), zap.Int32("attempt", info.Attempt), zap.Error(err))
	}
}
