package agui

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/turnclient"
	"github.com/agentflow/agentflow/internal/words"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// Interrupts (AG-UI 1.0's interrupt-aware run lifecycle). A run whose
// turn waits for a person — a call's approval, or an ask_user question —
// ends with RUN_FINISHED {outcome: {type: "interrupt", interrupts}}, one
// interrupt per call that waits (agui_map.go). The turn goes on waiting;
// the client's next run on the same thread carries RunAgentInput.resume,
// an answer to each interrupt, which the gateway gives the turn as the
// other doors do (Service.Decide, Service.AnswerQuestion) before the run
// goes on with the same turn's events from where the interrupted run
// stopped.
//
// An interrupt's id names the call it waits on, so that a resume needs
// nothing the gateway keeps: "<job id>/approval/<approval id>/<call id>"
// or "<job id>/question/<call id>". The tenant is the credential's, as
// for every request; the approval id binds the decision to that call of
// that step and run of the turn, as the Approve API's does.

// Kinds of interrupt.
const (
	aguiKindApproval = "approval"
	aguiKindQuestion = "question"
)

// maxAGUIResumes bounds RunAgentInput.resume: a turn waits on no more
// calls than a model asks for in one step.
const maxAGUIResumes = 64

// aguiInterruptID is what an interrupt's id names: a call of a turn that
// waits for a person.
type aguiInterruptID struct {
	JobID      string
	Kind       string // aguiKindApproval or aguiKindQuestion
	ApprovalID string // an approval's
	CallID     string
}

func (id aguiInterruptID) String() string {
	if id.Kind == aguiKindApproval {
		return id.JobID + "/" + aguiKindApproval + "/" + id.ApprovalID + "/" + id.CallID
	}
	return id.JobID + "/" + aguiKindQuestion + "/" + id.CallID
}

// parseInterruptID reads an interrupt's id.
func parseInterruptID(s string) (aguiInterruptID, error) {
	bad := func(why string) error {
		return agent.Errorf(agent.CodeInvalid, "interruptId %q is not an interrupt of this agent's: %s", words.Clip(s, 2*gateway.MaxQuoted), why)
	}
	job, rest, _ := strings.Cut(s, "/")
	kind, rest, _ := strings.Cut(rest, "/")
	id := aguiInterruptID{JobID: job, Kind: kind, CallID: rest}
	switch kind {
	case aguiKindApproval:
		id.ApprovalID, id.CallID, _ = strings.Cut(rest, "/")
		if id.ApprovalID == "" {
			return id, bad("it names no approval id")
		}
		if err := agent.ValidateID("the approval id", id.ApprovalID); err != nil {
			return id, bad(err.Error())
		}
	case aguiKindQuestion:
	default:
		return id, bad(`want "<job id>/approval/<approval id>/<call id>" or "<job id>/question/<call id>", as RUN_FINISHED's interrupts name them`)
	}
	if job == "" || id.CallID == "" {
		return id, bad("it names no turn or no call")
	}
	if err := agent.ValidateID("the job id", job); err != nil {
		return id, bad(err.Error())
	}
	if len(id.CallID) > agent.MaxKeyLength || strings.TrimSpace(id.CallID) != id.CallID {
		return id, bad("its call id is not one a turn makes")
	}
	return id, nil
}

// aguiResume is one answer to an interrupt (RunAgentInput.resume[]), as
// the turn takes it.
type aguiResume struct {
	Interrupt aguiInterruptID
	// Cancelled: the person closed the interrupt without answering
	// (status "cancelled"); a call's approval is then rejected.
	Cancelled bool
	// Approved and Reason are an approval's decision.
	Approved bool
	Reason   string
	// Answer is a question's answer.
	Answer string
}

// aguiCancelledReason is the reason of an approval whose interrupt was
// cancelled: the model reads it as the rejected call's result.
const aguiCancelledReason = "the person asked closed the approval request without approving the call"

// aguiResumes reads RunAgentInput.resume: one answer per interrupt, all of
// one turn's. Members of an entry the protocol adds later are left
// unread; its payload is read strictly, as the interrupt's responseSchema
// says, so that a member the gateway would not act on (editedArgs) is
// refused rather than dropped.
func aguiResumes(raw json.RawMessage) ([]aguiResume, error) {
	if len(raw) == 0 || gateway.JSONKind(raw) == 'n' {
		return nil, nil
	}
	var list []json.RawMessage
	if gateway.JSONKind(raw) != '[' || json.Unmarshal(raw, &list) != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "RunAgentInput.resume: want a list of {interruptId, status, payload?}")
	}
	if len(list) == 0 {
		return nil, nil
	}
	if len(list) > maxAGUIResumes {
		return nil, agent.Errorf(agent.CodeInvalid, "RunAgentInput.resume has %d entries; the limit is %d", len(list), maxAGUIResumes)
	}
	out := make([]aguiResume, 0, len(list))
	for i, r := range list {
		at := "resume[" + strconv.Itoa(i) + "]"
		rs, err := aguiResumeEntry(r, at)
		if err != nil {
			return nil, err
		}
		for _, prev := range out {
			switch {
			case prev.Interrupt == rs.Interrupt:
				return nil, agent.Errorf(agent.CodeInvalid, "%s answers interrupt %q a second time", at, words.Clip(rs.Interrupt.String(), 2*gateway.MaxQuoted))
			case prev.Interrupt.JobID != rs.Interrupt.JobID:
				return nil, agent.Errorf(agent.CodeInvalid, "%s answers an interrupt of turn %q, resume[0] one of turn %q: a run resumes the interrupts of one run",
					at, rs.Interrupt.JobID, prev.Interrupt.JobID)
			}
		}
		out = append(out, rs)
	}
	return out, nil
}

// aguiResumeEntry reads one entry of RunAgentInput.resume.
func aguiResumeEntry(raw json.RawMessage, at string) (aguiResume, error) {
	var rs aguiResume
	var fields map[string]json.RawMessage
	if gateway.JSONKind(raw) != '{' || json.Unmarshal(raw, &fields) != nil {
		return rs, agent.Errorf(agent.CodeInvalid, "%s: want {interruptId, status, payload?}", at)
	}
	var id, status string
	if err := gateway.JSONString(fields, "interruptId", at, &id); err != nil {
		return rs, err
	}
	if err := gateway.JSONString(fields, "status", at, &status); err != nil {
		return rs, err
	}
	if m, ok := fields["metadata"]; ok && gateway.JSONKind(m) != '{' {
		return rs, agent.Errorf(agent.CodeInvalid, "%s.metadata: want an object", at)
	}
	if id == "" {
		return rs, agent.Errorf(agent.CodeInvalid, "%s.interruptId is required: the id of the interrupt it answers", at)
	}
	var err error
	if rs.Interrupt, err = parseInterruptID(id); err != nil {
		return rs, err
	}
	switch status {
	case "resolved":
	case "cancelled":
		rs.Cancelled = true
	case "":
		return rs, agent.Errorf(agent.CodeInvalid, `%s.status is required: "resolved" or "cancelled"`, at)
	default:
		return rs, agent.Errorf(agent.CodeInvalid, `%s.status %q: want "resolved" or "cancelled"`, at, words.Clip(status, gateway.MaxQuoted))
	}
	payload := fields["payload"]
	switch {
	case rs.Interrupt.Kind == aguiKindQuestion && rs.Cancelled:
		return rs, agent.Errorf(agent.CodeInvalid, `%s cancels question %q: a question is answered (status "resolved", payload {"answer": "…"}) or closes unanswered at its deadline`,
			at, words.Clip(rs.Interrupt.CallID, gateway.MaxQuoted))
	case rs.Interrupt.Kind == aguiKindQuestion:
		rs.Answer, err = aguiAnswerPayload(payload, at)
	case rs.Cancelled:
		rs.Reason = aguiCancelledReason // a payload, which should be absent, says nothing
	default:
		rs.Approved, rs.Reason, err = aguiApprovalPayload(payload, at)
	}
	return rs, err
}

// aguiApprovalPayload reads an approval's payload: {approved, reason?}.
func aguiApprovalPayload(raw json.RawMessage, at string) (bool, string, error) {
	if len(raw) == 0 || gateway.JSONKind(raw) == 'n' {
		return false, "", agent.Errorf(agent.CodeInvalid, `%s.payload is required: {"approved": true|false, "reason"?: "…"}`, at)
	}
	if gateway.JSONKind(raw) == '{' {
		var probe map[string]json.RawMessage
		if json.Unmarshal(raw, &probe) == nil {
			if _, ok := probe["editedArgs"]; ok {
				return false, "", agent.Errorf(agent.CodeInvalid, "%s.payload.editedArgs: a call's arguments cannot be edited; approve or reject the call as the model made it", at)
			}
		}
	}
	fields, err := gateway.JSONObject(at+".payload", raw, []string{"approved", "reason"})
	if err != nil {
		return false, "", err
	}
	var p struct {
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	}
	if err := gateway.JSONMember(fields, "approved", at+".payload", "true or false", &p.Approved); err != nil {
		return false, "", err
	}
	if err := gateway.JSONString(fields, "reason", at+".payload", &p.Reason); err != nil {
		return false, "", err
	}
	if p.Approved == nil {
		return false, "", agent.Errorf(agent.CodeInvalid, "%s.payload.approved is required: true runs the call, false rejects it", at)
	}
	return *p.Approved, p.Reason, nil
}

// aguiAnswerPayload reads a question's payload: {answer}, or the answer's
// text alone.
func aguiAnswerPayload(raw json.RawMessage, at string) (string, error) {
	var answer string
	switch gateway.JSONKind(raw) {
	case '"':
		_ = json.Unmarshal(raw, &answer)
	case '{':
		fields, err := gateway.JSONObject(at+".payload", raw, []string{"answer"})
		if err != nil {
			return "", err
		}
		if err := gateway.JSONString(fields, "answer", at+".payload", &answer); err != nil {
			return "", err
		}
	default:
		return "", agent.Errorf(agent.CodeInvalid, `%s.payload is required: {"answer": "…"}`, at)
	}
	if strings.TrimSpace(answer) == "" {
		return "", agent.Errorf(agent.CodeInvalid, "%s.payload.answer has no text", at)
	}
	return answer, nil
}

// aguiResumeTurn checks that the interrupts a run resumes are calls of a
// turn of the caller's tenant, of this agent and of the run's thread,
// and returns that turn, whose follow gives the turn the answers and
// then follows its events from the first.
func (a *server) aguiResumeTurn(r *http.Request, agentID string, in aguiInput) (aguiTurn, error) {
	ctx := r.Context()
	jobID := in.Resume[0].Interrupt.JobID
	// An answer is the credential's holder's, with the role its method
	// needs: an approval is Approve's (the approver role), an answer
	// Answer's.
	methods := map[string]string{aguiKindApproval: pb.AgentService_Approve_FullMethodName, aguiKindQuestion: pb.AgentService_Answer_FullMethodName}
	for _, rs := range in.Resume {
		if _, err := a.Caller(r, r.Header.Values("Authorization"), methods[rs.Interrupt.Kind]); err != nil {
			return aguiTurn{}, err
		}
	}
	notFound := agent.Errorf(agent.CodeNotFound, "interrupt %q is not one of a turn of agent %q on thread %q: resume a run's interrupts on the thread and agent it ran on",
		words.Clip(in.Resume[0].Interrupt.String(), 2*gateway.MaxQuoted), agentID, in.ThreadID)
	turn, err := a.st.Turn(ctx, gateway.TenantOf(ctx), jobID)
	switch {
	case agent.IsCode(err, agent.CodeNotFound):
		return aguiTurn{}, notFound
	case err != nil:
		return aguiTurn{}, err
	case turn.AgentID != agentID:
		return aguiTurn{}, notFound
	case in.ThreadID != "" && in.ThreadID != turn.SessionID && !(turn.SessionID == "" && in.ThreadID == jobID):
		// A run without a thread is a thread of its own, named by its job.
		return aguiTurn{}, notFound
	}
	threadID := in.ThreadID
	if threadID == "" {
		threadID = turn.SessionID
		threadID = cmp.Or(threadID, jobID)
	}
	runID := in.RunID
	if runID == "" {
		runID = gateway.NewJobID()
	}
	streamID := contract.TurnWorkflowID(gateway.TenantOf(ctx), jobID)
	return aguiTurn{threadID: threadID, runID: runID, jobID: jobID, streamID: streamID,
		follow: func(ctx context.Context, send func(agent.Event) error) error {
			if err := a.aguiGive(ctx, streamID, in.Resume); err != nil {
				return err
			}
			return a.Service().Events().Follow(ctx, streamID, 0, send)
		}}, nil
}

// aguiGive gives the turn a resume's answers, whole or not at all: each
// answer to a call that waits is checked as the turn would check it
// before any is given, and answers to calls that wait no more — decided
// already, which is harmless, or never asked, which is refused — are
// given first, as they change nothing.
func (a *server) aguiGive(ctx context.Context, streamID string, resumes []aguiResume) error {
	var approvals []agent.PendingApproval
	var questions []agent.PendingQuestion
	var err error
	if slices.ContainsFunc(resumes, func(rs aguiResume) bool { return rs.Interrupt.Kind == aguiKindApproval }) {
		if approvals, err = turnclient.PendingApprovals(ctx, a.Service().Client(), streamID); err != nil {
			return err
		}
	}
	if slices.ContainsFunc(resumes, func(rs aguiResume) bool { return rs.Interrupt.Kind == aguiKindQuestion }) {
		if questions, err = turnclient.PendingQuestions(ctx, a.Service().Client(), streamID); err != nil {
			return err
		}
	}
	var waiting []aguiResume
	for _, rs := range resumes {
		waits, err := aguiCheck(ctx, rs, approvals, questions)
		if err != nil {
			return err
		}
		if waits {
			waiting = append(waiting, rs)
		} else if err := a.aguiAnswer(ctx, streamID, rs); err != nil {
			return err
		}
	}
	for _, rs := range waiting {
		if err := a.aguiAnswer(ctx, streamID, rs); err != nil {
			return err
		}
	}
	return nil
}

// aguiCheck checks an answer against what the turn waits for, as the
// turn will: whether its call waits, and if so that the answer is one
// the turn takes (an approval bound to the call, an answer of the
// question's choices from a holder of its role).
func aguiCheck(ctx context.Context, rs aguiResume, approvals []agent.PendingApproval, questions []agent.PendingQuestion) (bool, error) {
	id := rs.Interrupt
	if id.Kind == aguiKindQuestion {
		i := slices.IndexFunc(questions, func(q agent.PendingQuestion) bool { return q.CallID == id.CallID })
		if i < 0 {
			return false, nil
		}
		a := gateway.CallerOf(ctx).AnswerQuestion(id.CallID, rs.Answer)
		if err := a.Validate(); err != nil {
			return true, err
		}
		return true, questions[i].Fits(a)
	}
	i := slices.IndexFunc(approvals, func(p agent.PendingApproval) bool { return p.CallID == id.CallID })
	if i < 0 {
		return false, nil
	}
	if p := approvals[i]; p.ApprovalID != "" && p.ApprovalID != id.ApprovalID {
		return true, agent.Errorf(agent.CodeNotFound, "approval %s is not the one tool call %q waits with: the interrupt is of another step or run of the turn, and decides nothing",
			words.Clip(id.ApprovalID, 64), id.CallID)
	}
	d := agent.NewApprovalDecision(id.CallID, rs.Approved, rs.Reason, gateway.CallerOf(ctx).Name)
	return true, d.Validate()
}

// aguiAnswer gives the turn one answer, as every door does. An interrupt
// answered already (this resume sent again, or an answer from another
// door first) is no error: the run shows what the turn made of it.
func (a *server) aguiAnswer(ctx context.Context, streamID string, rs aguiResume) error {
	var err error
	if rs.Interrupt.Kind == aguiKindQuestion {
		_, err = a.Service().AnswerQuestion(ctx, streamID, gateway.CallerOf(ctx).AnswerQuestion(rs.Interrupt.CallID, rs.Answer))
	} else {
		d := agent.NewApprovalDecision(rs.Interrupt.CallID, rs.Approved, rs.Reason, "")
		d.ApprovalID = rs.Interrupt.ApprovalID
		_, err = a.Service().Decide(ctx, streamID, d)
	}
	if agent.IsCode(err, agent.CodeConflict) {
		return nil
	}
	return err
}
