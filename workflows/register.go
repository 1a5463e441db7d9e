package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/contract"
)

// Registry is where workflows are registered: a worker, a replayer or a
// test environment.
type Registry interface {
	RegisterWorkflowWithOptions(w any, options workflow.RegisterOptions)
}

// Register registers the workflows under their contract names, each with
// the versioning behavior a versioned worker (Worker Deployment
// Versioning) declares for it; an unversioned worker ignores them.
//
//   - AgentTurn is Pinned: a turn runs to its end on the build that
//     started it, so a change to the turn's code needs no GetVersion gate
//     for the turns in flight during a deploy, and a turn never replays
//     on code it did not start with. The builds' workers stay until their
//     turns have drained.
//   - Conversation is AutoUpgrade: a session lives for days, and pinning
//     it would keep every old build's workers up as long. It moves to the
//     deployment's current build at its next workflow task, so the new
//     build replays its current run: a change to Conversation's code keeps
//     that history replaying (a GetVersion gate). Its continue-as-new is
//     where a change is safest, as the new run starts with no history to
//     replay; the turns it starts are pinned to the build current then.
//   - Evaluation is Pinned: an evaluation compares agent versions, and its
//     turns (children, which start on their parent's pinned build) must
//     all run on one build for the comparison to mean anything. It ends
//     when its cases do.
//   - Delivery is Pinned: it pushes one ended turn's result and ends.
//   - Retention is Pinned: one sweep, which ends when its activity does.
//   - Ingest is Pinned: a run stores its pages and ends, or continues as
//     new; a page is an activity, retried wherever it runs.
//   - MemoryExtract is Pinned: one activity, and it ends.
func Register(r Registry) {
	r.RegisterWorkflowWithOptions(AgentTurn, workflow.RegisterOptions{Name: contract.AgentTurn, VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(Conversation, workflow.RegisterOptions{Name: contract.Conversation, VersioningBehavior: workflow.VersioningBehaviorAutoUpgrade})
	r.RegisterWorkflowWithOptions(Evaluation, workflow.RegisterOptions{Name: contract.Evaluation, VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(Delivery, workflow.RegisterOptions{Name: contract.Delivery, VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(Retention, workflow.RegisterOptions{Name: contract.Retention, VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(Ingest, workflow.RegisterOptions{Name: contract.Ingest, VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(MemoryExtract, workflow.RegisterOptions{Name: contract.MemoryExtract, VersioningBehavior: workflow.VersioningBehaviorPinned})
	r.RegisterWorkflowWithOptions(DescribeTools, workflow.RegisterOptions{Name: contract.DescribeTools, VersioningBehavior: workflow.VersioningBehaviorPinned})
}
