package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/checker"
	"github.com/agentflow/agentflow/internal/contract"
)

// explain writes to the trial's log, for each turn a violation names,
// what the database and Temporal hold of it: the calls' intents and the
// history's activity events, so that a failed trial explains itself.
func (w *workload) explain(ctx context.Context, rep checker.Report) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	jobs := map[string]bool{}
	for _, v := range rep.Violations {
		if i := strings.Index(v.Detail, w.run+"-"); i >= 0 {
			jobs[strings.Fields(v.Detail[i:])[0]] = true
		}
	}
	for job := range jobs {
		w.e.log.Info("violation's turn", zap.String("job", job), zap.String("intents", w.intents(ctx, job)),
			zap.String("history", w.history(ctx, job)))
	}
}

// intents lists the turn's rows of tool_effects.
func (w *workload) intents(ctx context.Context, job string) string {
	rows, err := w.e.db.Query(ctx, `SELECT seq, attempt, state, status, target FROM tool_effects WHERE tenant_id = $1 AND job_id = $2 ORDER BY seq`, clTenant, job)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var seq, status int
		var attempt, state, target string
		if err := rows.Scan(&seq, &attempt, &state, &status, &target); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "[step %d %s %s %d %s] ", seq, attempt, state, status, target)
	}
	return b.String()
}

// history lists the turn's workflow history: each event's id and type,
// with an activity's id and attempt.
func (w *workload) history(ctx context.Context, job string) string {
	it := w.e.temporal.GetWorkflowHistory(ctx, contract.TurnWorkflowID(clTenant, job), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	var b strings.Builder
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return b.String() + err.Error()
		}
		fmt.Fprintf(&b, "%d %s", ev.GetEventId(), strings.TrimPrefix(ev.GetEventType().String(), "EVENT_TYPE_"))
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			fmt.Fprintf(&b, "(%s %s)", a.GetActivityId(), a.GetActivityType().GetName())
		}
		if a := ev.GetActivityTaskStartedEventAttributes(); a != nil {
			fmt.Fprintf(&b, "(sched %d attempt %d %s)", a.GetScheduledEventId(), a.GetAttempt(), a.GetIdentity())
		}
		if a := ev.GetActivityTaskFailedEventAttributes(); a != nil {
			fmt.Fprintf(&b, "(sched %d: %s)", a.GetScheduledEventId(), a.GetFailure().GetMessage())
		}
		if a := ev.GetActivityTaskTimedOutEventAttributes(); a != nil {
			fmt.Fprintf(&b, "(sched %d: %s)", a.GetScheduledEventId(), a.GetFailure().GetMessage())
		}
		b.WriteString("; ")
	}
	return b.String()
}
