package agentflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/internal/agent"
)

// PublishedTools is what a team's worker says of its activities as an
// agent's tools, the result of its agentflow.tools activity
// (PublishedToolsActivity): a documented JSON shape, so that a worker in
// any SDK can publish it.
type PublishedTools = agent.PublishedTools

// PublishedToolsActivity is the activity type that publishes them.
const PublishedToolsActivity = agent.PublishedToolsActivity

// ActivityTool is an activity of your worker described as an agent's
// tool: its activity type, what the model is told it does, and the JSON
// Schema of its one argument, made from the argument's Go type.
type ActivityTool struct {
	published agent.PublishedTool
	fn        any
}

// NewActivityTool describes fn, registered as activityType, as a tool.
// The schema of its argument is In's (github.com/google/jsonschema-go:
// exported fields by their json names, `jsonschema:"…"` tags for
// descriptions), as Func's is. It panics on an In without a schema, a
// programming error found at start.
func NewActivityTool[In, Out any](activityType, description string, fn func(context.Context, In) (Out, error)) ActivityTool {
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("agentflow.NewActivityTool %s: the schema of its input: %v", activityType, err))
	}
	params, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("agentflow.NewActivityTool %s: the schema of its input: %v", activityType, err))
	}
	return ActivityTool{fn: fn, published: agent.PublishedTool{ActivityType: activityType, Description: description, Parameters: params}}
}

// RegisterActivityTools registers each tool's function on w as an
// activity of its type, and the agentflow.tools activity that publishes
// their descriptions: a catalog's `kind: activity` entry that names the
// worker's task queue and an activity type, and writes no description or
// parameters, takes them from it when the catalog is applied.
func RegisterActivityTools(w worker.Registry, tools ...ActivityTool) {
	published := PublishedTools{Version: agent.PublishedToolsVersion, Tools: []agent.PublishedTool{}}
	for _, t := range tools {
		w.RegisterActivityWithOptions(t.fn, activity.RegisterOptions{Name: t.published.ActivityType})
		published.Tools = append(published.Tools, t.published)
	}
	w.RegisterActivityWithOptions(func(context.Context) (PublishedTools, error) { return published, nil },
		activity.RegisterOptions{Name: PublishedToolsActivity})
}
