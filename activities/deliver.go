package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/deliver"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
)

// startDelivery starts the Delivery of a stored result when the turn's
// agent or request names deliver targets. Its workflow id is the turn's
// own, prefixed, so a retried SaveResult starts nothing twice. A request
// naming a target its agent lacks was refused before the turn ran
// (Agent.CheckDeliver, in the gateway and LoadAgent); the error below is
// for a turn begun before that check, whose answer is stored all the same.
func (a *Activities) startDelivery(ctx context.Context, in contract.SaveResultInput, stored agent.TurnResult) error {
	if len(in.Deliver) == 0 && len(in.Request.Deliver) == 0 {
		return nil
	}
	switch stored.Status {
	case agent.StatusCompleted, agent.StatusFailed, agent.StatusCanceled:
	default:
		return nil
	}
	ds, err := agent.Deliveries(in.Deliver, in.Request, in.WorkflowID)
	if err != nil {
		a.log(ctx).Warn("turn names a deliver target it may not use; nothing delivered",
			zap.String("tenant", in.Request.TenantID), zap.String("job_id", in.Request.JobID), zap.Error(err))
		return nil
	}
	if len(ds) == 0 {
		return nil
	}
	id := contract.DeliveryWorkflowID(in.WorkflowID)
	_, err = a.temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                activity.GetInfo(ctx).TaskQueue,
		WorkflowIDReusePolicy:    enums.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enums.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		StaticSummary:            "deliver the result of " + in.WorkflowID,
	}, contract.Delivery, contract.DeliveryInput{
		TenantID: in.Request.TenantID, JobID: in.Request.JobID, StreamID: in.WorkflowID,
		SessionID: in.Request.SessionID, Deliveries: ds,
	})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return fmt.Errorf("start delivery %s: %w", id, err)
	}
	return nil
}

// Deliver makes one attempt at one delivery of a turn's result, and
// records it (store.DeliveryAttempt). The webhook's URL and Telegram's
// API go through the tenant's egress client, as a tool's calls do; the
// secrets are resolved here, for the tenant, and go nowhere else. A
// Telegram answer longer than one message resumes, on a retry, after the
// messages already sent (the heartbeat's details count them).
func (a *Activities) Deliver(ctx context.Context, in contract.DeliverInput) error {
	info := activity.GetInfo(ctx)
	t := in.Delivery.Target
	rec := store.DeliveryAttempt{DeliveryID: in.Delivery.ID, Attempt: int(info.Attempt), JobID: in.JobID, Target: t.Name, Kind: t.Kind}
	status, err := a.deliver(ctx, in)
	var de *deliver.Error
	if status == 0 && errors.As(err, &de) {
		status = de.Status // Telegram's sends report their answer's status in the error
	}
	rec.HTTPStatus = status
	permanent := err != nil && (!errors.As(err, &de) || de.Permanent)
	switch {
	case err == nil:
		rec.Outcome = store.DeliveryDelivered
	case permanent || (info.RetryPolicy != nil && info.RetryPolicy.MaximumAttempts > 0 && info.Attempt >= info.RetryPolicy.MaximumAttempts):
		rec.Outcome, rec.Error = store.DeliveryFailed, words.Clip(err.Error(), 500)
	default:
		rec.Outcome, rec.Error = store.DeliveryRetrying, words.Clip(err.Error(), 500)
	}
	if rerr := a.store.RecordDeliveryAttempt(ctx, in.TenantID, rec); rerr != nil {
		return rerr
	}
	a.log(ctx).Info("delivery attempt", zap.String("tenant", in.TenantID), zap.String("delivery_id", rec.DeliveryID),
		zap.Int("attempt", rec.Attempt), zap.String("outcome", rec.Outcome), zap.Int("http_status", status))
	switch {
	case err == nil:
		return nil
	case permanent:
		return agent.Errorf(agent.CodeInvalid, "deliver %s: %v", t.Name, err)
	default:
		e := agent.Errorf(agent.CodeUnavailable, "deliver %s: %v", t.Name, err)
		e.RetryAfter = de.RetryAfter // a 429's wait, else 0: the retry policy's
		return e
	}
}

// deliver sends the result to the target once; a *deliver.Error says
// whether trying again may help, any other error does not.
func (a *Activities) deliver(ctx context.Context, in contract.DeliverInput) (int, error) {
	t := in.Delivery.Target
	res, err := a.store.Result(ctx, in.TenantID, in.JobID)
	if err != nil {
		if agent.IsCode(err, agent.CodeNotFound) {
			return 0, fmt.Errorf("no stored result of job %q", in.JobID)
		}
		return 0, &deliver.Error{Err: fmt.Errorf("read result: %w", err)}
	}
	settings, err := a.tenants.Settings(ctx, in.TenantID)
	if err != nil {
		return 0, &deliver.Error{Err: fmt.Errorf("load tenant: %w", err)}
	}
	resolve := func(ref string) (string, error) {
		v, err := a.tools.Deps().Secrets.Resolve(secrets.WithTenant(ctx, in.TenantID), ref)
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", ref, err)
		}
		return v, nil
	}
	switch t.Kind {
	case agent.DeliverWebhook:
		key, err := resolve(t.Secret)
		if err != nil {
			return 0, err
		}
		p := deliver.NewPayload(in.Delivery.ID, in.StreamID, agent.TurnRequest{TenantID: in.TenantID, SessionID: in.SessionID}, res)
		return deliver.Webhook(ctx, settings.HTTP, t.URL, key, p, time.Now())
	case agent.DeliverTelegram:
		token, err := resolve(t.BotToken)
		if err != nil {
			return 0, err
		}
		sent := 0
		if activity.HasHeartbeatDetails(ctx) {
			_ = activity.GetHeartbeatDetails(ctx, &sent)
		}
		tg := deliver.Telegram{Base: a.telegramAPI, Token: token}
		for i, part := range deliver.SplitTelegram(telegramText(res), deliver.TelegramMaxChars) {
			if i < sent {
				continue
			}
			if err := tg.SendMessage(ctx, settings.HTTP, t.ChatID, part); err != nil {
				return 0, err
			}
			activity.RecordHeartbeat(ctx, i+1)
		}
		return 0, nil
	}
	return 0, fmt.Errorf("deliver target %q: kind %q", t.Name, t.Kind)
}

// telegramText is what a chat is told of a result: its answer, or why
// there is none.
func telegramText(res agent.TurnResult) string {
	if res.Status == agent.StatusCompleted || res.Partial {
		return res.Output
	}
	if res.Error != nil {
		return "The request " + res.Status + ": " + res.Error.Message
	}
	return "The request " + res.Status + "."
}
