// Package turnclient starts and steers agentflow's workflows from outside
// them: start a turn and wait for its result, send a message to a
// conversation, decide an approval, list pending approvals, read a turn's
// events. The gateway, the starter, the stream follower, the benchmarks and
// the tests all go through it, so every turn gets the same id, search
// attributes and summary.
//
// It imports only the domain and the contract: it must not import the
// workflows, so that a client starts a turn by its names and payloads
// alone.
//
// Errors are domain errors (internal/agent): a workflow that does not
// exist is CodeNotFound, a turn that has ended is CodeConflict for what
// needs a running turn, and so is a job id whose run is another request's
// (Start), an update's refusal keeps its code, and a server that cannot
// be reached is CodeUnavailable.
package turnclient

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// StartOptions are the options every starter of a turn uses: the turn's
// id, the hash of its request in the memo (contract.MemoRequestHash), its
// search attributes and summary. A start of a job whose run is open, or
// closed successfully, does not start another run: ExecuteWorkflow with
// these options returns that run, whatever request it runs — Start checks
// that it is the same request. After a run that failed (a rejected turn,
// a rate limit) the job may run again; the turn then finds any result the
// job has stored.
func StartOptions(taskQueue string, req agent.TurnRequest) client.StartWorkflowOptions {
	attrs := []temporal.SearchAttributeUpdate{contract.SearchTenant.ValueSet(req.TenantID)}
	if req.AgentID != "" {
		attrs = append(attrs, contract.SearchAgent.ValueSet(req.AgentID))
	}
	if req.SessionID != "" {
		attrs = append(attrs, contract.SearchSession.ValueSet(req.SessionID))
	}
	if agent.KnownChannel(req.Channel) {
		attrs = append(attrs, contract.SearchChannel.ValueSet(req.Channel))
	}
	return client.StartWorkflowOptions{
		ID:                    contract.TurnWorkflowID(req.TenantID, req.JobID),
		TaskQueue:             taskQueue,
		WorkflowTaskTimeout:   contract.TurnTaskTimeout,
		StaticSummary:         contract.TurnSummary(req),
		StaticDetails:         contract.TurnDetails(req),
		TypedSearchAttributes: temporal.NewSearchAttributes(attrs...),
		// The memo is written with the start, atomically: a second start
		// of the job reads the first one's request hash from it.
		Memo:                     map[string]any{contract.MemoRequestHash: req.Hash()},
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY,
		// A caller that runs a worker on the task queue (the gateway in the
		// worker process) gets the first workflow task in the start reply.
		EnableEagerStart: true,
	}
}

// Start starts a turn, or attaches to the run of the same job when it is
// the same request (agent.TurnRequest.Hash): open, or closed with its
// result. A job id whose run is another request's is CodeConflict.
//
// The first start of a job costs one call; only a start that finds the
// job's run compares the requests (one call more), so a start repeated
// after a timeout attaches to the run the first try started.
func Start(ctx context.Context, c client.Client, taskQueue string, req agent.TurnRequest) (client.WorkflowRun, error) {
	return StartWith(ctx, c, nil, taskQueue, req)
}

// StartWith is Start, decoding the request of a run it reads from the
// run's history with dc: payloadstore.Converter when the client keeps
// large payloads in an object store, whose references it reads. A nil dc
// is the SDK's default data converter.
func StartWith(ctx context.Context, c client.Client, dc converter.DataConverter, taskQueue string, req agent.TurnRequest) (client.WorkflowRun, error) {
	opts := StartOptions(taskQueue, req)
	opts.WorkflowExecutionErrorWhenAlreadyStarted = true
	run, err := c.ExecuteWorkflow(ctx, opts, contract.AgentTurn, req)
	if started, ok := errors.AsType[*serviceerror.WorkflowExecutionAlreadyStarted](err); ok {
		return attach(ctx, c, dc, opts.ID, started.RunId, req)
	}
	if err != nil {
		return nil, workflowError(fmt.Sprintf("turn %q", opts.ID), err)
	}
	return run, nil
}

// StartEval starts an evaluation, or attaches to the one of the same id
// that is running or has run.
func StartEval(ctx context.Context, c client.Client, taskQueue string, in agent.EvalInput) (client.WorkflowRun, error) {
	opts := client.StartWorkflowOptions{
		ID:            contract.EvalWorkflowID(in.TenantID, in.EvalID),
		TaskQueue:     taskQueue,
		StaticSummary: fmt.Sprintf("eval %s: %s on %s %v", in.EvalID, in.Dataset.Name, in.AgentID, in.Versions),
		TypedSearchAttributes: temporal.NewSearchAttributes(contract.SearchTenant.ValueSet(in.TenantID),
			contract.SearchAgent.ValueSet(in.AgentID)),
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
	}
	if in.Build != "" {
		deployment, build, err := agent.SplitBuild(in.Build)
		if err != nil {
			return nil, err
		}
		opts.VersioningOverride = &client.PinnedVersioningOverride{
			Version: worker.WorkerDeploymentVersion{DeploymentName: deployment, BuildID: build}}
	}
	run, err := c.ExecuteWorkflow(ctx, opts, contract.Evaluation, in)
	if started, ok := errors.AsType[*serviceerror.WorkflowExecutionAlreadyStarted](err); ok {
		// It has run: its id is taken for good.
		return c.GetWorkflow(ctx, opts.ID, started.RunId), nil
	}
	if err != nil {
		return nil, workflowError(fmt.Sprintf("evaluation %q", opts.ID), err)
	}
	return run, nil
}

// attach returns the run of a job that had started, if it runs req.
func attach(ctx context.Context, c client.Client, dc converter.DataConverter, workflowID, runID string, req agent.TurnRequest) (client.WorkflowRun, error) {
	if err := SameRequest(ctx, c, dc, workflowID, runID, req); err != nil {
		return nil, err
	}
	return c.GetWorkflow(ctx, workflowID, runID), nil
}

// SameRequest says whether the run runID of turn workflowID runs req: a
// start that finds its job's run attaches to it only then, and is
// refused (CodeConflict) when the job id names another request.
func SameRequest(ctx context.Context, c client.Client, dc converter.DataConverter, workflowID, runID string, req agent.TurnRequest) error {
	hash, startedAt, err := runRequestHash(ctx, c, dc, workflowID, runID)
	if err != nil {
		return workflowError(fmt.Sprintf("turn %q", workflowID), err)
	}
	if hash != req.Hash() {
		return agent.Errorf(agent.CodeConflict, "job id %q names another request (started %s); use a new job id",
			req.JobID, startedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// runRequestHash returns the hash of the request a turn's run runs, and
// when it started: from its memo, or, for a run started without it (by
// the temporal CLI, by a parent workflow, by an earlier release), from
// its input, decoded with dc (nil: the default data converter).
func runRequestHash(ctx context.Context, c client.Client, dc converter.DataConverter, workflowID, runID string) (string, time.Time, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return "", time.Time{}, err
	}
	info := desc.GetWorkflowExecutionInfo()
	startedAt := info.GetStartTime().AsTime()
	if dc == nil {
		dc = converter.GetDefaultDataConverter()
	}
	if p, ok := info.GetMemo().GetFields()[contract.MemoRequestHash]; ok {
		// A memo field that is not a string names no request: "" is no
		// request's hash.
		var hash string
		_ = dc.FromPayload(p, &hash)
		return hash, startedAt, nil
	}
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return "", startedAt, fmt.Errorf("run %s of %s has no history", runID, workflowID)
	}
	first, err := it.Next()
	if err != nil {
		return "", startedAt, err
	}
	// A run of another type, or an input that does not decode, runs no
	// request: "" is no request's hash. An input kept in an object store
	// that cannot be read now is an error to retry, not another request.
	attrs := first.GetWorkflowExecutionStartedEventAttributes()
	if attrs.GetWorkflowType().GetName() != contract.AgentTurn {
		return "", startedAt, nil
	}
	var req agent.TurnRequest
	if err := dc.FromPayloads(attrs.GetInput(), &req); err != nil {
		if agent.IsCode(err, agent.CodeUnavailable) {
			return "", startedAt, err
		}
		return "", startedAt, nil
	}
	return req.Hash(), startedAt, nil
}

// Result waits for a turn's result. A turn that failed or was rejected
// has a result too (its status says so); an error means the result could
// not be read.
func Result(ctx context.Context, run client.WorkflowRun) (agent.TurnResult, error) {
	var res agent.TurnResult
	err := run.Get(ctx, &res)
	if err == nil {
		return res, nil
	}
	if failed, ok := contract.FailedResult(err); ok {
		return failed, nil
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, workflowError(fmt.Sprintf("turn %q", run.GetID()), err)
}

// ConversationOptions start a session's Conversation, or reuse the
// running one.
func ConversationOptions(taskQueue string, in agent.ConversationInput) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       contract.ConversationWorkflowID(in.TenantID, in.SessionID),
		TaskQueue:                taskQueue,
		StaticSummary:            "conversation " + in.SessionID,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			contract.SearchTenant.ValueSet(in.TenantID), contract.SearchSession.ValueSet(in.SessionID)),
	}
}

// SendMessage sends a message to a session's Conversation, starting it if
// needed (update-with-start), and returns the turn that answers it. The
// server refuses updates for a while when too many are in flight or the
// run is rolling over; those are retried until ctx ends.
func SendMessage(ctx context.Context, c client.Client, taskQueue string, in agent.ConversationInput, m agent.SendMessage) (agent.SendMessageResult, error) {
	backoff := 50 * time.Millisecond
	for {
		op := c.NewWithStartWorkflowOperation(ConversationOptions(taskQueue, in), contract.Conversation, in)
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateName: contract.UpdateSendMessage, Args: []any{m}, WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		var res agent.SendMessageResult
		if err == nil {
			err = h.Get(ctx, &res)
		}
		if err == nil {
			return res, nil
		}
		if !transient(err) || ctx.Err() != nil {
			return res, workflowError(fmt.Sprintf("conversation %q", contract.ConversationWorkflowID(in.TenantID, in.SessionID)), err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return res, ctx.Err()
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

// Approve decides a tool call waiting for approval in a running turn.
func Approve(ctx context.Context, c client.Client, workflowID string, d agent.ApprovalDecision) (contract.ApprovalAck, error) {
	return update[contract.ApprovalAck](ctx, c, workflowID, contract.UpdateApprove, d, "nothing waits for approval")
}

// Answer answers a turn's ask_user call (update answer): refused when no
// such question waits, the answerer lacks its role, or the answer is not
// one of its choices.
func Answer(ctx context.Context, c client.Client, workflowID string, a agent.Answer) (contract.AnswerAck, error) {
	// The turn ends soon after its last answer: a second answer that
	// comes later finds it closed.
	return update[contract.AnswerAck](ctx, c, workflowID, contract.UpdateAnswer, a, "its questions were already answered or closed")
}

// update runs an update of a running turn and waits for its result; the
// error of one that has ended says so, and what is gone (nothing; running).
func update[T any](ctx context.Context, c client.Client, workflowID, name string, arg any, nothing string) (T, error) {
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: workflowID, UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	var out T
	if err == nil {
		err = h.Get(ctx, &out)
	}
	if err != nil {
		var zero T
		return zero, running(ctx, c, workflowID, err, nothing)
	}
	return out, nil
}

// PendingQuestions lists a turn's ask_user calls waiting for an answer.
func PendingQuestions(ctx context.Context, c client.Client, workflowID string) ([]agent.PendingQuestion, error) {
	return query[[]agent.PendingQuestion](ctx, c, "stream", workflowID, contract.QueryPendingQuestions)
}

// Cancel asks a running turn to stop (signal cancel_turn); a turn that
// has ended is CodeConflict.
func Cancel(ctx context.Context, c client.Client, workflowID string, req agent.CancelRequest) error {
	err := c.SignalWorkflow(ctx, workflowID, "", contract.SignalCancelTurn, req)
	if err == nil {
		return nil
	}
	err = workflowError(fmt.Sprintf("stream %q", workflowID), err)
	if agent.IsCode(err, agent.CodeNotFound) && ended(ctx, c, workflowID) {
		return agent.Errorf(agent.CodeConflict, "turn %q has ended: there is nothing to cancel", workflowID)
	}
	return err
}

// PendingApprovals lists a turn's tool calls waiting for approval.
func PendingApprovals(ctx context.Context, c client.Client, workflowID string) ([]agent.PendingApproval, error) {
	return query[[]agent.PendingApproval](ctx, c, "stream", workflowID, contract.QueryPendingApprovals)
}

// Transcript reads a conversation's transcript query.
func Transcript(ctx context.Context, c client.Client, workflowID string) (agent.Transcript, error) {
	return query[agent.Transcript](ctx, c, "conversation", workflowID, contract.QueryTranscript)
}

// query reads a query of a workflow's current run. kind names the
// workflow (stream, conversation) in errors.
func query[T any](ctx context.Context, c client.Client, kind, workflowID, name string) (T, error) {
	var zero, out T
	v, err := c.QueryWorkflow(ctx, workflowID, "", name)
	if err != nil {
		return zero, workflowError(fmt.Sprintf("%s %q", kind, workflowID), err)
	}
	if err := v.Get(&out); err != nil {
		return zero, fmt.Errorf("decode query %s of %s: %w", name, workflowID, err)
	}
	return out, nil
}

// Events reads a page of a turn's event log.
func Events(ctx context.Context, c client.Client, workflowID string, q agent.EventsQuery) (agent.EventsPage, error) {
	page, err := eventsOfRun(ctx, c, workflowID, "", q)
	if err != nil || q.HeadOnly {
		return page, err
	}
	// A turn that continued as new holds its earlier events in its
	// earlier runs: the first of them back that holds the event after
	// q.AfterIndex answers, and the reader asks again from where it ends.
	run := page
	for run.First > q.AfterIndex+1 && run.EarlierRunID != "" {
		if run, err = eventsOfRun(ctx, c, workflowID, run.EarlierRunID, q); err != nil {
			return agent.EventsPage{}, err
		}
	}
	if run.EarlierRunID == page.EarlierRunID && run.First == page.First {
		return page, nil
	}
	var older []agent.Event
	for _, e := range run.Events {
		if e.Index < page.First {
			older = append(older, e)
		}
	}
	return agent.EventsPage{TenantID: page.TenantID, Events: older, Next: page.Next, First: page.First, EarlierRunID: page.EarlierRunID}, nil
}

// eventsOfRun queries one run of the workflow ("": the current run); a
// closed run is answered by a worker replaying its history.
func eventsOfRun(ctx context.Context, c client.Client, workflowID, runID string, q agent.EventsQuery) (agent.EventsPage, error) {
	resp, err := c.QueryWorkflow(ctx, workflowID, runID, contract.QueryEvents, q)
	if err != nil {
		if ctx.Err() != nil {
			return agent.EventsPage{}, ctx.Err()
		}
		return agent.EventsPage{}, workflowError(fmt.Sprintf("stream %q", workflowID), err)
	}
	var page agent.EventsPage
	if err := resp.Get(&page); err != nil {
		return agent.EventsPage{}, fmt.Errorf("decode stream %s: %w", workflowID, err)
	}
	return page, nil
}

// workflowError turns what the Temporal client returned about the named
// workflow into a domain error: a workflow that does not exist is
// CodeNotFound, an update's or a workflow's typed failure keeps its code,
// anything else is the server's failure (CodeUnavailable).
func workflowError(name string, err error) error {
	var nf *serviceerror.NotFound
	var app *temporal.ApplicationError
	switch {
	case errors.As(err, &nf):
		return agent.Errorf(agent.CodeNotFound, "%s not found", name)
	case errors.As(err, &app):
		if code, ok := agent.CodeOfType(app.Type()); ok {
			return &agent.Error{Code: code, Message: app.Message()}
		}
	}
	return &agent.Error{Code: agent.CodeUnavailable, Message: name, Err: err}
}

// running explains a failed call that needs a running turn: a turn that
// has ended is a conflict, not a missing turn, whose message says what
// the caller wanted from it is gone (nothing).
func running(ctx context.Context, c client.Client, workflowID string, err error, nothing string) error {
	err = workflowError(fmt.Sprintf("stream %q", workflowID), err)
	if !agent.IsCode(err, agent.CodeNotFound) {
		return err
	}
	if ended(ctx, c, workflowID) {
		return agent.Errorf(agent.CodeConflict, "turn %q has ended: %s", workflowID, nothing)
	}
	return err
}

// ended reports whether the workflow exists and is closed.
func ended(ctx context.Context, c client.Client, workflowID string) bool {
	desc, err := c.DescribeWorkflowExecution(ctx, workflowID, "")
	return err == nil && desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
}

// transient: the server could not take the update now, but will later.
func transient(err error) bool {
	var exhausted *serviceerror.ResourceExhausted
	var unavailable *serviceerror.Unavailable
	var aborted *serviceerror.Aborted
	return errors.As(err, &exhausted) || errors.As(err, &unavailable) || errors.As(err, &aborted)
}
