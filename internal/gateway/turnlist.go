package gateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Listing the caller's tenant's turns, for a door whose protocol lists
// its tasks (A2A's ListTasks): Temporal's visibility of the AgentTurn
// workflows on the gateway's task queue whose AgentflowTenant is the
// token's tenant, one row a turn
// (a run that continued as new is its turn's earlier part, not a turn),
// the most recently active first: turns still running, newest first,
// then ended ones, the latest to end first (the order of Temporal's
// visibility store).

// MaxTurnsPage is the most turns a ListTurns page holds.
const MaxTurnsPage = 1000

// TurnQuery selects turns of the caller's tenant. Its zero value selects
// all of them.
type TurnQuery struct {
	// Job and JobPrefix keep the turns whose job id is Job or begins
	// with JobPrefix (either, when both are set).
	Job, JobPrefix string
	// Open keeps the turns still running (true) or those that have ended
	// (false); nil keeps both.
	Open *bool
	// ActiveSince, when set, keeps the turns still running and those that
	// ended at or after it.
	ActiveSince time.Time
	// PageSize is how many turns a page holds: 1 to MaxTurnsPage.
	PageSize int
	// PageToken is the NextPageToken of the page before; nil for the
	// first.
	PageToken []byte
}

// TurnPage is one page of turns.
type TurnPage struct {
	// StreamIDs are the turns' stream ids (turn/{tenant}/{job}).
	StreamIDs []string
	// NextPageToken reads the next page; nil after the last.
	NextPageToken []byte
}

// ListTurns is one page of the caller's tenant's turns that q selects.
// A page token that is not one a listing of the same query gave is
// agent.CodeInvalid.
func (s *Service) ListTurns(ctx context.Context, q TurnQuery) (TurnPage, error) {
	if q.PageSize < 1 || q.PageSize > MaxTurnsPage {
		return TurnPage{}, agent.Errorf(agent.CodeInvalid, "page size %d is out of range: 1 to %d", q.PageSize, MaxTurnsPage)
	}
	query, err := q.visibility(TenantOf(ctx), s.taskQueue, !CallerOf(ctx).Staff())
	if err != nil {
		return TurnPage{}, err
	}
	resp, err := s.client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: query, PageSize: int32(q.PageSize), NextPageToken: q.PageToken})
	if err != nil {
		return TurnPage{}, listError(err)
	}
	page := TurnPage{NextPageToken: resp.GetNextPageToken()}
	if len(page.NextPageToken) == 0 {
		page.NextPageToken = nil
	}
	for _, e := range resp.GetExecutions() {
		page.StreamIDs = append(page.StreamIDs, e.GetExecution().GetWorkflowId())
	}
	return page, nil
}

// CountTurns is how many of the caller's tenant's turns q selects.
func (s *Service) CountTurns(ctx context.Context, q TurnQuery) (int64, error) {
	query, err := q.visibility(TenantOf(ctx), s.taskQueue, !CallerOf(ctx).Staff())
	if err != nil {
		return 0, err
	}
	resp, err := s.client.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
	if err != nil {
		return 0, listError(err)
	}
	return resp.GetCount(), nil
}

// visibility is q as a visibility query of tenant's turns on taskQueue;
// without persons' turns (agent.OfPerson) when hidePersons, for a caller
// who is not staff.
func (q TurnQuery) visibility(tenant, taskQueue string, hidePersons bool) (string, error) {
	for _, v := range []string{tenant, taskQueue, q.Job, q.JobPrefix} {
		if strings.ContainsAny(v, `'"\`) {
			return "", agent.Errorf(agent.CodeInvalid, "%s cannot be listed by: quotes and backslashes are not allowed", Clip(v))
		}
	}
	where := []string{
		fmt.Sprintf("WorkflowType = '%s'", contract.AgentTurn),
		fmt.Sprintf("TaskQueue = '%s'", taskQueue),
		fmt.Sprintf("%s = '%s'", contract.SearchTenant.GetName(), tenant),
		"ExecutionStatus != 'ContinuedAsNew'",
	}
	if hidePersons {
		for _, p := range agent.PersonIDPrefixes() {
			where = append(where, fmt.Sprintf("WorkflowId NOT STARTS_WITH '%s'", contract.TurnWorkflowID(tenant, p)))
		}
	}
	var jobs []string
	if q.Job != "" {
		jobs = append(jobs, fmt.Sprintf("WorkflowId = '%s'", contract.TurnWorkflowID(tenant, q.Job)))
	}
	if q.JobPrefix != "" {
		jobs = append(jobs, fmt.Sprintf("WorkflowId STARTS_WITH '%s'", contract.TurnWorkflowID(tenant, q.JobPrefix)))
	}
	if len(jobs) > 0 {
		where = append(where, "("+strings.Join(jobs, " OR ")+")")
	}
	if q.Open != nil {
		op := "="
		if !*q.Open {
			op = "!="
		}
		where = append(where, "ExecutionStatus "+op+" 'Running'")
	}
	if !q.ActiveSince.IsZero() {
		where = append(where, fmt.Sprintf("(ExecutionStatus = 'Running' OR CloseTime >= '%s')", q.ActiveSince.UTC().Format(time.RFC3339Nano)))
	}
	return strings.Join(where, " AND "), nil
}

// listError classifies a visibility error: a page token Temporal does
// not take is the caller's error, any other is the server's.
func listError(err error) error {
	if _, ok := errors.AsType[*serviceerror.InvalidArgument](err); ok {
		return agent.Errorf(agent.CodeInvalid, "the page token is not one this listing gave")
	}
	return agent.WithCode(agent.CodeUnavailable, fmt.Errorf("list turns: %w", err))
}
