package chaos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/topology"
)

// activityWorker finds the worker process running the workflow's pending
// activity, by the pid in its Temporal identity ("pid@host@"); with none
// pending, the one whose workflow task is running: a local model call
// (the default) runs inside it.
func (e *env) activityWorker(ctx context.Context, workflowID string) (*topology.Process, error) {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	for range 150 {
		d, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
			Namespace: e.top.Stack.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
		})
		if err != nil {
			return nil, err
		}
		for _, a := range d.GetPendingActivities() {
			if p := e.workerOf(a.GetLastWorkerIdentity()); p != nil {
				return p, nil
			}
		}
		if d.GetPendingWorkflowTask().GetState() == enumspb.PENDING_WORKFLOW_TASK_STATE_STARTED {
			if p, _ := e.lastTaskWorker(ctx, c, workflowID); p != nil {
				return p, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.New("no worker process runs the turn's activity")
}

// lastTaskWorker is the identity of the worker that started the
// workflow's last workflow task; "" when none did. It reads the history
// newest first: a turn of local calls ends soon after its answer's first
// token, so a strike must not spend its time reading the whole history.
func lastTaskWorker(ctx context.Context, c client.Client, namespace, workflowID string) (string, error) {
	var token []byte
	for {
		resp, err := c.WorkflowService().GetWorkflowExecutionHistoryReverse(ctx, &workflowservice.GetWorkflowExecutionHistoryReverseRequest{
			Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID}, NextPageToken: token,
		})
		if err != nil {
			return "", err
		}
		for _, ev := range resp.GetHistory().GetEvents() {
			if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
				return a.GetIdentity(), nil
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return "", nil
		}
	}
}

// killTurnWorker SIGKILLs the worker running the turn — the one running
// its pending activity (a model call), or else the one that ran its latest
// workflow task (where its local tool calls run) — and starts it again
// half a second later.
func (e *env) killTurnWorker(ctx context.Context, workflowID string) (string, error) {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return "", err
	}
	defer c.Close()
	// A run that has just continued as new has neither a started workflow
	// task nor a started activity for a moment: look again.
	p, what, err := e.turnWorker(ctx, c, workflowID)
	for try := 0; errors.Is(err, errNoTurnWorker) && ctx.Err() == nil && try < 50; try++ {
		time.Sleep(100 * time.Millisecond)
		p, what, err = e.turnWorker(ctx, c, workflowID)
	}
	if err != nil {
		return "", err
	}
	if err := p.Kill(); err != nil {
		return "", err
	}
	did := fmt.Sprintf("%s, running the turn's %s", p.Name, what)
	time.Sleep(500 * time.Millisecond)
	return did, p.Start(ctx)
}

// turnWorker is the worker process running the turn and what of it runs
// there: its pending activity's, else its latest workflow task's worker
// ("workflow"); errNoTurnWorker when neither is a running worker.
func (e *env) turnWorker(ctx context.Context, c client.Client, workflowID string) (*topology.Process, string, error) {
	req := &workflowservice.DescribeWorkflowExecutionRequest{
		Namespace: e.top.Stack.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID},
	}
	d, err := c.WorkflowService().DescribeWorkflowExecution(ctx, req)
	for try := 0; err != nil && ctx.Err() == nil && try < 50; try++ {
		// A server that has just restarted may not answer at once.
		time.Sleep(200 * time.Millisecond)
		d, err = c.WorkflowService().DescribeWorkflowExecution(ctx, req)
	}
	if err != nil {
		return nil, "", err
	}
	for _, a := range d.GetPendingActivities() {
		if p := e.workerOf(a.GetLastWorkerIdentity()); p != nil {
			return p, a.GetActivityType().GetName(), nil
		}
	}
	identity := ""
	it := c.GetWorkflowHistory(ctx, workflowID, d.GetWorkflowExecutionInfo().GetExecution().GetRunId(), false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return nil, "", err
		}
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			identity = a.GetIdentity()
		}
	}
	if p := e.workerOf(identity); p != nil {
		return p, "workflow", nil
	}
	return nil, "", errNoTurnWorker
}

var errNoTurnWorker = errors.New("no worker process runs the turn")

// workerOf is the running worker process of a Temporal identity
// ("pid@host@…"), or nil.
func (e *env) workerOf(identity string) *topology.Process {
	pid, _, _ := strings.Cut(identity, "@")
	n, _ := strconv.Atoi(pid)
	for _, p := range e.top.Workers {
		if n != 0 && p.PID() == n {
			return p
		}
	}
	return nil
}
