package activities

import (
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
)

// Register registers every activity under its public name.
func (a *Activities) Register(r worker.ActivityRegistry) {
	for name, fn := range map[string]any{
		RouteName:       a.Route,
		LoadAgentName:   a.LoadAgent,
		CallModelName:   a.CallModel,
		ExecuteToolName: a.ExecuteTool,
		SaveResultName:  a.SaveResult,

		RecordApprovalName: a.RecordApproval,
	} {
		r.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
}
