package testserver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/workflows"
)

// History is the events of one run of a workflow (runID "" for its
// latest run), read with c, which need not be a test server's. It fails
// the test when the history cannot be read.
func History(ctx context.Context, t testing.TB, c client.Client, workflowID, runID string) []*historypb.HistoryEvent {
	t.Helper()
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatalf("testserver: history of %s: %v", workflowID, err)
		}
		events = append(events, ev)
	}
	return events
}

// Runs is the events of every run of a workflow, oldest first: from its
// first run along its continue-as-new, so a run is found as soon as its
// predecessor names it (no wait for visibility). It fails the test when a
// history cannot be read.
func Runs(ctx context.Context, t testing.TB, c client.Client, workflowID string) [][]*historypb.HistoryEvent {
	t.Helper()
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	if err != nil {
		t.Fatalf("testserver: describe %s: %v", workflowID, err)
	}
	var runs [][]*historypb.HistoryEvent
	for runID := desc.GetWorkflowExecutionInfo().GetFirstRunId(); runID != ""; {
		events := History(ctx, t, c, workflowID, runID)
		runs = append(runs, events)
		runID = ""
		if n := len(events); n > 0 {
			runID = events[n-1].GetWorkflowExecutionContinuedAsNewEventAttributes().GetNewExecutionRunId()
		}
	}
	return runs
}

// ReplayOptions replay a run's history as the run it was: with its
// workflow id and run id (from its first event), which a run that
// continued another reads, rather than the replayer's stand-ins.
func ReplayOptions(events []*historypb.HistoryEvent) worker.ReplayWorkflowHistoryOptions {
	var started *historypb.WorkflowExecutionStartedEventAttributes
	if len(events) > 0 {
		started = events[0].GetWorkflowExecutionStartedEventAttributes()
	}
	return worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
	}
}

// Replay checks that the current workflow code replays a run's events as
// they will be kept in a file, and with AGENTFLOW_RECORD_HISTORIES=1
// saves them as dir/name.json (dir: the caller's path to
// workflows/testdata), which the workflows package's replay test reads.
func Replay(t testing.TB, events []*historypb.HistoryEvent, dir, name string) {
	t.Helper()
	data, err := protojson.MarshalOptions{Indent: "  "}.Marshal(&historypb.History{Events: events})
	require.NoError(t, err)
	// Replay what the file will hold, exactly as workflows' replay test does.
	var hist historypb.History
	require.NoError(t, protojson.Unmarshal(data, &hist))
	r := worker.NewWorkflowReplayer()
	workflows.Register(r)
	require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, &hist, ReplayOptions(hist.GetEvents())))
	if os.Getenv("AGENTFLOW_RECORD_HISTORIES") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name+".json"), data, 0o644))
	}
}
