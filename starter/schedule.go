package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// scheduleCmd manages Temporal schedules that run agent turns.
func scheduleCmd(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "create" && args[0] != "delete") {
		return fmt.Errorf(`schedule: want "schedule create [flags] \"prompt\"" or "schedule delete --id ID"`)
	}
	sub := args[0]
	fs := flag.NewFlagSet("schedule "+sub, flag.ContinueOnError)
	id := fs.String("id", "", "schedule id (required)")
	tenant := fs.String("tenant", "demo", "tenant id")
	agentID := fs.String("agent", "", "agent id (default: routed)")
	model := fs.String("model", "", `the model the runs call instead of the agent's, "provider:model" (one the agent lists in models_allowed)`)
	every := fs.Duration("every", 0, "run every interval, e.g. 1h")
	cron := fs.String("cron", "", "run on a cron spec, e.g. '0 9 * * MON-FRI'")
	address := fs.String("address", cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "127.0.0.1:7233"), "Temporal frontend host:port")
	namespace := fs.String("namespace", cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default"), "Temporal namespace")
	taskQueue := fs.String("task-queue", cmp.Or(os.Getenv("AGENTFLOW_TASK_QUEUE"), contract.TaskQueue), "task queue")
	session := fs.String("session", "", "run each turn in this session, with its transcript (default: a fresh context, no session)")
	sessionEnd := fs.String("session-end", "", `what each run's end does to --session: "close" (it takes no more messages) or "mark" (inactive until its next turn)`)
	var deliverTo deliverFlag
	fs.Var(&deliverTo, "deliver", "push each run's result to the agent's deliver target NAME, or to chat CHAT of its telegram target (NAME or NAME:CHAT; repeat for several)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *id == "" {
		return fmt.Errorf("schedule: --id is required")
	}
	if err := agent.ValidateID("--id", *id); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	c, closeClient, err := dialTemporal(ctx, *address, *namespace)
	if err != nil {
		return err
	}
	defer closeClient()
	if sub == "delete" {
		if err := c.ScheduleClient().GetHandle(ctx, *id).Delete(ctx); err != nil {
			return fmt.Errorf("delete schedule %q: %w", *id, err)
		}
		fmt.Fprintf(out, "schedule %s deleted\n", *id)
		return nil
	}

	req := agent.TurnRequest{TenantID: *tenant, AgentID: *agentID, Model: *model, Prompt: strings.Join(fs.Args(), " "), History: agent.HistoryFresh,
		Deliver: deliverTo, SessionID: *session, SessionEnd: *sessionEnd, Caller: scheduleCaller(*id)}
	if *session != "" {
		req.History = agent.HistoryLoad
	}
	req.Normalize()
	if err := req.Validate(); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	if err := agent.CheckClientID("--session", req.SessionID); err != nil {
		return fmt.Errorf("schedule: %w", err)
	}
	spec, err := scheduleSpec(*every, *cron)
	if err != nil {
		return err
	}
	opts := scheduledTurnOptions(*id, *taskQueue, req, spec)
	if _, err := c.ScheduleClient().Create(ctx, opts); err != nil {
		return fmt.Errorf("create schedule %q: %w", *id, err)
	}
	fmt.Fprintf(out, "schedule %s created: each run is %s-<time>, its result stored like any other\n", *id, opts.Action.(*client.ScheduleWorkflowAction).ID)
	return nil
}

// deliverFlag is --deliver, repeated: NAME or NAME:CHAT each.
type deliverFlag []agent.DeliverTo

func (f *deliverFlag) String() string { return fmt.Sprint([]agent.DeliverTo(*f)) }

func (f *deliverFlag) Set(v string) error {
	name, chat, _ := strings.Cut(v, ":")
	if name == "" {
		return fmt.Errorf("want NAME or NAME:CHAT, the name of one of the agent's deliver targets")
	}
	*f = append(*f, agent.DeliverTo{Target: name, ChatID: chat})
	return nil
}

func scheduleSpec(every time.Duration, cron string) (client.ScheduleSpec, error) {
	switch {
	case every > 0 && cron != "":
		return client.ScheduleSpec{}, fmt.Errorf("schedule: give --every or --cron, not both")
	case every > 0:
		return client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: every}}}, nil
	case cron != "":
		return client.ScheduleSpec{CronExpressions: []string{cron}}, nil
	}
	return client.ScheduleSpec{}, fmt.Errorf("schedule: --every or --cron is required")
}

// scheduleIssuer is where the identity of a schedule's runs comes from:
// the schedule, subject its id.
const scheduleIssuer = "agentflow:schedule"

// scheduleCaller is the caller of schedule id's runs.
func scheduleCaller(id string) *agent.Caller {
	return &agent.Caller{Name: "schedule:" + id, Issuer: scheduleIssuer, Subject: id}
}

// scheduledTurnOptions schedule a turn with fresh context, or in the
// request's session. Each run's workflow id is the schedule's
// "turn/<tenant>/af:schedule:<id>" (agent.DerivedID, which no client of
// the gateway may name as a job id, so none can start a run's id first)
// plus the run's time, and AgentTurn takes its job id from the workflow
// id, so every run stores its own result. A run's caller is the
// schedule itself, no person's: its memories, grants and audit records
// are the schedule's.
func scheduledTurnOptions(id, taskQueue string, req agent.TurnRequest, spec client.ScheduleSpec) client.ScheduleOptions {
	req.JobID = "" // from the workflow id, new for every run
	req.Channel = agent.ChannelSchedule
	req.Caller = scheduleCaller(id)
	return client.ScheduleOptions{
		ID:   id,
		Spec: spec,
		Action: &client.ScheduleWorkflowAction{
			ID:        contract.TurnWorkflowID(req.TenantID, agent.DerivedID(agent.ChannelSchedule, id)),
			Workflow:  contract.AgentTurn,
			Args:      []any{req},
			TaskQueue: taskQueue,
			// As every turn's (contract.TurnTaskTimeout).
			WorkflowTaskTimeout: contract.TurnTaskTimeout,
			StaticSummary:       "scheduled: " + contract.TurnSummary(req),
			StaticDetails:       "schedule `" + id + "` · " + contract.TurnDetails(req),
		},
	}
}
