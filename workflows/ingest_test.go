package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/contract"
)

// ingestEnv is a test environment with Ingest and an IngestPage that
// stores each page's documents (10 a page, the first of page 3 failing)
// and counts its calls per page.
func ingestEnv(calls map[int]int, fail error) *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn + 4}))))
	env := s.NewTestWorkflowEnvironment()
	var mu sync.Mutex // pages run at once
	env.RegisterWorkflowWithOptions(Ingest, workflow.RegisterOptions{Name: contract.Ingest})
	env.RegisterActivityWithOptions(func(_ context.Context, in contract.IngestPageInput) (contract.IngestPageResult, error) {
		mu.Lock()
		calls[in.Page]++
		mu.Unlock()
		if fail != nil {
			return contract.IngestPageResult{}, fail
		}
		res := contract.IngestPageResult{IngestCounts: contract.IngestCounts{Stored: 10, Chunks: 20, Embeddings: 20}}
		if in.Page == 3 {
			res.Stored, res.Failed = 9, 1
			res.Errors = []contract.IngestError{{Document: 30, Message: "the document has no text"}}
		}
		return res, nil
	}, activity.RegisterOptions{Name: contract.IngestPage})
	return env
}

func ingestInput(pages int) contract.IngestInput {
	in := contract.IngestInput{TenantID: "acme", Collection: "notes", BatchID: "b1", Documents: pages * 10}
	for i := range pages {
		in.Pages = append(in.Pages, fmt.Sprintf("cas://sha256:%064d", i))
	}
	return in
}

// TestIngestPages: every page is stored once and counted; the status
// says what failed and why.
func TestIngestPages(t *testing.T) {
	calls := map[int]int{}
	env := ingestEnv(calls, nil)
	env.ExecuteWorkflow(contract.Ingest, ingestInput(7))
	require.NoError(t, env.GetWorkflowError())
	var st contract.IngestStatus
	require.NoError(t, env.GetWorkflowResult(&st))
	require.Equal(t, contract.IngestStatus{ID: "b1", Collection: "notes", State: contract.IngestCompleted, Documents: 70, Done: 70,
		IngestCounts: contract.IngestCounts{Stored: 69, Failed: 1, Chunks: 140, Embeddings: 140},
		Errors:       []contract.IngestError{{Document: 30, Message: "the document has no text"}}}, st)
	require.Equal(t, map[int]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1}, calls)
}

// TestIngestContinuesAsNew: after PagesPerRun pages the workflow
// continues as new from the next page, carrying its counts.
func TestIngestContinuesAsNew(t *testing.T) {
	calls := map[int]int{}
	env := ingestEnv(calls, nil)
	in := ingestInput(7)
	in.PagesPerRun = 3
	env.ExecuteWorkflow(contract.Ingest, in)
	var can *workflow.ContinueAsNewError
	require.True(t, errors.As(env.GetWorkflowError(), &can))
	require.Equal(t, map[int]int{0: 1, 1: 1, 2: 1}, calls)

	var next contract.IngestInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Equal(t, 3, next.Next)
	require.Equal(t, 30, next.Status.Done)
	require.Equal(t, 30, next.Status.Stored)

	calls2 := map[int]int{}
	env2 := ingestEnv(calls2, nil)
	env2.ExecuteWorkflow(contract.Ingest, next)
	require.True(t, errors.As(env2.GetWorkflowError(), &can))
	require.Equal(t, map[int]int{3: 1, 4: 1, 5: 1}, calls2)
}

// TestIngestFails: a page that fails for good fails the ingest, and its
// status says why.
func TestIngestFails(t *testing.T) {
	calls := map[int]int{}
	env := ingestEnv(calls, temporal.NewNonRetryableApplicationError("embed 20 chunks: provider down", "Unavailable", nil))
	env.ExecuteWorkflow(contract.Ingest, ingestInput(2))
	require.Error(t, env.GetWorkflowError())
	v, err := env.QueryWorkflow(contract.QueryIngestStatus)
	require.NoError(t, err)
	var st contract.IngestStatus
	require.NoError(t, v.Get(&st))
	require.Equal(t, contract.IngestFailed, st.State)
	require.Contains(t, st.Error, "provider down")
}
