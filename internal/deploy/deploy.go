package deploy

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The settings that name a worker's version (server.Config.Deployment).
const (
	EnvDeploymentName = "AGENTFLOW_DEPLOYMENT_NAME"
	EnvBuildID        = "AGENTFLOW_BUILD_ID"
)

// Version names a worker's Temporal worker deployment and its build
// (Worker Deployment Versioning). The server routes each new workflow to
// the deployment's current build (or, by a ramp's percentage, to its
// ramping build); a workflow whose type is Pinned (AgentTurn, Evaluation:
// workflows.Register) stays on the build that started it, one that is
// AutoUpgrade (Conversation) moves to the current build at its next
// workflow task. A build starts getting tasks once an operator makes it
// current or ramping (`temporal worker deployment set-current-version`,
// docs/operations/deploys.md).
type Version struct {
	// Name is the deployment: the same for every build of one fleet.
	Name string
	// BuildID is this build's id, e.g. the image tag or the commit.
	BuildID string
}

// On reports whether the worker is versioned.
func (v Version) On() bool { return v.Name != "" }

// Validate wants both names or neither. What a name may hold is the
// Temporal server's to say (its rules change between versions): Check
// asks it.
func (v Version) Validate() error {
	switch {
	case v.Name == "" && v.BuildID != "":
		return fmt.Errorf("%s is set but %s is not: a versioned worker names its deployment and its build", EnvBuildID, EnvDeploymentName)
	case v.Name != "" && v.BuildID == "":
		return fmt.Errorf("%s is set but %s is not: a versioned worker names its deployment and its build", EnvDeploymentName, EnvBuildID)
	}
	return nil
}

// String is "name:build", as the server's TemporalWorkerDeploymentVersion
// search attribute writes a version.
func (v Version) String() string { return v.Name + ":" + v.BuildID }

// Build is what the worker's results record as their build: its
// version, or "" when it is unversioned.
func (v Version) Build() string {
	if !v.On() {
		return ""
	}
	return v.String()
}

// WorkerOptions are the worker's deployment options: none when
// unversioned. A workflow type registered without a behavior of its own
// is Pinned: it never meets code of another build mid-run.
func (v Version) WorkerOptions() worker.DeploymentOptions {
	if !v.On() {
		return worker.DeploymentOptions{}
	}
	return worker.DeploymentOptions{
		UseVersioning:             true,
		Version:                   worker.WorkerDeploymentVersion{DeploymentName: v.Name, BuildID: v.BuildID},
		DefaultVersioningBehavior: workflow.VersioningBehaviorPinned,
	}
}

// Check asks the server whether it takes a versioned worker's deployment
// and build names, before the worker polls: a poll with a name the server
// refuses is retried for ever, and the worker would look up while no
// task could reach it. Both names are checked by describing them; one
// that does not exist yet is fine (the first poll creates it). namespace
// is the worker's, for the error.
func Check(ctx context.Context, c client.Client, v Version, namespace string) error {
	h := c.WorkerDeploymentClient().GetHandle(v.Name)
	_, err := h.Describe(ctx, client.WorkerDeploymentDescribeOptions{})
	if err == nil || isNotFound(err) {
		_, err = h.DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: v.BuildID})
	}
	if err == nil || isNotFound(err) {
		return nil
	}
	what := fmt.Sprintf("worker deployment %q, build %q (%s, %s)", v.Name, v.BuildID, EnvDeploymentName, EnvBuildID)
	var invalid *serviceerror.InvalidArgument
	var denied *serviceerror.PermissionDenied
	switch {
	case errors.As(err, &denied):
		return fmt.Errorf("%s: the Temporal server refuses worker deployments in namespace %q: %s (its dynamic config needs system.enableDeploymentVersions and frontend.workerVersioningWorkflowAPIs: deploy/temporal-dynamicconfig.yaml)",
			what, namespace, denied.Message)
	case errors.As(err, &invalid):
		return fmt.Errorf("%s: the Temporal server refuses the name: %s", what, invalid.Message)
	case err != nil && !isServiceError(err):
		// The SDK's own checks (a name with its separator in it).
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("check %s with the Temporal server: %w", what, err)
}

func isNotFound(err error) bool {
	var nf *serviceerror.NotFound
	return errors.As(err, &nf)
}

// isServiceError reports whether err came from the server.
func isServiceError(err error) bool {
	var se serviceerror.ServiceError
	return errors.As(err, &se)
}

// Registration tracks whether the server has registered a worker's build
// with its task queue: until it has, no task can reach the worker and the
// build cannot be made current, so the worker is not ready. Its zero
// value has seen no registration; it is safe for concurrent use.
type Registration struct {
	done atomic.Bool
}

// Check describes the build and looks for the task queue among its
// workflow and activity task queues; once found it is not asked again.
func (r *Registration) Check(ctx context.Context, c client.Client, v Version, taskQueue string) error {
	if r.done.Load() {
		return nil
	}
	desc, err := c.WorkerDeploymentClient().GetHandle(v.Name).DescribeVersion(ctx, client.WorkerDeploymentDescribeVersionOptions{BuildID: v.BuildID})
	if isNotFound(err) {
		return fmt.Errorf("build %s is not registered with the Temporal server yet: its task queue has not been polled", v)
	}
	if err != nil {
		return err
	}
	seen := map[client.TaskQueueType]bool{}
	for _, tq := range desc.Info.TaskQueuesInfos {
		if tq.Name == taskQueue {
			seen[tq.Type] = true
		}
	}
	if !seen[client.TaskQueueTypeWorkflow] || !seen[client.TaskQueueTypeActivity] {
		return fmt.Errorf("build %s is registered, but not yet with the workflows and activities of task queue %q", v, taskQueue)
	}
	r.done.Store(true)
	return nil
}
