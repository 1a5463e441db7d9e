package chaos

import (
	"context"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/contract"
)

// runInfo is one run of a workflow.
type runInfo struct {
	id     string
	events int
}

func eventsOf(runs []runInfo) []int {
	out := make([]int, len(runs))
	for i, r := range runs {
		out[i] = r.events
	}
	return out
}

// recorded is what a turn's histories record as completed: ExecuteTool
// by call id, and the number of model calls answered (by CallModel, or by
// the AwaitModel that took a handed-off call over).
type recorded struct {
	tools  map[string]int
	models int
}

// turnRuns reads the histories of a workflow's runs, from the current back
// to the first by the run each continued from, and returns the runs first
// to last and what they recorded.
func turnRuns(ctx context.Context, c client.Client, workflowID string) ([]runInfo, recorded, error) {
	rec := recorded{tools: map[string]int{}}
	var runs []runInfo
	runID := ""
	for {
		r, prev, err := readRun(ctx, c, workflowID, runID, &rec)
		if err != nil {
			return nil, rec, fmt.Errorf("history of %s run %q: %w", workflowID, runID, err)
		}
		runs = append([]runInfo{r}, runs...)
		if prev == "" {
			return runs, rec, nil
		}
		runID = prev
	}
}

// readRun reads one run's history into rec; prev is the run it continued
// from ("" for the first).
func readRun(ctx context.Context, c client.Client, workflowID, runID string, rec *recorded) (r runInfo, prev string, err error) {
	kinds := map[int64]string{} // activity type by scheduled event id
	it := c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return r, "", err
		}
		r.events++
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			prev, r.id = a.GetContinuedExecutionRunId(), a.GetOriginalExecutionRunId()
		}
		kind, result, err := completed(ev, kinds)
		if err != nil {
			return r, "", fmt.Errorf("event %d: %w", ev.GetEventId(), err)
		}
		switch kind {
		case contract.CallModel, contract.AwaitModel:
			// A local call handed off (its result says HandedOff) is
			// answered by the AwaitModel activity that takes it over.
			var res contract.CallModelResult
			if err := converter.GetDefaultDataConverter().FromPayloads(result, &res); err != nil {
				return r, "", fmt.Errorf("event %d: decode %s's result: %w", ev.GetEventId(), kind, err)
			}
			if !res.HandedOff {
				rec.models++
			}
		case contract.ExecuteTool:
			var res contract.ExecuteToolResult
			if err := converter.GetDefaultDataConverter().FromPayloads(result, &res); err != nil {
				return r, "", fmt.Errorf("event %d: decode ExecuteTool's result: %w", ev.GetEventId(), err)
			}
			rec.tools[res.CallID]++
		}
	}
	return r, prev, nil
}

// completed returns the type and result of the activity or local activity
// an event records as completed; "" for other events. kinds learns each
// activity's type as it is scheduled.
func completed(ev *historypb.HistoryEvent, kinds map[int64]string) (string, *commonpb.Payloads, error) {
	if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
		kinds[ev.GetEventId()] = a.GetActivityType().GetName()
	}
	if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil {
		return kinds[a.GetScheduledEventId()], a.GetResult(), nil
	}
	m := ev.GetMarkerRecordedEventAttributes()
	if m == nil || m.GetMarkerName() != "LocalActivity" || m.GetFailure() != nil {
		return "", nil, nil
	}
	// The SDK's local activity marker: its data names the activity type.
	var data struct{ ActivityType string }
	if err := converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &data); err != nil {
		return "", nil, fmt.Errorf("decode a local activity marker: %w", err)
	}
	return data.ActivityType, m.GetDetails()["result"], nil
}
