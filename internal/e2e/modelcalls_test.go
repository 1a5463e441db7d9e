package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/contract"
)

// localActivityMarker is the SDK's record of a local activity in the
// "data" details of its LocalActivity marker (the SDK's
// localActivityMarkerData): the attempt that ended it and, when that
// attempt failed and the next waits on a workflow timer, the wait.
type localActivityMarker struct {
	ActivityType string
	Attempt      int32
	Backoff      time.Duration
}

// modelCallAttempts are the attempts each CallModel of a run made, in the
// order the calls were started, whether a call ran as a regular activity
// or as a local one. A regular call's ActivityTaskStarted event holds the
// attempt that ended it. A local call's marker is recorded once per
// outcome with the attempt that ended it: retries that the worker runs
// inside the workflow task leave no other trace, and one that waits on a
// timer (a backoff longer than the workflow task timeout) ends this
// marker with its failure and Backoff and continues the call's numbering
// in the next marker, which this takes as the same call. A turn's model
// calls run one after another, so the next CallModel marker is that
// retry.
func modelCallAttempts(t *testing.T, events []*historypb.HistoryEvent) []int32 {
	t.Helper()
	var out []int32
	scheduled := map[int64]int{}
	retrying := false
	for _, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			if ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName() == contract.CallModel {
				scheduled[ev.GetEventId()] = len(out)
				out = append(out, 0)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if i, ok := scheduled[a.GetScheduledEventId()]; ok {
				out[i] = a.GetAttempt()
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			m := ev.GetMarkerRecordedEventAttributes()
			if m.GetMarkerName() != "LocalActivity" {
				continue // GetVersion's and side effects' markers
			}
			var data localActivityMarker
			require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &data),
				"event %d: a local activity marker's data", ev.GetEventId())
			if data.ActivityType != contract.CallModel {
				continue
			}
			require.Positive(t, data.Attempt, "event %d: a local activity marker names its attempt", ev.GetEventId())
			if retrying {
				out[len(out)-1] = data.Attempt
			} else {
				out = append(out, data.Attempt)
			}
			retrying = m.GetFailure() != nil && data.Backoff > 0
		}
	}
	return out
}

// TestModelCallAttempts: modelCallAttempts reads a call's attempts from
// its activity events, from its local activity's marker, and from the
// markers of a local call whose retry waited on a timer; other local
// activities' markers are not model calls.
func TestModelCallAttempts(t *testing.T) {
	id := int64(0)
	event := func(ev *historypb.HistoryEvent) *historypb.HistoryEvent {
		id++
		ev.EventId = id
		return ev
	}
	scheduled := func(activityType string) *historypb.HistoryEvent {
		return event(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
			Attributes: &historypb.HistoryEvent_ActivityTaskScheduledEventAttributes{ActivityTaskScheduledEventAttributes: &historypb.ActivityTaskScheduledEventAttributes{
				ActivityType: &commonpb.ActivityType{Name: activityType}}}})
	}
	started := func(scheduledID int64, attempt int32) *historypb.HistoryEvent {
		return event(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			Attributes: &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{
				ScheduledEventId: scheduledID, Attempt: attempt}}})
	}
	marker := func(activityType string, attempt int32, failed bool, backoff time.Duration) *historypb.HistoryEvent {
		data, err := converter.GetDefaultDataConverter().ToPayloads(localActivityMarker{ActivityType: activityType, Attempt: attempt, Backoff: backoff})
		require.NoError(t, err)
		m := &historypb.MarkerRecordedEventAttributes{MarkerName: "LocalActivity", Details: map[string]*commonpb.Payloads{"data": data}}
		if failed {
			m.Failure = &failurepb.Failure{Message: "HTTP 500"}
		}
		return event(&historypb.HistoryEvent{EventType: enumspb.EVENT_TYPE_MARKER_RECORDED,
			Attributes: &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: m}})
	}

	for _, tt := range []struct {
		name   string
		events func() []*historypb.HistoryEvent
		want   []int32
	}{
		{"activities", func() []*historypb.HistoryEvent {
			first, tool, second := scheduled(contract.CallModel), scheduled(contract.ExecuteTool), scheduled(contract.CallModel)
			return []*historypb.HistoryEvent{first, started(first.GetEventId(), 3), tool, started(tool.GetEventId(), 1), second, started(second.GetEventId(), 1)}
		}, []int32{3, 1}},
		{"local calls retried in the worker", func() []*historypb.HistoryEvent {
			return []*historypb.HistoryEvent{marker(contract.LoadAgent, 1, false, 0), marker(contract.CallModel, 6, true, -1),
				marker(contract.CallModel, 1, false, 0), marker(contract.ExecuteTool, 2, false, 0), marker(contract.CallModel, 1, false, 0)}
		}, []int32{6, 1, 1}},
		{"a local call retried after a timer", func() []*historypb.HistoryEvent {
			return []*historypb.HistoryEvent{marker(contract.CallModel, 2, true, 30*time.Second), marker(contract.CallModel, 4, false, 0),
				marker(contract.CallModel, 1, true, -1)}
		}, []int32{4, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, modelCallAttempts(t, tt.events()))
		})
	}
}
