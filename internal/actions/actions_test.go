package actions

import (
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// h numbers events from 1, as a history does.
func h(events ...*historypb.HistoryEvent) []*historypb.HistoryEvent {
	for i, ev := range events {
		ev.EventId = int64(i + 1)
	}
	return events
}

func ev(t enumspb.EventType) *historypb.HistoryEvent { return &historypb.HistoryEvent{EventType: t} }

func start() *historypb.HistoryEvent { return ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED) }

func continued() *historypb.HistoryEvent {
	e := start()
	e.Attributes = &historypb.HistoryEvent_WorkflowExecutionStartedEventAttributes{WorkflowExecutionStartedEventAttributes: &historypb.WorkflowExecutionStartedEventAttributes{
		Initiator: enumspb.CONTINUE_AS_NEW_INITIATOR_WORKFLOW, ContinuedExecutionRunId: "run-1",
	}}
	return e
}

// task is a workflow task completed, with local activity attempts after
// their first.
func task(retries uint32) *historypb.HistoryEvent {
	e := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED)
	e.Attributes = &historypb.HistoryEvent_WorkflowTaskCompletedEventAttributes{WorkflowTaskCompletedEventAttributes: &historypb.WorkflowTaskCompletedEventAttributes{
		MeteringMetadata: &commonpb.MeteringMetadata{NonfirstLocalActivityExecutionAttempts: retries},
	}}
	return e
}

func scheduled() *historypb.HistoryEvent { return ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED) }

func marker(name string, taskID int64) *historypb.HistoryEvent {
	e := ev(enumspb.EVENT_TYPE_MARKER_RECORDED)
	e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: &historypb.MarkerRecordedEventAttributes{
		MarkerName: name, WorkflowTaskCompletedEventId: taskID,
	}}
	return e
}

func activityStarted(attempt int32) *historypb.HistoryEvent {
	e := ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED)
	e.Attributes = &historypb.HistoryEvent_ActivityTaskStartedEventAttributes{ActivityTaskStartedEventAttributes: &historypb.ActivityTaskStartedEventAttributes{Attempt: attempt}}
	return e
}

func upsert(names ...string) *historypb.HistoryEvent {
	fields := map[string]*commonpb.Payload{}
	for _, n := range names {
		fields[n] = &commonpb.Payload{}
	}
	e := ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES)
	e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: &historypb.UpsertWorkflowSearchAttributesEventAttributes{
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields},
	}}
	return e
}

func taskFailed(cause enumspb.WorkflowTaskFailedCause) *historypb.HistoryEvent {
	e := ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED)
	e.Attributes = &historypb.HistoryEvent_WorkflowTaskFailedEventAttributes{WorkflowTaskFailedEventAttributes: &historypb.WorkflowTaskFailedEventAttributes{Cause: cause}}
	return e
}

func end() *historypb.HistoryEvent { return ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED) }

type countCase struct {
	name   string
	events []*historypb.HistoryEvent
	want   map[Kind]int
	sent   int // SignalsSent
	exempt int // ExemptUpserts
}

func countCases() []countCase {
	return []countCase{
		{name: "a started workflow", events: h(start(), scheduled(), task(0), end()), want: map[Kind]int{StartWorkflow: 1}},
		{name: "an activity with two retries", events: h(start(), scheduled(), task(0),
			ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), activityStarted(3), ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED), scheduled(), task(0), end()),
			want: map[Kind]int{StartWorkflow: 1, Activity: 1, ActivityRetry: 2}},
		// Events 4 and 8 are the tasks: three markers of task 4 are one
		// action, the one of task 8 another, and task 8's retry a third.
		{name: "local activity markers of two tasks", events: h(start(), scheduled(), ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED), task(0),
			marker("LocalActivity", 4), marker("LocalActivity", 4), marker("LocalActivity", 4), task(1), marker("LocalActivity", 8), end()),
			want: map[Kind]int{StartWorkflow: 1, LocalActivity: 2, LocalActivityRetry: 1}},
		{name: "a side effect and a version in one task", events: h(start(), scheduled(), task(0), marker("SideEffect", 3), marker("Version", 3), end()),
			want: map[Kind]int{StartWorkflow: 1, Marker: 1}},
		{name: "a local activity and a version in one task", events: h(start(), scheduled(), task(0), marker("Version", 3), marker("LocalActivity", 3), end()),
			want: map[Kind]int{StartWorkflow: 1, LocalActivity: 1}},
		{name: "a timer", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_TIMER_STARTED), ev(enumspb.EVENT_TYPE_TIMER_FIRED), end()),
			want: map[Kind]int{StartWorkflow: 1, Timer: 1}},
		{name: "a signal", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), end()),
			want: map[Kind]int{StartWorkflow: 1, Signal: 1}},
		{name: "a signal-with-start is one action", events: h(start(), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), scheduled(), task(0), end()),
			want: map[Kind]int{StartWorkflow: 1}},
		{name: "a signal sent is billed to its receiver", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED), end()),
			want: map[Kind]int{StartWorkflow: 1}, sent: 1},
		{name: "an update accepted", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED), end()),
			want: map[Kind]int{StartWorkflow: 1, Update: 1}},
		// The parent's intent; the child's start attempt is its own
		// history's start (next case).
		{name: "a child workflow: the parent", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
			ev(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED), ev(enumspb.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED), end()),
			want: map[Kind]int{StartWorkflow: 1, StartChild: 1}},
		{name: "a child workflow: the child", events: h(start(), scheduled(), task(0), end()), want: map[Kind]int{StartWorkflow: 1}},
		// The predecessor's ContinuedAsNew is not counted; the new run's
		// start is.
		{name: "continue-as-new: the run that hands on", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)),
			want: map[Kind]int{StartWorkflow: 1}},
		{name: "continue-as-new: the run it starts", events: h(continued(), scheduled(), task(0), end()), want: map[Kind]int{ContinueAsNew: 1}},
		{name: "upserts: two attributes in one, and a version alone", events: h(start(), scheduled(), task(0), upsert("A", "B"), upsert("TemporalChangeVersion"), upsert("TemporalChangeVersion", "C"), end()),
			want: map[Kind]int{StartWorkflow: 1, Upsert: 2}, exempt: 1},
		{name: "a Nexus operation scheduled and canceled", events: h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED),
			ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_STARTED), ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED), ev(enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCELED), end()),
			want: map[Kind]int{StartWorkflow: 1, Nexus: 2}},
		{name: "a reset, and a task failed otherwise", events: h(start(), scheduled(), taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW),
			scheduled(), taskFailed(enumspb.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_WORKER_UNHANDLED_FAILURE), scheduled(), task(0), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED), end()),
			want: map[Kind]int{StartWorkflow: 1, Reset: 1, Options: 1}},
		{name: "no events", want: map[Kind]int{}},
	}
}

func TestCount(t *testing.T) {
	for _, tc := range countCases() {
		t.Run(tc.name, func(t *testing.T) {
			got := Count(tc.events)
			total := 0
			for _, k := range Kinds {
				if got.Get(k) != tc.want[k] {
					t.Errorf("%s: got %d, want %d", k, got.Get(k), tc.want[k])
				}
				total += tc.want[k]
			}
			if len(got.ByKind) > len(Kinds) {
				t.Errorf("kinds not in Kinds: %v", got.ByKind)
			}
			if got.Total != total {
				t.Errorf("total: got %d, want %d", got.Total, total)
			}
			if got.SignalsSent != tc.sent || got.ExemptUpserts != tc.exempt {
				t.Errorf("signals sent %d, exempt upserts %d; want %d, %d", got.SignalsSent, got.ExemptUpserts, tc.sent, tc.exempt)
			}
		})
	}
}

// TestAdd: counts of a parent and its child add up, kind by kind.
func TestAdd(t *testing.T) {
	var sum Counts
	sum.Add(Count(h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED), ev(enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED), end())))
	sum.Add(Count(h(start(), scheduled(), task(0), ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED), end())))
	if sum.Total != 4 || sum.Get(StartWorkflow) != 2 || sum.Get(StartChild) != 1 || sum.Get(Signal) != 1 || sum.SignalsSent != 1 {
		t.Fatalf("got %+v", sum)
	}
}
