package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// The Nexus endpoint the workers serve (its task queue of the same name)
// as the binding nexusCaller of the suite's tenant, and the namespace of
// the process team whose workflows call it.
const (
	nexusEndpoint = "agents-chaos"
	nexusCaller   = "chaos-process"
	callers       = "teams"
)

// nexusBinding is the workers' binding of the endpoint's queue to the
// suite's tenant, as an operator writes it.
const nexusBinding = nexusdoor.EnvBindings + "=" + nexusEndpoint + "=" + tenant + ":user+approver:" + nexusCaller

// nexusFaults runs a turn through the Nexus service: a workflow of
// namespace teams (a worker of this process) calls run_turn through the
// suite's endpoint for the agent whose calculator needs approval. While
// the call waits, the worker that ran the turn's latest workflow task is
// SIGKILLed and the Temporal server restarted before it starts again;
// the caller then decides the approval through the decide operation; at
// the answer's first token the worker streaming it is SIGKILLed too. The
// run passes when the caller's operation gets the turn's completed
// result, started and completed once in its history; the turn is one
// chain of runs, each model call and the tool call completed once, its
// result, transcript and approval stored once; and a gateway's client,
// following the turn by its stream id, read the answer once.
func nexusFaults(ctx context.Context, e *env, job string) error {
	if err := e.ensureNexus(ctx); err != nil {
		return err
	}
	cc, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: callers, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer cc.Close()
	queue := "callers-" + job
	w := worker.New(cc, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(runTurnVia, workflow.RegisterOptions{Name: "RunAgentTurn"})
	w.RegisterWorkflowWithOptions(decideVia, workflow.RegisterOptions{Name: "DecideApproval"})
	if err := w.Start(); err != nil {
		return err
	}
	defer w.Stop()

	spec := computeTurn("", "ops")(e, job)
	caller, err := cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "caller-" + job, TaskQueue: queue}, "RunAgentTurn",
		agentflow.RunTurnInput{Prompt: spec.prompt, AgentID: spec.agent, JobID: job, SessionID: job})
	if err != nil {
		return fmt.Errorf("start the caller: %w", err)
	}
	run := &turnRun{job: job, workflowID: contract.TurnWorkflowID(tenant, job), tokens: map[int64]string{}}
	s := nexusStrikes{e: e, cc: cc, queue: queue, run: run, done: make(chan error, 2)}
	if err := e.stream(ctx, run, nil, s.at(ctx)); err != nil {
		return err
	}
	if err := s.wait(ctx); err != nil {
		return err
	}
	e.paused(run)

	var res agentflow.TurnResult
	if err := caller.Get(ctx, &res); err != nil {
		return fmt.Errorf("the caller's operation: %w", err)
	}
	if res.Status != agent.StatusCompleted || res.Output != spec.want {
		return fmt.Errorf("the caller got %s %q (%+v), want completed with %q", res.Status, res.Output, res.Error, spec.want)
	}
	if err := callerOperations(ctx, cc, caller.GetID()); err != nil {
		return err
	}
	if err := e.check(ctx, trial{on: onApproval}, run, spec, true); err != nil {
		return err
	}
	return e.checkOneTurn(ctx, job, run.workflowID)
}

// ensureNexus makes the callers' namespace and the endpoint into the
// suite's namespace, once.
func (e *env) ensureNexus(ctx context.Context) error {
	if e.nexusReady {
		return nil
	}
	if err := devstack.EnsureNamespace(ctx, e.top.Stack.TemporalAddress, callers); err != nil {
		return err
	}
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := devstack.EnsureNexusEndpoint(ctx, c, devstack.NexusEndpoint{Name: nexusEndpoint, Namespace: e.top.Stack.Namespace, TaskQueue: nexusEndpoint}); err != nil {
		return err
	}
	e.nexusReady = true
	return nil
}

// runTurnVia is the process team's workflow: it runs a turn through the
// suite's endpoint and returns its result.
func runTurnVia(ctx workflow.Context, in agentflow.RunTurnInput) (agentflow.TurnResult, error) {
	var res agentflow.TurnResult
	err := workflow.NewNexusClient(nexusEndpoint, agentflow.AgentsService).
		ExecuteOperation(ctx, agentflow.RunTurn, in, workflow.NexusOperationOptions{}).Get(ctx, &res)
	return res, err
}

// decideVia decides an approval through the suite's endpoint.
func decideVia(ctx workflow.Context, in agentflow.DecideInput) (agentflow.ApprovalAck, error) {
	var ack agentflow.ApprovalAck
	err := workflow.NewNexusClient(nexusEndpoint, agentflow.AgentsService).
		ExecuteOperation(ctx, agentflow.Decide, in, workflow.NexusOperationOptions{}).Get(ctx, &ack)
	return ack, err
}

// nexusStrikes are a run's faults, struck from the moments the gateway's
// client reads: at the approval, and at the answer's first token after it.
type nexusStrikes struct {
	e               *env
	cc              client.Client // the callers' namespace
	queue           string        // the callers' task queue
	run             *turnRun
	approval, token bool // struck
	done            chan error
}

// at is the client's callback: it starts each strike once, on its own
// goroutine.
func (s *nexusStrikes) at(ctx context.Context) func(moment, *pb.ToolEvent) {
	return func(m moment, call *pb.ToolEvent) {
		switch {
		case m == onApproval && !s.approval:
			s.approval = true
			go func() { s.done <- s.atApproval(ctx, call) }()
		case m == onAnswer && s.approval && !s.token:
			s.token = true
			go func() {
				s.done <- killStreamingWorker(ctx, s.e, strikePoint{workflowID: s.run.workflowID, run: s.run})
			}()
		}
	}
}

// wait waits for the strikes that started, and fails when one did not.
func (s *nexusStrikes) wait(ctx context.Context) error {
	if !s.approval || !s.token {
		return fmt.Errorf("the turn ended without the moments to strike at (approval %v, answer %v)", s.approval, s.token)
	}
	for range 2 {
		select {
		case err := <-s.done:
			if err != nil {
				return fmt.Errorf("strike: %w", err)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// atApproval SIGKILLs the worker that ran the waiting turn's latest
// workflow task, restarts the Temporal server while it is down, starts it
// again, and approves the call through the decide operation.
func (s *nexusStrikes) atApproval(ctx context.Context, call *pb.ToolEvent) error {
	e := s.e
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer c.Close()
	p, what, err := e.turnWorker(ctx, c, s.run.workflowID)
	if err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return err
	}
	if err := e.top.Stack.Restart(ctx, devstack.ServiceTemporal, time.Second); err != nil {
		return err
	}
	if err := p.Start(ctx); err != nil {
		return err
	}
	decided, err := s.cc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: "decide-" + s.run.job, TaskQueue: s.queue}, "DecideApproval",
		agentflow.DecideInput{JobID: s.run.job, CallID: call.GetCallId(), ApprovalID: call.GetApprovalId(), Approved: true, Reason: "checked"})
	if err != nil {
		return fmt.Errorf("start the decision: %w", err)
	}
	var ack agentflow.ApprovalAck
	if err := decided.Get(ctx, &ack); err != nil {
		return fmt.Errorf("decide through the endpoint: %w", err)
	}
	if ack.Outcome != agent.ApprovalApproved {
		return fmt.Errorf("the decision made %q, want %q", ack.Outcome, agent.ApprovalApproved)
	}
	e.note(fmt.Sprintf("%s SIGKILLed (it ran the turn's %s) as the turn waited for approval, the Temporal server restarted meanwhile", p.Name, what))
	return nil
}

// callerOperations checks that the caller's history holds its one
// operation, scheduled, started and completed once, and nothing else of
// it.
func callerOperations(ctx context.Context, cc client.Client, id string) error {
	counts := map[enumspb.EventType]int{}
	it := cc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return fmt.Errorf("the caller's history: %w", err)
		}
		counts[ev.GetEventType()]++
	}
	want := map[enumspb.EventType]int{
		enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED: 1, enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED: 1, enumspb.EVENT_TYPE_NEXUS_OPERATION_COMPLETED: 1,
		enumspb.EVENT_TYPE_NEXUS_OPERATION_FAILED: 0, enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCELED: 0, enumspb.EVENT_TYPE_NEXUS_OPERATION_TIMED_OUT: 0,
	}
	for t, n := range want {
		if counts[t] != n {
			return fmt.Errorf("the caller's history holds %d %s, want %d", counts[t], t, n)
		}
	}
	return nil
}

// checkOneTurn checks that the turn is one chain of runs (no other
// execution of its id), that its histories complete its two model calls
// (the tool call, the answer) and its one tool call once each, and that
// the usage ledger counts the two steps, a step at most twice (the answer
// asked again after the kill).
func (e *env) checkOneTurn(ctx context.Context, job, workflowID string) error {
	c, err := client.DialContext(ctx, client.Options{HostPort: e.top.Stack.TemporalAddress, Namespace: e.top.Stack.Namespace, Logger: quiet{}})
	if err != nil {
		return err
	}
	defer c.Close()
	runs, rec, err := turnRuns(ctx, c, workflowID)
	if err != nil {
		return err
	}
	if rec.models != 2 {
		return fmt.Errorf("the turn's histories complete %d model calls, want 2", rec.models)
	}
	if err := once("tool calls completed", rec.tools, 1); err != nil {
		return err
	}
	query := fmt.Sprintf("WorkflowId = '%s'", workflowID)
	listed := 0
	for try := 0; listed != len(runs); try++ {
		if try > 0 {
			if err := pause(ctx, 200*time.Millisecond); err != nil || try == 50 {
				return errors.Join(fmt.Errorf("%d executions of the turn's id, want its %d runs", listed, len(runs)), err)
			}
		}
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Namespace: e.top.Stack.Namespace, Query: query})
		if err == nil {
			listed = len(resp.GetExecutions())
		}
	}
	var rows, steps int
	if err := e.db.QueryRow(ctx, `SELECT count(*), count(DISTINCT step) FROM usage_ledger WHERE tenant_id = $1 AND job_id = $2`,
		tenant, job).Scan(&rows, &steps); err != nil {
		return fmt.Errorf("read the usage ledger: %w", err)
	}
	if steps != 2 || rows > 3 {
		return fmt.Errorf("%d ledger rows over %d steps, want the 2 model calls, and at most one more for the answer asked again", rows, steps)
	}
	e.note(fmt.Sprintf("the turn: %d run(s), %d usage ledger rows over its 2 steps", len(runs), rows))
	return nil
}
