package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

// workflowRun is one run of the turn's workflow: its history's events and
// bytes, and its status (WORKFLOW_EXECUTION_STATUS_…).
type workflowRun struct {
	id, status    string
	events, bytes int64
}

// runs reads every run of a workflow, first to last: it starts from the
// latest and follows each run's first event back to the run it continued
// (continued_execution_run_id).
func runs(ctx context.Context, address, namespace, workflowID string) ([]workflowRun, error) {
	c, err := client.Dial(client.Options{HostPort: address, Namespace: namespace,
		Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", address, err)
	}
	defer c.Close()
	var out []workflowRun
	for id := ""; ; {
		desc, err := c.DescribeWorkflowExecution(ctx, workflowID, id)
		if err != nil {
			return nil, fmt.Errorf("describe %s run %q: %w", workflowID, id, err)
		}
		info := desc.GetWorkflowExecutionInfo()
		r := workflowRun{id: info.GetExecution().GetRunId(), status: info.GetStatus().String(),
			events: info.GetHistoryLength(), bytes: info.GetHistorySizeBytes()}
		out = append(out, r)
		first, err := c.WorkflowService().GetWorkflowExecutionHistory(ctx, &workflowservice.GetWorkflowExecutionHistoryRequest{
			Namespace: namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: r.id}, MaximumPageSize: 1,
		})
		if err != nil {
			return nil, fmt.Errorf("read the first event of %s run %s: %w", workflowID, r.id, err)
		}
		events := first.GetHistory().GetEvents()
		if len(events) == 0 {
			break
		}
		if id = events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId(); id == "" {
			break
		}
	}
	slices.Reverse(out)
	return out, nil
}
