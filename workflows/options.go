package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
)

// Activity options. Local activities are for the cheap steps (a few
// database reads and writes); the model and tools are regular activities
// because they may run long and must survive the worker, unless the agent
// or the tool asks for local ones (agent.ModelLocal, agent.ToolLocal; a
// model call's reply is stored as it ends, so a call run again by another
// worker takes it). Each function returns a new value, so that no caller
// shares a retry policy.

func localOptions() workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    200 * time.Millisecond,
			BackoffCoefficient: 2,
			MaximumInterval:    5 * time.Second,
			MaximumAttempts:    5,
		},
	}
}

// modelOptions are a CallModel's: a streaming call heartbeats with every
// batch and at least every second, so a lost worker is noticed within
// modelHeartbeat; an attempt that runs over the agent's model
// timeout times out and is retried, as one whose worker was lost is.
func modelOptions(limits agent.Limits, summary string) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: limits.ModelTimeout(),
		HeartbeatTimeout:    modelHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    30 * time.Second,
			MaximumAttempts:    modelAttempts,
		},
		Summary: summary,
	}
}

// modelAttempts is how many attempts a CallModel activity makes at most.
const modelAttempts = 6

// observeOptions are ObserveEvents's: the worker's Event hooks are
// quick, and the turn's close waits for them, so a few short attempts.
func observeOptions() workflow.ActivityOptions {
	return workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: 5 * time.Second, MaximumAttempts: 3,
		},
		Summary: "event hooks",
	}
}

func toolRetry() *temporal.RetryPolicy {
	return &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    10 * time.Second,
		MaximumAttempts:    3,
	}
}

// toolTimeout is a call's start-to-close timeout: the tool entry's own
// (agent.Tool.TimeoutSec, for every kind; LoadAgent pinned it under the
// operator's limit), no longer than the turn's timeout (turn). A long call is
// not a blind one: ExecuteTool heartbeats every second whatever the tool
// does (a Job's poll included), so a lost worker is noticed within
// toolHeartbeat, not at the end of the call's timeout. Activity options
// are not part of what replay compares, so recorded turns replay as they
// were.
func toolTimeout(spec agent.Tool, turn time.Duration) time.Duration {
	return spec.CallTimeout(turn)
}

const (
	// toolHeartbeat is a tool call's heartbeat timeout: ExecuteTool
	// heartbeats every second whatever it does, and the worker sends each
	// at once (server.heartbeatThrottle), so a lost worker is noticed
	// within 3 s and a live one has 2 s to spare; a cancellation reaches
	// the call with the next heartbeat. Activity options are not part of
	// what replay compares (an activity's id and type are), so runs
	// recorded with other timeouts replay as they were.
	toolHeartbeat = 3 * time.Second
	// modelHeartbeat is a model call's: CallModel heartbeats every second
	// from its start to its end, whatever stage it is in, so a lost worker
	// is noticed within 3 s, as a tool call's is.
	modelHeartbeat = 3 * time.Second
	// A local tool's call runs inside the workflow task; the bound keeps a
	// misjudged tool from holding the task (the worker heartbeats it).
	localToolTimeout = 10 * time.Second
)
