package actions

import (
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
)

// Source is where the rules come from, and when they were read.
const Source = "https://docs.temporal.io/cloud/actions (read 2026-11-29)"

// ListPricePerMillion is Temporal Cloud's list price in US dollars per
// million actions: "Actions pricing starts at $50 per million Actions",
// the Developer plan's price at every volume and the first 5M of the
// others, which then fall to $25 by 200M
// (https://docs.temporal.io/cloud/pricing, read 2026-11-29).
const ListPricePerMillion = 50.0

// Kind is a kind of billable action, named after Temporal's metric names
// where there is one.
type Kind string

// The kinds Count tells apart, in the order Kinds lists them.
const (
	// StartWorkflow: a run started by a client, a parent (the child's own
	// start attempt), a schedule, or a signal- or update-with-start.
	StartWorkflow Kind = "start_workflow"
	// ContinueAsNew: a run started by its predecessor continuing as new.
	ContinueAsNew Kind = "continue_as_new"
	// StartChild: a parent's intent to start a child workflow.
	StartChild Kind = "start_child"
	// Signal: a signal the run received.
	Signal Kind = "signal"
	// Update: an update the run accepted.
	Update Kind = "update"
	// Activity: an activity scheduled.
	Activity Kind = "activity"
	// ActivityRetry: an activity's attempts after its first.
	ActivityRetry Kind = "activity_retry"
	// LocalActivity: a workflow task that recorded local activity markers.
	LocalActivity Kind = "local_activity"
	// LocalActivityRetry: local activity attempts after their first.
	LocalActivityRetry Kind = "local_activity_retry"
	// Marker: a workflow task that recorded other markers only (side
	// effects, versions).
	Marker Kind = "marker"
	// Timer: a timer started.
	Timer Kind = "timer"
	// Upsert: a search attribute upsert.
	Upsert Kind = "upsert"
	// Options: a workflow's execution options updated.
	Options Kind = "options"
	// Reset: a workflow reset.
	Reset Kind = "reset"
	// Nexus: a Nexus operation scheduled, or its cancellation requested.
	Nexus Kind = "nexus"
)

// Kinds lists every kind, in a table's column order.
var Kinds = []Kind{
	StartWorkflow, ContinueAsNew, StartChild, Signal, Update, Activity, ActivityRetry,
	LocalActivity, LocalActivityRetry, Marker, Timer, Upsert, Options, Reset, Nexus,
}

// Marker names the Go SDK records (internal_event_handlers.go).
const (
	localActivityMarker = "LocalActivity"
	changeVersion       = "TemporalChangeVersion"
)

// Counts are the billable actions of one or more histories.
type Counts struct {
	// ByKind holds the actions of each kind seen; Total is their sum.
	ByKind map[Kind]int
	Total  int
	// SignalsSent are signals the run sent to other workflows: billed
	// once, to the receiver, whose history shows them as its Signal — not
	// counted here, lest a sender and receiver counted together count the
	// signal twice. A receiver outside what is counted loses them: add
	// them then.
	SignalsSent int
	// ExemptUpserts are upserts of TemporalChangeVersion alone, which
	// are not billed.
	ExemptUpserts int
}

// Get is the count of one kind.
func (c Counts) Get(k Kind) int { return c.ByKind[k] }

// Add adds o's counts to c's.
func (c *Counts) Add(o Counts) {
	for k, n := range o.ByKind {
		c.add(k, n)
	}
	c.SignalsSent += o.SignalsSent
	c.ExemptUpserts += o.ExemptUpserts
}

func (c *Counts) add(k Kind, n int) {
	if n == 0 {
		return
	}
	if c.ByKind == nil {
		c.ByKind = map[Kind]int{}
	}
	c.ByKind[k] += n
	c.Total += n
}

// Count applies the published rules to one workflow run's history, in
// event order, and counts its billable actions.
//
// What a history cannot show is not counted: queries ("Query received by
// Worker": no event; agentflow's followers and status reads query),
// activity heartbeats ("counts as an Action only if it reaches the
// Temporal Server", after the SDK's throttling: no event), workflow task
// heartbeats of long local activities (each "an additional Action": no
// event tells them apart), rejected updates ("never written to history"),
// a child's start attempt when the child's history is not counted (count
// the child's history too: its start is that attempt), and schedule,
// export, fairness and capacity charges.
func Count(events []*historypb.HistoryEvent) Counts {
	var c Counts
	markers := map[int64]bool{} // workflow task completed id: local activity marker seen
	for i, ev := range events {
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			c.add(started(ev), 1)
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			// "An Action occurs for every Signal, whether sent from a
			// Client or from a Workflow." But "one total action occurs
			// for any Signal-With-Start, regardless of whether the
			// Workflow starts", and its history shows the start followed
			// by the signal: a signal right after the run's start, before
			// its first workflow task is scheduled, is a
			// signal-with-start's, already counted as the start.
			if i == 1 && events[0].GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED {
				continue
			}
			c.add(Signal, 1)
		case enumspb.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
			// signal_external_workflow: "The UI shows a billable action
			// only in the signaled Event history, not in the signaler".
			c.SignalsSent++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
			// "every successful Update and every rejected Update";
			// de-duplicated updates write no second event. An
			// update-with-start's update is "in addition to the start".
			c.add(Update, 1)
		case enumspb.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
			// "Results in two Actions, one for durably storing the intent
			// to start a Child Workflow and one for the attempt to start
			// it": the intent here, the attempt as the child's own
			// WorkflowExecutionStarted ("Workflow started … via Child
			// Workflow start"), in the child's history.
			c.add(StartChild, 1)
		default:
			countTask(&c, ev, markers)
		}
	}
	for _, local := range markers {
		// "Temporal Cloud counts all RecordMarkers from each Workflow
		// Task as one action, and not N actions."
		if local {
			c.add(LocalActivity, 1)
		} else {
			c.add(Marker, 1)
		}
	}
	return c
}

// started is the kind of a run's start. "Workflow started: occurs via
// client start, Continue-As-New, Child Workflow start"; "The UI shows a
// billable action only for the EVENT_TYPE_WORKFLOW_EXECUTION_STARTED
// event of the newly started Workflow" of a continue-as-new, not for the
// predecessor's ContinuedAsNew event: the new run's start is counted, once.
// A retry or cron run is a start like a client's. "Search Attributes
// specified during Workflow start are excluded."
func started(ev *historypb.HistoryEvent) Kind {
	a := ev.GetWorkflowExecutionStartedEventAttributes()
	if a.GetInitiator() == enumspb.CONTINUE_AS_NEW_INITIATOR_WORKFLOW {
		return ContinueAsNew
	}
	return StartWorkflow
}

// countTask counts the events a run's commands and tasks write.
func countTask(c *Counts, ev *historypb.HistoryEvent, markers map[int64]bool) {
	switch ev.GetEventType() {
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
		// "Activity started or retried. Occurs each time a Workflow
		// Activity … is started or retried": schedule_activity.
		c.add(Activity, 1)
	case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
		// retry_activity: "Total attempt count is recorded in
		// ActivityTaskStartedEventAttributes.attempt … subtract 1,
		// because the first attempt is not a retry." A run terminated
		// while an activity retries has no such event: its retries go
		// uncounted.
		if n := ev.GetActivityTaskStartedEventAttributes().GetAttempt(); n > 1 {
			c.add(ActivityRetry, int(n-1))
		}
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
		// retry_activity_local: "the retry count is recorded in
		// WorkflowTaskCompletedEventAttributes.metering_metadata.
		// nonfirst_local_activity_execution_attempts". The page caps
		// retries after a workflow task heartbeat at 100 actions; no
		// history reaches that, so no cap is applied.
		n := ev.GetWorkflowTaskCompletedEventAttributes().GetMeteringMetadata().GetNonfirstLocalActivityExecutionAttempts()
		c.add(LocalActivityRetry, int(n))
	case enumspb.EVENT_TYPE_MARKER_RECORDED:
		// record_activity_markers, "all RecordMarkers from each Workflow
		// Task as one action": grouped by the task that recorded them.
		// The page names local activities; this counts other markers
		// (side effects, GetVersion's) by the same rule, under Marker, as
		// its wording "all RecordMarkers" reads.
		a := ev.GetMarkerRecordedEventAttributes()
		task := a.GetWorkflowTaskCompletedEventId()
		markers[task] = markers[task] || a.GetMarkerName() == localActivityMarker
	case enumspb.EVENT_TYPE_TIMER_STARTED:
		// "Timer started. Includes implicit Timers … when timeouts are
		// set, such as AwaitWithTimeout in Go."
		c.add(Timer, 1)
	case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
		// "each invocation of UpsertSearchAttributes … Multiple Search
		// Attributes updated in a single command count as one"; "The
		// TemporalChangeVersion Search Attribute … is also exempt".
		fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
		if _, ok := fields[changeVersion]; ok && len(fields) == 1 {
			c.ExemptUpserts++
			return
		}
		c.add(Upsert, 1)
	case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED:
		// "Occurs for every Workflow-Execution-Options-Updated event."
		c.add(Options, 1)
	case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
		// reset_workflow: "EVENT_TYPE_WORKFLOW_TASK_FAILED when cause ==
		// WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW".
		if ev.GetWorkflowTaskFailedEventAttributes().GetCause() == enumspb.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW {
			c.add(Reset, 1)
		}
	case enumspb.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED, enumspb.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED:
		// "the caller Workflow starting a Nexus Operation results in one
		// Action on the caller Namespace", and so does canceling one; the
		// handler's workflows and activities are billed to its namespace,
		// in their own histories.
		c.add(Nexus, 1)
	}
}
