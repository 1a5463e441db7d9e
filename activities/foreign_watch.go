package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/eventlog"
)

// watchEvery is how often WatchForeign reads the call's heartbeat: the
// pace at which a person watching the turn sees its progress.
const watchEvery = time.Second

// WatchForeign shows what a team's activity says of its progress while
// the turn waits on it (an activity tool whose entry sets heartbeat_sec):
// Temporal keeps the details of the activity's last heartbeat, which no
// workflow can read, so this activity reads them from the turn's
// description every second and reports each new one as the call's
// progress (tool_progress), with the attempt when it is not the first.
// The turn cancels it once the call has ended; a read that fails is
// tried again at the next tick.
func (a *Activities) WatchForeign(ctx context.Context, in contract.WatchForeignInput) error {
	ctx = withToolLog(ctx, in.Tool)
	defer callHeartbeats(ctx)()
	info := activity.GetInfo(ctx)
	progress := eventlog.StartProgress(ctx, a.sinks(ctx, ""), info.WorkflowExecution.ID, in.Tool.Call)
	defer progress.Close()
	last := ""
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	for {
		if said := a.foreignProgress(ctx, info.WorkflowExecution.ID, info.WorkflowExecution.RunID, in.ActivityID); said != "" && said != last {
			progress.Report(said)
			last = said
		}
		select {
		case <-ctx.Done():
			return nil // the call has ended, or the turn
		case <-tick.C:
		}
	}
}

// foreignProgress is what the pending activity activityID of run runID
// last said in a heartbeat: its first detail, as text (a string as it
// is, anything else as JSON); "" when it said nothing, or the read
// failed.
func (a *Activities) foreignProgress(ctx context.Context, workflowID, runID, activityID string) string {
	d, err := a.temporal.DescribeWorkflowExecution(ctx, workflowID, runID)
	if err != nil {
		return ""
	}
	for _, p := range d.GetPendingActivities() {
		if p.GetActivityId() != activityID {
			continue
		}
		details := p.GetHeartbeatDetails().GetPayloads()
		if len(details) == 0 {
			return ""
		}
		var v any
		if err := converter.GetDefaultDataConverter().FromPayload(details[0], &v); err != nil {
			return ""
		}
		said, ok := v.(string)
		if !ok {
			b, err := json.Marshal(v)
			if err != nil {
				return ""
			}
			said = string(b)
		}
		if n := p.GetAttempt(); n > 1 {
			said = fmt.Sprintf("%s (attempt %d)", said, n)
		}
		return said
	}
	return ""
}
