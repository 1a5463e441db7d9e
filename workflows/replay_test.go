package workflows

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// TestReplay replays histories of real runs (recorded by the end-to-end
// tests, internal/e2e, with AGENTFLOW_RECORD_HISTORIES=1). A failure means a
// change to workflow code is not deterministic for runs already in
// flight: guard it with workflow.GetVersion.
func TestReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no saved histories in testdata/")
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			Register(r)
			replayFile(t, r, f)
		})
	}
}

// replayFile replays a recorded history as the run it was: with its
// workflow id and run id, which a run that continued another reads (its
// log's events name the workflow), rather than the replayer's stand-ins.
func replayFile(t *testing.T, r worker.WorkflowReplayer, file string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, f.Close())
	require.NoError(t, err, file)
	started := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes()
	require.NoError(t, r.ReplayWorkflowHistoryWithOptions(nil, h, worker.ReplayWorkflowHistoryOptions{
		OriginalExecution: workflow.Execution{ID: started.GetWorkflowId(), RunID: started.GetOriginalExecutionRunId()},
	}))
}
