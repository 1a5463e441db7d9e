package workflows

import (
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// Evaluation runs a dataset's cases against one or two versions of an
// agent: each case on each version is a child AgentTurn (job id
// agent.EvalJobID, so that a resumed run finds the turns it started, and
// the Web UI shows each under the evaluation), at most in.Concurrency at
// once, then scored and stored by ScoreEvalCase as it ends. A worker that
// dies mid-way costs nothing: the workflow goes on where its history
// stops, the children that ran keep their results, and a score is stored
// once. It returns the totals per version; the cases' results are in the
// store (EvalRun). A recorded case (agent.EvalCase.Recording) first reads
// its recording's prompt and history (PrepareReplay), and its turn is a
// replay: its tool calls are answered from the recording by the tool
// runtime, and it is scored against the recording.
func Evaluation(ctx workflow.Context, in agent.EvalInput) (agent.EvalRun, error) {
	// Decoding JSON into values is deterministic; workflowcheck cannot
	// tell.
	err := in.Validate() //workflowcheck:ignore
	if err != nil {
		return agent.EvalRun{}, contract.Failure(err)
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		// A worker lost mid-activity is noticed in seconds, not at the
		// end of the two minutes (ScoreEvalCase heartbeats; the others
		// are a few reads and writes).
		HeartbeatTimeout: 15 * time.Second,
		RetryPolicy:      &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute},
	})
	if err = workflow.ExecuteActivity(actx, contract.BeginEval, in).Get(ctx, nil); err != nil {
		return agent.EvalRun{}, err
	}
	type job struct {
		ord     int
		c       agent.EvalCase
		version int
	}
	var jobs []job
	for ord, c := range in.Dataset.Cases {
		for _, v := range in.Versions {
			jobs = append(jobs, job{ord, c, v})
		}
	}
	limit := in.Concurrency
	if limit == 0 {
		limit = agent.DefaultEvalConcurrency
	}
	results := make([]agent.EvalCaseResult, len(jobs))
	running, done, passed := 0, 0, 0
	var failure error
	wg := workflow.NewWaitGroup(ctx)
	for i, j := range jobs {
		if err := workflow.Await(ctx, func() bool { return running < limit }); err != nil {
			return agent.EvalRun{}, err
		}
		running++
		wg.Add(1)
		workflow.Go(ctx, func(ctx workflow.Context) {
			defer wg.Done()
			res, err := runEvalCase(ctx, actx, in, j.ord, j.c, j.version)
			running--
			if err != nil {
				failure = err
				return
			}
			results[i] = res
			done++
			if res.Passed {
				passed++
			}
			workflow.SetCurrentDetails(ctx, fmt.Sprintf("%d of %d cases scored, %d passed", done, len(jobs), passed))
		})
	}
	wg.Wait(ctx)
	if failure != nil {
		return agent.EvalRun{}, failure
	}
	if err := workflow.ExecuteActivity(actx, contract.FinishEval, contract.FinishEvalInput{TenantID: in.TenantID, EvalID: in.EvalID}).Get(ctx, nil); err != nil {
		return agent.EvalRun{}, err
	}
	return agent.EvalRun{TenantID: in.TenantID, EvalID: in.EvalID, Dataset: in.Dataset.Name, AgentID: in.AgentID,
		Versions: in.Versions, Status: agent.EvalCompleted, Totals: agent.TotalsOf(in.Versions, results)}, nil
}

// runEvalCase runs one case on one version as a child turn and scores it.
// A turn that fails is a score, not an error: only an activity that
// cannot store the score fails the evaluation.
func runEvalCase(ctx, actx workflow.Context, in agent.EvalInput, ord int, c agent.EvalCase, version int) (agent.EvalCaseResult, error) {
	jobID := agent.EvalJobID(in.EvalID, c.ID, version)
	req := agent.TurnRequest{
		Version: agent.ProtocolVersion, TenantID: in.TenantID, JobID: jobID,
		AgentID: in.AgentID, AgentVersion: version, Prompt: c.Prompt, History: agent.HistoryFresh, Channel: agent.ChannelEval,
	}
	if c.Recording != nil {
		// A replay: the recorded prompt and history, and the recorded
		// tool results (agent.Replay) in place of live tools.
		var prep contract.PrepareReplayResult
		in := contract.PrepareReplayInput{TenantID: in.TenantID, SessionID: jobID, JobID: jobID + "-history", Recording: *c.Recording}
		if err := workflow.ExecuteActivity(actx, contract.PrepareReplay, in).Get(ctx, &prep); err != nil {
			return agent.EvalCaseResult{}, err
		}
		req.Prompt, req.Replay = prep.Prompt, &agent.Replay{JobID: c.Recording.JobID}
		if prep.History > 0 {
			req.SessionID, req.History = jobID, agent.HistoryLoad
		}
	} else if len(c.History) > 0 {
		// The case's conversation so far is its own session's transcript.
		req.SessionID, req.History = jobID, agent.HistoryLoad
		prep := contract.PrepareEvalCaseInput{TenantID: in.TenantID, SessionID: jobID, JobID: jobID + "-history", History: c.History}
		if err := workflow.ExecuteActivity(actx, contract.PrepareEvalCase, prep).Get(ctx, nil); err != nil {
			return agent.EvalCaseResult{}, err
		}
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          contract.TurnWorkflowID(in.TenantID, jobID),
		WorkflowTaskTimeout: contract.TurnTaskTimeout,
		StaticSummary:       fmt.Sprintf("eval %s: %s v%d: %s", in.EvalID, in.AgentID, version, c.ID),
		StaticDetails:       contract.TurnDetails(req),
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
	})
	var res agent.TurnResult
	if err := workflow.ExecuteChildWorkflow(cctx, contract.AgentTurn, req).Get(ctx, &res); err != nil {
		failed, ok := contract.FailedResult(err)
		if !ok {
			failed = agent.TurnResult{Version: agent.ProtocolVersion, JobID: jobID, Status: agent.StatusFailed,
				Error: agent.TurnErrorOf(contract.ErrorOf(err))}
		}
		res = failed
	}
	var score agent.EvalCaseResult
	err := workflow.ExecuteActivity(actx, contract.ScoreEvalCase, contract.ScoreEvalCaseInput{
		TenantID: in.TenantID, EvalID: in.EvalID, AgentID: in.AgentID, Ord: ord, Case: c, Version: version, Result: res,
	}).Get(ctx, &score)
	return score, err
}
