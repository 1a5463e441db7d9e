package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/contract"
)

// TestLocalCallHandedOff: a local model call that streams for longer than
// the hand-off (a story of about six seconds) returns HandedOff after a
// second and runs on in the worker; the turn's next task starts an
// AwaitModel activity, which the same worker takes (eager execution) and
// which answers with the call's result. The model is asked once, the
// client's stream is live and whole across the hand-off, and the history,
// recorded as turn_local_handed_off, replays.
func TestLocalCallHandedOff(t *testing.T) {
	e, req, id := localStory(t, 100)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, reads := e.startFollowed(ctx, t, req)
	requireLog(t, events, id, storyText)
	require.Zero(t, reads, "every event came live, across the hand-off")
	res, err := e.result(id)
	require.NoError(t, err)
	require.Equal(t, storyText, res.Output)
	require.Len(t, e.Model.Requests(), 1, "the model was asked once")

	markers, awaits := 0, 0
	var markerBy, awaitBy string
	taskBy := ""
	scheduled := map[int64]string{}
	for _, ev := range e.history(id) {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			taskBy = ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			var data localActivityMarker
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(ev.GetMarkerRecordedEventAttributes().GetDetails()["data"], &data))
			if data.ActivityType == contract.CallModel {
				markers++
				require.True(t, markerHandedOff(t, ev), "the local call handed off")
				require.EqualValues(t, 1, data.Attempt)
				markerBy = taskBy
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			require.Equal(t, contract.AwaitModel, scheduled[a.GetScheduledEventId()], "the only activity")
			require.EqualValues(t, 1, a.GetAttempt())
			awaits++
			awaitBy = a.GetIdentity()
		}
	}
	require.Equal(t, 1, markers, "one local call")
	require.Equal(t, 1, awaits, "one AwaitModel")
	require.Equal(t, markerBy, awaitBy, "the worker that ran the call took it over")
	e.replay(id, "turn_local_handed_off")
}

// markerHandedOff reports whether a CallModel marker records a local call
// handed off to an AwaitModel activity.
func markerHandedOff(t *testing.T, ev *historypb.HistoryEvent) bool {
	t.Helper()
	var res contract.CallModelResult
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(ev.GetMarkerRecordedEventAttributes().GetDetails()["result"], &res),
		"event %d: a CallModel marker's result", ev.GetEventId())
	return res.HandedOff
}
