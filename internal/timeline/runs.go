package timeline

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/internal/agent"
)

// Visibility lists workflow executions (client.Client).
type Visibility interface {
	ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error)
}

// TemporalRuns lists a turn's runs from Temporal's visibility.
type TemporalRuns struct {
	Client    Visibility
	Namespace string
	// WebUI is the Temporal Web UI's base URL (http://127.0.0.1:8233):
	// each run links to its history there. "": no links.
	WebUI string
}

// maxRuns bounds the runs listed of one turn: a turn continues as new
// every few thousand steps, so a few pages' worth is plenty.
const maxRuns = 1000

// Runs lists the runs of workflowID, the first first.
func (t TemporalRuns) Runs(ctx context.Context, workflowID string) ([]Run, error) {
	if strings.ContainsAny(workflowID, "\"'\\") {
		return nil, agent.Errorf(agent.CodeInvalid, "workflow id %q cannot be listed by: it has quotes or backslashes", workflowID)
	}
	req := &workflowservice.ListWorkflowExecutionsRequest{Namespace: t.Namespace, PageSize: 100,
		Query: fmt.Sprintf("WorkflowId = %q", workflowID)}
	var runs []Run
	for {
		resp, err := t.Client.ListWorkflow(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("list the runs of %s: %w", workflowID, err)
		}
		for _, e := range resp.GetExecutions() {
			r := Run{RunID: e.GetExecution().GetRunId(), Status: statusName(e.GetStatus()), StartedAt: e.GetStartTime().AsTime()}
			if ct := e.GetCloseTime(); ct.GetSeconds() > 0 {
				end := ct.AsTime()
				r.EndedAt = &end
			}
			r.WebUI = t.link(workflowID, r.RunID)
			runs = append(runs, r)
		}
		req.NextPageToken = resp.GetNextPageToken()
		if len(req.NextPageToken) == 0 || len(runs) >= maxRuns {
			break
		}
	}
	slices.SortStableFunc(runs, func(a, b Run) int { return a.StartedAt.Compare(b.StartedAt) })
	if runs == nil {
		runs = []Run{}
	}
	return runs, nil
}

// link is a run's history in the Web UI.
func (t TemporalRuns) link(workflowID, runID string) string {
	if t.WebUI == "" {
		return ""
	}
	return strings.TrimRight(t.WebUI, "/") + "/namespaces/" + url.PathEscape(t.Namespace) + "/workflows/" +
		url.PathEscape(workflowID) + "/" + url.PathEscape(runID) + "/history"
}

// statusName is Temporal's name of a status: Running, Completed,
// ContinuedAsNew, ...
func statusName(s enumspb.WorkflowExecutionStatus) string {
	if s == enumspb.WORKFLOW_EXECUTION_STATUS_UNSPECIFIED {
		return "Unknown"
	}
	return s.String()
}
