package topology

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/docs"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// testDeployment is the worker deployment of TestDeployNewBuild.
const testDeployment = "agentflow-test"

// TestDeployNewBuild rolls out a new build of the workers while turns run, on
// the real Temporal server, with docs/operations/deploys.md's recipes (go tool
// task deploy:…): twenty turns are in flight on build A (their model calls
// held); build B's worker starts beside A's, is ramped to take every new turn,
// then made current; a conversation's next message moves it to B; the twenty
// then finish on A, each model call made once, and so does an evaluation
// started on A, whose second case starts after B is current; rolling back (A
// current again) sends new turns to A. No turn fails, and the server's records
// say where each ran.
func TestDeployNewBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := startHeldTopology(ctx, t, Options{Workers: 1, Gateways: 1, Env: []string{
		"AGENTFLOW_DEPLOYMENT_NAME=" + testDeployment, "AGENTFLOW_BUILD_ID=build-a"}})
	recipes := deployRecipes(t)
	task := func(args ...string) string {
		t.Helper()
		require.Contains(t, recipes, "go tool task "+args[0], "docs/operations/deploys.md has the recipe")
		out, err := h.task(ctx, []string{"AGENTFLOW_DEPLOYMENT_NAME=" + testDeployment}, args...)
		require.NoError(t, err)
		return out
	}
	drain := func(build string) func() int {
		return func() int {
			out, err := h.task(ctx, []string{"AGENTFLOW_DEPLOYMENT_NAME=" + testDeployment}, "deploy:drain", "BUILD="+build)
			if err != nil {
				t.Log(err)
				return -1
			}
			var n int
			if _, err := fmt.Sscanf(strings.TrimSpace(out[strings.LastIndex(out, "Total:"):]), "Total: %d", &n); err != nil {
				return -1
			}
			return n
		}
	}

	// The first build: its worker is up (healthy means registered), and
	// becomes current.
	task("deploy:current", "BUILD=build-a")
	a := h.Workers[0]

	// A conversation's first message runs on A.
	conv := pb.NewAgentServiceClient(h.Conns[0])
	sent, err := conv.SendMessage(auth(ctx), &pb.SendMessageRequest{SessionId: "s-deploy", Prompt: "quick conv-1", JobId: "conv-1"})
	require.NoError(t, err)
	first := &turn{job: "conv-1", follow: true}
	require.NoError(t, streamGRPC(ctx, h.Conns, first, nil, nil))
	require.Equal(t, "turn/acme/conv-1", sent.GetStreamId())
	h.awaitClosed(ctx, t, first.streamID())
	h.requireOn(ctx, t, first.streamID(), "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED)
	convID := "conv/acme/s-deploy"
	h.requireOn(ctx, t, convID, "build-a", enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE)

	// Twenty turns in flight on A: their model calls wait at the model.
	held := make([]*turn, 20)
	done := make(chan error, len(held))
	for i := range held {
		held[i] = &turn{job: fmt.Sprintf("hold-deploy-%d", i)}
		go func(tr *turn) { done <- streamGRPC(ctx, h.Conns, tr, nil, nil) }(held[i])
	}
	require.Eventually(t, func() bool { return h.Model.Waiting() == len(held) }, 2*time.Minute, 50*time.Millisecond,
		"twenty model calls in flight")
	require.Eventually(t, func() bool { return drain("build-a")() == len(held) }, time.Minute, time.Second,
		"deploy:drain counts the turns pinned to A")

	// An evaluation of two cases, one at a time, starts on A; its first
	// case's model call waits too.
	evals := pb.NewEvalServiceClient(h.Conns[0])
	ev, err := evals.StartEval(auth(ctx), &pb.StartEvalRequest{Dataset: evalDataset, Concurrency: 1, EvalId: "eval-deploy"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return h.Model.Waiting() == len(held)+1 }, time.Minute, 50*time.Millisecond,
		"the evaluation's first case in flight")

	// Build B rolls out: a worker of it starts beside A's, and is ramped
	// to take every new turn.
	b, err := h.AddWorker(ctx, "AGENTFLOW_BUILD_ID=build-b")
	require.NoError(t, err)
	task("deploy:ramp", "BUILD=build-b", "PERCENT=100")
	h.requireOn(ctx, t, h.runQuick(ctx, t, "quick-ramped"), "build-b", enumspb.VERSIONING_BEHAVIOR_PINNED)

	// B becomes current: new turns run on it, and the conversation moves
	// to it with its next message.
	task("deploy:current", "BUILD=build-b")
	status := task("deploy:status")
	t.Logf("deploy:status prints:\n%s", status)
	require.Contains(t, status, "build-b")
	h.requireOn(ctx, t, h.runQuick(ctx, t, "quick-on-b"), "build-b", enumspb.VERSIONING_BEHAVIOR_PINNED)
	_, err = conv.SendMessage(auth(ctx), &pb.SendMessageRequest{SessionId: "s-deploy", Prompt: "quick conv-2", JobId: "conv-2"})
	require.NoError(t, err)
	second := &turn{job: "conv-2", follow: true}
	require.NoError(t, streamGRPC(ctx, h.Conns, second, nil, nil))
	h.awaitClosed(ctx, t, second.streamID())
	h.requireOn(ctx, t, second.streamID(), "build-b", enumspb.VERSIONING_BEHAVIOR_PINNED)
	d, err := h.Client.DescribeWorkflowExecution(ctx, convID, "")
	require.NoError(t, err)
	vi := d.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(t, enumspb.VERSIONING_BEHAVIOR_AUTO_UPGRADE, vi.GetBehavior())
	require.Equal(t, "build-b", vi.GetDeploymentVersion().GetBuildId(), "the conversation moved to B")

	// The twenty finish on A, each with the one model call it began; so
	// does the evaluation, whose second case starts now, on A, as its
	// parent is pinned there.
	require.Equal(t, len(held)+2, drain("build-a")(), "A's turns and the evaluation with its first case still run")
	h.Model.Release()
	for range held {
		require.NoError(t, <-done)
	}
	run, err := evals.GetEval(auth(ctx), &pb.GetEvalRequest{EvalId: ev.GetEvalId(), Wait: true})
	require.NoError(t, err)
	require.Equal(t, "completed", run.GetStatus(), "%v", run)
	h.requireOn(ctx, t, ev.GetWorkflowId(), "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED)
	for _, c := range []string{"first", "second"} {
		h.requireOn(ctx, t, fmt.Sprintf("turn/acme/%s-v%d-%s", ev.GetEvalId(), ev.GetVersions()[0], c), "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED)
	}
	for _, tr := range held {
		require.Equal(t, pb.Status_STATUS_COMPLETED, tr.status, tr.job)
		require.Equal(t, tr.want(), strings.TrimSpace(tr.text.String()), tr.job)
		require.Equal(t, 1, h.Model.Calls(tr.job), "model calls of %s", tr.job)
		h.awaitClosed(ctx, t, tr.streamID())
		h.requireOn(ctx, t, tr.streamID(), "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED)
		h.requireRanOn(ctx, t, tr.streamID(), a)
	}
	require.Eventually(t, func() bool { return drain("build-a")() == 0 }, time.Minute, time.Second, "A drained")

	// Rolling back: A is current again, and new turns run on it.
	task("deploy:current", "BUILD=build-a")
	back := h.runQuick(ctx, t, "quick-rolled-back")
	h.requireOn(ctx, t, back, "build-a", enumspb.VERSIONING_BEHAVIOR_PINNED)
	h.requireRanOn(ctx, t, back, a)
	require.True(t, b.Running(), "B's worker stays up; it only gets no new turns")

	// A worker whose deployment name the server (or the SDK, before it)
	// refuses does not start: it never says ready, and its log says why.
	for name, want := range map[string]string{
		"__agentflow":    `the Temporal server refuses the name: WorkerDeploymentName cannot start with '__'`,
		"agentflow.prod": `worker deployment name contains reserved separator '.'`,
	} {
		p, err := h.AddWorker(ctx, "AGENTFLOW_DEPLOYMENT_NAME="+name)
		require.ErrorContains(t, err, "exited at start", name)
		require.False(t, p.Running())
		log, err := os.ReadFile(p.Log)
		require.NoError(t, err)
		require.Contains(t, string(log), `worker: worker deployment "`+name+`", build "build-a" (AGENTFLOW_DEPLOYMENT_NAME, AGENTFLOW_BUILD_ID): `+want, name)
	}
}

// evalDataset is the evaluation of TestDeployNewBuild: a case held at the
// model, then one answered at once.
const evalDataset = `
name: deploy
agent: echo
cases:
  - id: first
    prompt: hold eval-first
    expect: {answer: {contains: ["answer to eval-first"]}}
  - id: second
    prompt: quick eval-second
    expect: {answer: {contains: ["answer to eval-second"]}}
`

// requireOn checks where a workflow ran: the server's versioning info
// (its behavior and build), and the build every workflow task of its
// history was completed by.
func (h *heldTopology) requireOn(ctx context.Context, t *testing.T, workflowID, build string, behavior enumspb.VersioningBehavior) {
	t.Helper()
	d, err := h.Client.DescribeWorkflowExecution(ctx, workflowID, "")
	require.NoError(t, err)
	vi := d.GetWorkflowExecutionInfo().GetVersioningInfo()
	require.Equal(t, behavior, vi.GetBehavior(), "versioning behavior of %s", workflowID)
	if behavior == enumspb.VERSIONING_BEHAVIOR_PINNED {
		require.Equal(t, build, vi.GetDeploymentVersion().GetBuildId(), "build of %s", workflowID)
	}
	tasks := 0
	for _, ev := range h.history(ctx, t, workflowID) {
		if a := ev.GetWorkflowTaskCompletedEventAttributes(); a != nil {
			tasks++
			require.Equal(t, testDeployment, a.GetDeploymentVersion().GetDeploymentName(), "workflow task %d of %s", ev.GetEventId(), workflowID)
			require.Equal(t, build, a.GetDeploymentVersion().GetBuildId(), "workflow task %d of %s", ev.GetEventId(), workflowID)
			require.Equal(t, behavior, a.GetVersioningBehavior(), "workflow task %d of %s", ev.GetEventId(), workflowID)
		}
	}
	require.NotZero(t, tasks, "workflow tasks of %s", workflowID)
}

// requireRanOn checks that every workflow task and activity of a
// workflow ran on the worker process p. A local activity (a model call,
// by default) runs inside its workflow task. An activity may have run
// more than once — a loaded machine can miss a heartbeat (CI did, an
// AwaitModel's) — and its retry must run on p too; that the model was
// called once is the callers' check (Model.Calls).
func (h *heldTopology) requireRanOn(ctx context.Context, t *testing.T, workflowID string, p *Process) {
	t.Helper()
	n := 0
	for _, ev := range h.history(ctx, t, workflowID) {
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil {
			n++
			require.Equal(t, p.PID(), pidOf(a.GetIdentity()), "workflow task %d of %s ran on %s", ev.GetEventId(), workflowID, p.Name)
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			n++
			require.Equal(t, p.PID(), pidOf(a.GetIdentity()), "activity %d of %s ran on %s", ev.GetEventId(), workflowID, p.Name)
		}
	}
	require.NotZero(t, n, "tasks of %s", workflowID)
}

// ranOn reports whether every workflow task and activity of a workflow
// ran on the worker process p.
func (h *heldTopology) ranOn(ctx context.Context, t *testing.T, workflowID string, p *Process) bool {
	t.Helper()
	for _, ev := range h.history(ctx, t, workflowID) {
		if a := ev.GetWorkflowTaskStartedEventAttributes(); a != nil && pidOf(a.GetIdentity()) != p.PID() {
			return false
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil && pidOf(a.GetIdentity()) != p.PID() {
			return false
		}
	}
	return true
}

// deployRecipes is docs/operations/deploys.md.
func deployRecipes(t *testing.T) string {
	t.Helper()
	page, err := docs.Section("operations/deploys.md", "Deploys")
	require.NoError(t, err)
	return page
}
