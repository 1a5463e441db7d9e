package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// ingestParallel is how many pages of a batch are stored at once: enough
// to keep the embedding endpoint busy while a page is written, few
// enough that one batch leaves the worker's slots to turns.
const ingestParallel = 4

// Ingest stores a batch of documents into a knowledge collection, a page
// (contract.IngestPageDocuments documents) per IngestPage activity, a few
// at once, in order. The history holds the pages' refs and counts, never
// a document's text. A worker that dies mid-way costs a page's work at
// most: the activity is retried, and what it had stored is found by
// content hash and not stored again. Every PagesPerRun pages it continues
// as new with its counts, so that a batch of any size stays within
// Temporal's limits. Its progress is the ingest_status query (and the Web
// UI's current details); its result is the final IngestStatus.
func Ingest(ctx workflow.Context, in contract.IngestInput) (contract.IngestStatus, error) {
	st := contract.IngestStatus{ID: in.BatchID, Collection: in.Collection, State: contract.IngestRunning, Documents: in.Documents}
	if in.Status != nil {
		st = *in.Status
	}
	if err := workflow.SetQueryHandler(ctx, contract.QueryIngestStatus, func() (contract.IngestStatus, error) {
		return st, nil
	}); err != nil {
		return st, err
	}
	if in.TenantID == "" || in.Collection == "" || in.BatchID == "" {
		return st, contract.Failure(agent.Errorf(agent.CodeInvalid, "ingest: tenant_id, collection and batch_id are required"))
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		// A page heartbeats after every document it stores; a worker's
		// death is noticed this soon and the page goes on elsewhere.
		HeartbeatTimeout: 30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: 8 * time.Second,
			// An embedding endpoint that stays down (about 15 seconds
			// of retries) fails the ingest, saying so, rather than retry
			// for ever; what was stored stays, whole documents only, and
			// an ingest of the same documents under a new id stores the
			// rest.
			MaximumAttempts: 5},
	})
	perRun := in.PagesPerRun
	perRun = agent.OrDefault(perRun, contract.DefaultIngestPagesPerRun)
	end := min(len(in.Pages), in.Next+perRun)
	type pending struct {
		page int
		f    workflow.Future
	}
	var window []pending
	next := in.Next
	for next < end || len(window) > 0 {
		for next < end && len(window) < ingestParallel {
			f := workflow.ExecuteActivity(actx, contract.IngestPage, contract.IngestPageInput{TenantID: in.TenantID,
				Collection: in.Collection, BatchID: in.BatchID, Page: next, Ref: in.Pages[next]})
			window = append(window, pending{next, f})
			next++
		}
		var res contract.IngestPageResult
		err := window[0].f.Get(ctx, &res)
		window = window[1:]
		if err != nil {
			st.State = contract.IngestFailed
			st.Error = contract.ErrorOf(err).Message
			return st, err
		}
		st.IngestCounts.Add(res.IngestCounts)
		st.Done += res.Stored + res.Existing + res.Failed
		for _, e := range res.Errors {
			if len(st.Errors) < contract.IngestMaxErrors {
				st.Errors = append(st.Errors, e)
			}
		}
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d of %d documents: %d stored, %d already there, %d failed",
			st.Done, st.Documents, st.Stored, st.Existing, st.Failed))
	}
	if end < len(in.Pages) {
		in.Next, in.Status = end, &st
		return st, workflow.NewContinueAsNewError(ctx, contract.Ingest, in)
	}
	st.State = contract.IngestCompleted
	return st, nil
}
