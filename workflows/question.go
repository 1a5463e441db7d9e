package workflows

import (
	"fmt"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/signals"
)

// Questions (ask_user, agent.KindAskUser): the turn holds the call, as it
// holds one waiting for approval, in a coroutine of its own, while the
// round's other calls run. It logs a question event and WAITING_INPUT,
// and waits for an answer (the answer signal or update) from someone with
// the question's role, until the question's deadline or the turn's
// cancellation. What came of it is recorded as an approval is (its
// audit), logged as question_answered, and stored as the call's result
// (ExecuteTool with Asked): the model reads the answer, or that no one
// answered.

// questions is a turn's ask_user state.
type questions struct {
	pending  []agent.PendingQuestion // waiting, in the order asked
	answered []string                // call ids answered or closed
	inbox    []answerIn              // answers not yet taken by their call
}

type answerIn struct {
	agent.Answer
	via string // agent.ViaSignal or ViaUpdate
}

// startQuestions registers the answer signal and update and the
// pending_questions query.
func (w *waits) startQuestions(ctx workflow.Context) error {
	if err := workflow.SetQueryHandlerWithOptions(ctx, contract.QueryPendingQuestions, func() ([]agent.PendingQuestion, error) {
		return append([]agent.PendingQuestion{}, w.asks.pending...), nil
	}, workflow.QueryHandlerOptions{Description: "ask_user calls waiting for an answer"}); err != nil {
		return err
	}
	const desc = `answer an ask_user call: {"call_id","answer","answerer","roles"}`
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateAnswer,
		func(ctx workflow.Context, a agent.Answer) (contract.AnswerAck, error) {
			if err := w.offerAnswer(a, agent.ViaUpdate); err != nil {
				return contract.AnswerAck{}, contract.Failure(err)
			}
			return contract.AnswerAck{CallID: a.CallID, Outcome: agent.QuestionAnswered}, nil
		},
		workflow.UpdateHandlerOptions{
			Validator: func(_ workflow.Context, a agent.Answer) error {
				return contract.Failure(w.checkAnswer(a))
			},
			Description: desc,
		}); err != nil {
		return err
	}
	ch := workflow.GetSignalChannelWithOptions(ctx, contract.SignalAnswer, workflow.SignalChannelOptions{Description: desc})
	signals.Serve(ctx, ch, contract.SignalAnswer, func(_ workflow.Context, a agent.Answer) error {
		return w.offerAnswer(a, agent.ViaSignal)
	})
	return nil
}

// checkAnswer refuses answers to calls that do not wait, and answers the
// question does not take (agent.PendingQuestion.Fits).
func (w *waits) checkAnswer(a agent.Answer) error {
	if err := a.Validate(); err != nil {
		return err
	}
	if slices.Contains(w.asks.answered, a.CallID) {
		return agent.Errorf(agent.CodeConflict, "question %q was already answered or closed", a.CallID)
	}
	for _, q := range w.asks.pending {
		if q.CallID == a.CallID {
			return q.Fits(a)
		}
	}
	return noneWaits(fmt.Sprintf("no question %q waits for an answer", a.CallID), "none does",
		w.asks.pending, func(q agent.PendingQuestion) string { return q.CallID })
}

// offerAnswer takes an answer for its call's coroutine; the question
// counts as answered at once, so that a second answer is refused.
func (w *waits) offerAnswer(a agent.Answer, via string) error {
	if err := w.checkAnswer(a); err != nil {
		return err
	}
	w.asks.answered = append(w.asks.answered, a.CallID)
	w.asks.inbox = append(w.asks.inbox, answerIn{Answer: a, via: via})
	return nil
}

// takeAnswer removes call callID's answer from the inbox.
func (w *waits) takeAnswer(callID string) (answerIn, bool) {
	for k, a := range w.asks.inbox {
		if a.CallID == callID {
			w.asks.inbox = append(w.asks.inbox[:k:k], w.asks.inbox[k+1:]...)
			return a, true
		}
	}
	return answerIn{}, false
}

// ask holds call i of the round, an ask_user call, until it is answered;
// its future settles with the stored result, or with the refusal the
// model reads.
func (r *toolRound) ask(ctx workflow.Context, i int, spec agent.Tool) {
	t, c := r.t, r.calls[i]
	f, settle := workflow.NewFuture(ctx)
	r.futures[i] = f
	// Decoding JSON into structs is deterministic; workflowcheck cannot
	// tell.
	cfg, err := agent.ParseAskUserConfig(spec.Config) //workflowcheck:ignore
	if err != nil {
		settle.SetError(err)
		return
	}
	args, err := agent.ParseAskUserArgs(c.Arguments) //workflowcheck:ignore
	if err != nil {
		settle.SetError(err)
		return
	}
	timeout := time.Duration(cfg.TimeoutSec) * time.Second
	if timeout == 0 {
		timeout = time.Duration(r.limits.ApprovalTimeoutSec) * time.Second
	}
	now := workflow.Now(ctx)
	q := agent.PendingQuestion{CallID: c.ID, Tool: c.Name, Question: args.Question, Choices: args.Choices,
		AllowOther: args.AllowOther, Role: cfg.Role, AskedAt: now, Deadline: now.Add(timeout)}
	t.asks.pending = append(t.asks.pending, q)
	t.emit(ctx, agent.Event{Kind: agent.EventQuestion,
		Tool:     &agent.ToolEvent{CallID: c.ID, Name: c.Name, Args: argsJSON(c.Arguments), Deadline: &q.Deadline},
		Question: &agent.QuestionEvent{Text: q.Question, Choices: q.Choices, AllowOther: q.AllowOther, Role: q.Role}})
	t.emit(ctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamWaitingInput})
	workflow.SetCurrentDetails(ctx, "waiting for an answer: "+contract.OneLine(q.Question, 200))

	workflow.Go(r.callCtx, func(ctx workflow.Context) { r.awaitAnswer(ctx, i, q, timeout, settle) })
}

// awaitAnswer waits for the answer to question q, call i of the round,
// until its deadline or the turn's cancellation, records and logs what
// came of it, and settles the call with the stored result.
func (r *toolRound) awaitAnswer(ctx workflow.Context, i int, q agent.PendingQuestion, timeout time.Duration, settle workflow.Settable) {
	t, c := r.t, r.calls[i]
	got, err := workflow.AwaitWithOptions(ctx, workflow.AwaitOptions{
		Timeout:      q.Deadline.Sub(workflow.Now(ctx)),
		TimerOptions: workflow.TimerOptions{Summary: "answer deadline"},
	}, func() bool {
		return slices.ContainsFunc(t.asks.inbox, func(a answerIn) bool { return a.CallID == c.ID }) || t.canceled != nil
	})
	t.asks.pending = slices.DeleteFunc(t.asks.pending, func(p agent.PendingQuestion) bool { return p.CallID == c.ID })
	a, answered := t.takeAnswer(c.ID)
	if !answered {
		t.asks.answered = append(t.asks.answered, c.ID)
	}
	out := contract.AskedOutcome{Outcome: agent.QuestionAnswered, Answer: a.Text, Answerer: a.Answerer}
	via := a.via
	switch {
	case answered:
	case t.canceled != nil || (err != nil && !t.timedOut):
		out, via = contract.AskedOutcome{Outcome: agent.ApprovalCanceled}, agent.ViaCancel
	case err != nil:
		// The turn ended (its timeout) while the question waited.
		settle.SetError(err)
		return
	case !got:
		out, via = contract.AskedOutcome{Outcome: agent.ApprovalTimedOut,
			Message: fmt.Sprintf("no one answered within %s; go on without the answer, or say what you need to know", timeout)}, agent.ViaTimeout
	}
	// Recorded and logged even when the turn is ending.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	rec := agent.ApprovalRecord{
		TenantID: t.req.TenantID, JobID: t.req.JobID, CallID: c.ID, Tool: c.Name, Args: argsJSON(c.Arguments),
		Outcome: out.Outcome, Approver: out.Answerer, Via: via, RequestedAt: q.AskedAt, DecidedAt: workflow.Now(dctx),
	}
	if answered {
		rec.ApproverIssuer, rec.ApproverSubject = a.AnswererIssuer, a.AnswererSubject
	}
	if err := dbStep(dctx, contract.RecordApproval, t.deadline, rec, nil); err != nil {
		workflow.GetLogger(dctx).Error("record answer", "call_id", c.ID, "error", err.Error())
	}
	t.meter().recordApproval(dctx, c.Name, out.Outcome, rec.DecidedAt.Sub(q.AskedAt))
	t.emit(dctx, agent.Event{Kind: agent.EventQuestionAnswered, Tool: &agent.ToolEvent{CallID: c.ID, Name: c.Name},
		Question: &agent.QuestionEvent{Outcome: out.Outcome, Answerer: out.Answerer, Via: via}})
	if out.Outcome == agent.ApprovalCanceled {
		// The call was cancelled with the turn, as a call in flight is.
		settle.SetError(temporal.NewCanceledError())
		return
	}
	if len(t.asks.pending) == 0 && len(t.appr.pending) == 0 {
		t.emit(dctx, agent.Event{Kind: agent.EventStatus, Status: agent.StreamRunning})
	}
	in := r.in[i]
	in.Asked = &out
	var res contract.ExecuteToolResult
	err = dbStep(ctx, contract.ExecuteTool, t.deadline, in, &res)
	settle.Set(res, err)
}
