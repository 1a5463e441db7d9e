package agent

import "encoding/json"

// PublishedToolsActivity is the activity type a team's worker registers
// on its task queue to describe its activities as tools: it takes
// nothing and returns PublishedTools as JSON. Any SDK can serve it; the
// Go API's agentflow.RegisterActivityTools does.
const PublishedToolsActivity = "agentflow.tools"

// PublishedToolsVersion is the version of the shape of PublishedTools.
const PublishedToolsVersion = "agentflow.tools/v1"

// PublishedTools is what a team's worker says of its activities as
// tools: a `kind: activity` entry that names its queue and activity
// type, and writes no description or parameters, takes them from here
// when the catalog is applied.
type PublishedTools struct {
	Version string          `json:"version"`
	Tools   []PublishedTool `json:"tools"`
}

// PublishedTool is one activity as a tool.
type PublishedTool struct {
	// ActivityType is the activity's registered name.
	ActivityType string `json:"activity_type"`
	// Description is what the model is told the tool does.
	Description string `json:"description"`
	// Parameters is the JSON Schema of the activity's one argument.
	Parameters json.RawMessage `json:"parameters"`
}

// Tool is the published tool for activityType, if the worker publishes one.
func (p PublishedTools) Tool(activityType string) (PublishedTool, bool) {
	for _, t := range p.Tools {
		if t.ActivityType == activityType {
			return t, true
		}
	}
	return PublishedTool{}, false
}
