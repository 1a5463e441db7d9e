package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/nexusdoor"
	"github.com/agentflow/agentflow/internal/testserver"
)

// nexusScript answers "hello <id>" at once, without a tool.
const nexusScript = `
rules:
  - name: hello
    when: {user: '^hello (?P<id>[a-z0-9]+)$'}
    reply: {text: 'done ${id}'}
`

const nexusCatalog = `
tenant: demo
default_agent: greeter
agents:
  - id: greeter
    model: openai:gpt-4o-mini
    limits: {max_iterations: 1, turn_timeout_sec: 120}
`

// nexusCallers is the namespace of the workflow that calls the turn
// through the endpoint: a process team's, not agentflow's.
const nexusCallers = "teams"

// nexusCall is what both caller workflows are given: the turn's job id
// and prompt.
type nexusCall struct {
	JobID  string `json:"job_id"`
	Prompt string `json:"prompt"`
}

// BenchmarkNexusTurn compares a turn run by a caller workflow through
// the Nexus service agentflow.v1.Agents (operation run_turn, on an
// endpoint bound to tenant demo, the caller in namespace teams) with
// the same turn run by a caller workflow in agentflow's namespace as a
// child workflow (AgentTurn by name, as examples/process does). Each
// is timed from the caller's start to its result, in this process: 40
// of each, alternated, one at a time, after four of each to warm up. It
// reports each path's p50 and p99, the Nexus path's p50 over the
// child's, the history events of one caller workflow of each, and, from
// the histories' timestamps, the p50 of how long the turn took to be
// started once the caller asked for it and how long its result took to
// reach the caller's history once the turn closed; then each path's
// throughput, 96 callers 16 at a time.
func BenchmarkNexusTurn(b *testing.B) {
	ctx := context.Background()
	id := strings.ToLower(testserver.RandomID())
	endpoint := "bench-agents-" + id
	srv := testserver.Start(b, testserver.Options{Script: nexusScript, Catalogs: []string{nexusCatalog}, Logger: zap.NewNop(),
		NexusBindings: []nexusdoor.Binding{{TaskQueue: endpoint, TenantID: "demo", Roles: []string{"user"}, Name: "bench-process"}}})
	must(b, devstack.EnsureNamespace(ctx, srv.Address, nexusCallers))
	must(b, devstack.EnsureNexusEndpoint(ctx, srv.Client(), devstack.NexusEndpoint{Name: endpoint, Namespace: srv.Namespace, TaskQueue: endpoint}))

	// The child path's caller, in agentflow's namespace.
	childQueue := "bench-child-" + id
	cw := worker.New(srv.Client(), childQueue, worker.Options{})
	cw.RegisterWorkflowWithOptions(viaChild(srv.TaskQueue), workflow.RegisterOptions{Name: "ViaChild"})
	must(b, cw.Start())
	defer cw.Stop()

	// The Nexus path's caller, in the callers' namespace.
	cc, err := client.Dial(client.Options{HostPort: srv.Address, Namespace: nexusCallers, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	must(b, err)
	defer cc.Close()
	nexusQueue := "bench-nexus-" + id
	nw := worker.New(cc, nexusQueue, worker.Options{})
	nw.RegisterWorkflowWithOptions(viaNexus(endpoint), workflow.RegisterOptions{Name: "ViaNexus"})
	must(b, nw.Start())
	defer nw.Stop()

	paths := []struct {
		name, workflow, queue string
		c                     client.Client
	}{
		{"child", "ViaChild", childQueue, srv.Client()},
		{"nexus", "ViaNexus", nexusQueue, cc},
	}
	// turn runs one caller of path p and returns how long it took, with
	// its workflow id and the turn's.
	turn := func(p int, i string) (time.Duration, callerRun, error) {
		job := paths[p].name + i + strings.ToLower(testserver.RandomID())
		start := time.Now()
		run, err := paths[p].c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: paths[p].queue}, paths[p].workflow,
			nexusCall{JobID: "nexus-bench-" + job, Prompt: "hello " + job})
		if err != nil {
			return 0, callerRun{}, err
		}
		var res agentflow.TurnResult
		if err := run.Get(ctx, &res); err != nil {
			return 0, callerRun{}, err
		}
		took := time.Since(start)
		if res.Status != agent.StatusCompleted || res.Output != "done "+job {
			return 0, callerRun{}, fmt.Errorf("%s turn %s: %s %q %+v", paths[p].name, job, res.Status, res.Output, res.Error)
		}
		return took, callerRun{run.GetID(), contract.TurnWorkflowID("demo", "nexus-bench-"+job)}, nil
	}
	const n = 40
	for b.Loop() {
		took := map[string][]time.Duration{}
		ran := map[string][]callerRun{}
		for i := range n + 4 {
			for p := range paths {
				d, r, err := turn(p, fmt.Sprint(i))
				must(b, err)
				if i >= 4 { // the first few warm both paths
					took[paths[p].name] = append(took[paths[p].name], d)
					ran[paths[p].name] = append(ran[paths[p].name], r)
				}
			}
		}
		for p, path := range paths {
			b.ReportMetric(ms(percentile(took[path.name], 0.5)), path.name+"-p50-ms")
			b.ReportMetric(ms(percentile(took[path.name], 0.99)), path.name+"-p99-ms")
			reportPhases(ctx, b, path.name, path.c, srv.Client(), ran[path.name])
			// Throughput: callers 16 at a time, the paths in turn.
			b.ReportMetric(throughput(b, 96, 16, func(i int) error {
				_, _, err := turn(p, fmt.Sprintf("c%d", i))
				return err
			}), path.name+"-turns/s")
		}
		b.ReportMetric(float64(percentile(took["nexus"], 0.5))/float64(percentile(took["child"], 0.5)), "nexus/child-p50")
	}
}

// reportPhases reports where the time of a path's callers went, read
// from the histories' timestamps after the timed runs, and the events of
// one caller.
func reportPhases(ctx context.Context, b *testing.B, name string, c, turns client.Client, ran []callerRun) {
	var started, back []time.Duration
	var events []string
	for _, r := range ran {
		ph := phasesOf(ctx, b, c, turns, r)
		started, back, events = append(started, ph.started), append(back, ph.back), ph.events
	}
	b.ReportMetric(ms(percentile(started, 0.5)), name+"-started-p50-ms")
	b.ReportMetric(ms(percentile(back, 0.5)), name+"-back-p50-ms")
	b.ReportMetric(float64(len(events)), name+"-caller-events")
	b.Logf("%s caller: %d events: %s", name, len(events), strings.Join(events, " "))
}

// throughput runs total callers, conc at a time, and returns how many
// completed a second.
func throughput(b *testing.B, total, conc int, call func(i int) error) float64 {
	sem := make(chan struct{}, conc)
	errs := make([]error, total)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range total {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = call(i)
		})
	}
	wg.Wait()
	took := time.Since(start)
	must(b, errors.Join(errs...))
	return float64(total) / took.Seconds()
}

// callerRun is one caller workflow and the turn it ran.
type callerRun struct{ caller, turn string }

// phases is what a caller's history says of its turn: how long the
// turn took to be started once the caller asked for it (the child's
// initiated to started, the operation's scheduled to started), how long
// its result took to be recorded in the caller once the turn closed,
// and the caller's event types, in order.
type phases struct {
	started, back time.Duration
	events        []string
}

func phasesOf(ctx context.Context, b *testing.B, c, turns client.Client, r callerRun) phases {
	b.Helper()
	var ph phases
	var asked, started, recorded time.Time
	it := c.GetWorkflowHistory(ctx, r.caller, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		must(b, err)
		ph.events = append(ph.events, strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_"))
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED, enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED:
			asked = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED:
			started = ev.GetEventTime().AsTime()
		case enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_NEXUS_OPERATION_COMPLETED:
			recorded = ev.GetEventTime().AsTime()
		}
	}
	d, err := turns.DescribeWorkflowExecution(ctx, r.turn, "")
	must(b, err)
	closed := d.GetWorkflowExecutionInfo().GetCloseTime().AsTime()
	if asked.IsZero() || started.IsZero() || recorded.IsZero() || closed.IsZero() {
		b.Fatalf("caller %s of turn %s: events %v", r.caller, r.turn, ph.events)
	}
	ph.started, ph.back = started.Sub(asked), recorded.Sub(closed)
	return ph
}

// viaChild is the caller that runs the turn as a child workflow of
// agentflow's queue, by type name and with the request as JSON.
func viaChild(turnQueue string) func(workflow.Context, nexusCall) (agentflow.TurnResult, error) {
	return func(ctx workflow.Context, in nexusCall) (agentflow.TurnResult, error) {
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:          contract.TurnWorkflowID("demo", in.JobID),
			WorkflowTaskTimeout: contract.TurnTaskTimeout,
			TaskQueue:           turnQueue,
			ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_ABANDON,
		})
		var res agentflow.TurnResult
		err := workflow.ExecuteChildWorkflow(cctx, contract.AgentTurn, map[string]any{
			"tenant_id": "demo", "job_id": in.JobID, "prompt": in.Prompt,
		}).Get(ctx, &res)
		return res, err
	}
}

// viaNexus is the caller that runs the turn through endpoint's run_turn.
func viaNexus(endpoint string) func(workflow.Context, nexusCall) (agentflow.TurnResult, error) {
	return func(ctx workflow.Context, in nexusCall) (agentflow.TurnResult, error) {
		var res agentflow.TurnResult
		err := workflow.NewNexusClient(endpoint, agentflow.AgentsService).
			ExecuteOperation(ctx, agentflow.RunTurn, agentflow.RunTurnInput{Prompt: in.Prompt, JobID: in.JobID}, workflow.NexusOperationOptions{}).
			Get(ctx, &res)
		return res, err
	}
}
