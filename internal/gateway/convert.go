package gateway

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// toTurnRequest reads a request for the caller's token: the tenant and
// the caller (name and roles) come from the token, never from the body.
func toTurnRequest(in *pb.TurnRequest, caller Token) agent.TurnRequest {
	if in == nil {
		in = &pb.TurnRequest{}
	}
	r := agent.TurnRequest{
		Version: in.GetVersion(), JobID: in.GetJobId(), TenantID: caller.Tenant, AgentID: in.GetAgentId(),
		SessionID: in.GetSessionId(), Prompt: in.GetPrompt(), History: in.GetHistory(),
		TimeoutSec: int(in.GetTimeoutSec()), RunID: in.GetRunId(), NodeID: in.GetNodeId(),
		WorkflowTag: in.GetWorkflowTag(), Notify: in.GetNotify(),
		Context: toContext(in.GetContext()), Caller: caller.Caller(),
		Model: in.GetModel(), WorkflowOwner: in.GetWorkflowOwner(), UserID: in.GetUserId(), RetryCount: int(in.GetRetryCount()),
		AgentVersion: int(in.GetAgentVersion()), StreamWindowSec: int(in.GetStreamWindowSec()),
		Deliver: toDeliverTo(in.GetDeliver()),
	}
	if s := in.GetOutputSchemaJson(); s != "" {
		r.OutputSchema = json.RawMessage(s)
	}
	for _, p := range in.GetParts() {
		r.Parts = append(r.Parts, agent.Part{Type: p.GetType(), Text: p.GetText(), URL: p.GetUrl(), MIMEType: p.GetMimeType(), Name: p.GetName()})
	}
	if in.Stream != nil {
		r.Stream = new(in.GetStream())
	}
	if c := in.GetCreatedAt(); c != nil {
		// A timestamp out of range stays what it was, which Validate
		// refuses as no RFC 3339 time.
		r.CreatedAt = fmt.Sprintf("{seconds: %d, nanos: %d}", c.GetSeconds(), c.GetNanos())
		if c.CheckValid() == nil {
			r.CreatedAt = c.AsTime().UTC().Format(time.RFC3339Nano)
		}
	}
	return r
}

// toDeliverTo reads a request's deliver targets; nil when it names none.
func toDeliverTo(list []*pb.DeliverTo) []agent.DeliverTo {
	var out []agent.DeliverTo
	for _, d := range list {
		out = append(out, agent.DeliverTo{Target: d.GetTarget(), ChatID: d.GetChatId()})
	}
	return out
}

// toContext reads what a client says about its request: hints, exposed to
// policies and rules as client.* (agent.TurnContext).
func toContext(c *pb.TurnContext) agent.TurnContext {
	var out agent.TurnContext
	if c == nil {
		return out
	}
	out = agent.TurnContext{UserRole: c.GetUserRole(), UIPage: c.GetUiPage()}
	if len(c.GetMetadata()) > 0 {
		out.Metadata = c.GetMetadata()
	}
	for _, p := range c.GetPreviousResults() {
		out.PreviousResults = append(out.PreviousResults, agent.PreviousResult{NodeID: p.GetNodeId(), ResultRef: p.GetResultRef()})
	}
	if st := c.GetWorkflowState(); st != nil {
		// encoding/json sorts the keys: the same state is the same bytes.
		// A Struct's values are JSON values, so it always encodes.
		out.WorkflowState, _ = json.Marshal(st.AsMap())
	}
	return out
}

func toPBError(e *agent.TurnError) *pb.TurnError {
	if e == nil {
		return nil
	}
	return &pb.TurnError{Type: e.Type, Message: e.Message, Retryable: e.Retryable, Tool: e.Tool, Step: e.Step}
}

func toPBResult(r agent.TurnResult, streamID string) *pb.TurnResult {
	m := r.Metadata
	out := &pb.TurnResult{
		Version: r.Version, JobId: r.JobID, Status: r.Status, Output: r.Output, ResultRef: r.ResultRef,
		ResultPreviewJson: string(r.ResultPreview), Error: toPBError(r.Error), StreamId: streamID, DataRef: r.DataRef,
		OutputJson: string(r.OutputJSON), Partial: r.Partial, Steered: r.Steered, Channel: r.Channel, SessionId: r.SessionID,
		Metadata: &pb.ResultMetadata{
			AgentId: m.AgentID, AgentVersion: int32(m.AgentVersion), RouteRule: m.RouteRule,
			TokensUsed: int64(m.TokensUsed), CacheHit: m.CacheHit, ExecutionTimeMs: m.ExecutionTimeMS, LlmModel: m.LLMModel,
			CachedTokens: int64(m.CachedTokens),
		},
	}
	if !r.CompletedAt.IsZero() {
		out.CompletedAt = timestamppb.New(r.CompletedAt)
	}
	for _, c := range m.ToolCalls {
		out.Metadata.ToolCalls = append(out.Metadata.ToolCalls, &pb.ToolCallRecord{CallId: c.CallID, Tool: c.Tool, ArgsJson: string(c.Args), Status: c.Status, CacheHit: c.CacheHit})
	}
	for _, b := range r.Blocks {
		out.Blocks = append(out.Blocks, &pb.ContentBlock{Type: b.Type, Text: b.Text, Ref: b.Ref, MimeType: b.MIMEType, Name: b.Name,
			Json: string(b.JSON), CallId: b.CallID, Partial: b.Partial})
	}
	for _, c := range r.Citations {
		out.Citations = append(out.Citations, &pb.Citation{ChunkId: c.ChunkID, DocumentId: c.DocumentID, DocumentTitle: c.DocumentTitle, Position: int32(c.Position)})
	}
	return out
}

var statuses = map[string]pb.Status{
	agent.StreamRunning:         pb.Status_STATUS_RUNNING,
	agent.StreamWaitingApproval: pb.Status_STATUS_WAITING_APPROVAL,
	agent.StreamRetrying:        pb.Status_STATUS_RETRYING,
	agent.StreamCompleted:       pb.Status_STATUS_COMPLETED,
	agent.StreamFailed:          pb.Status_STATUS_FAILED,
	agent.StreamCanceled:        pb.Status_STATUS_CANCELED,
	agent.StreamWaitingInput:    pb.Status_STATUS_WAITING_INPUT,
}

func toPBTool(t *agent.ToolEvent) *pb.ToolEvent {
	if t == nil {
		return &pb.ToolEvent{}
	}
	out := &pb.ToolEvent{CallId: t.CallID, Name: t.Name, ArgsJson: string(t.Args), Status: t.Status, Output: t.Output, Reason: t.Reason,
		Message: t.Message, Source: t.Source, FromToolkit: t.FromToolkit, ApprovalId: t.ApprovalID, Resend: t.Resend}
	if t.Data != nil {
		b, _ := json.Marshal(t.Data) // a struct of plain fields always marshals
		out.DataJson = string(b)
	}
	if t.Deadline != nil {
		out.Deadline = timestamppb.New(*t.Deadline)
	}
	return out
}

func toPBEvent(e agent.Event) *pb.StreamEvent {
	out := &pb.StreamEvent{Meta: &pb.StreamEventMeta{StreamId: e.StreamID, EventIndex: e.Index}}
	if c := e.Child; c != nil {
		out.Meta.Child = &pb.ChildEvent{CallId: c.CallID, StreamId: c.StreamID, EventIndex: c.Index}
	}
	switch e.Kind {
	case agent.EventStatus:
		out.Event = &pb.StreamEvent_Status{Status: &pb.StatusEvent{
			Status: statuses[e.Status], VoidFrom: e.VoidFrom, Attempt: int32(e.Attempt), Step: int32(e.Step), Error: toPBError(e.Error),
		}}
	case agent.EventToken:
		out.Event = &pb.StreamEvent_Token{Token: &pb.TokenEvent{Text: e.Text, Step: int32(e.Step), Attempt: int32(e.Attempt)}}
	case agent.EventToolStart:
		out.Event = &pb.StreamEvent_ToolStart{ToolStart: toPBTool(e.Tool)}
	case agent.EventToolEnd:
		out.Event = &pb.StreamEvent_ToolEnd{ToolEnd: toPBTool(e.Tool)}
	case agent.EventToolProgress:
		out.Event = &pb.StreamEvent_ToolProgress{ToolProgress: toPBTool(e.Tool)}
	case agent.EventApprovalRequired:
		out.Event = &pb.StreamEvent_ApprovalRequired{ApprovalRequired: toPBTool(e.Tool)}
	case agent.EventContent:
		out.Event = &pb.StreamEvent_Content{Content: &pb.ContentEvent{BlockJson: string(e.Content)}}
	case agent.EventUsage:
		u := OrEmpty(e.Usage)
		out.Event = &pb.StreamEvent_Usage{Usage: &pb.UsageEvent{Step: int32(e.Step), PromptTokens: int64(u.PromptTokens),
			CompletionTokens: int64(u.CompletionTokens), TotalTokens: int64(u.TotalTokens), Model: e.Model}}
	case agent.EventError:
		out.Event = &pb.StreamEvent_Error{Error: &pb.ErrorEvent{Error: toPBError(e.Error)}}
	case agent.EventReasoning:
		out.Event = &pb.StreamEvent_Reasoning{Reasoning: &pb.TokenEvent{Text: e.Text, Step: int32(e.Step), Attempt: int32(e.Attempt)}}
	case agent.EventToolArgsDelta:
		t := OrEmpty(e.Tool)
		out.Event = &pb.StreamEvent_ToolArgsDelta{ToolArgsDelta: &pb.ToolArgsDeltaEvent{CallId: t.CallID, Name: t.Name,
			ArgsDelta: t.ArgsDelta, Step: int32(e.Step), Attempt: int32(e.Attempt)}}
	case agent.EventStepStart:
		out.Event = &pb.StreamEvent_StepStart{StepStart: &pb.StepEvent{Step: int32(e.Step)}}
	case agent.EventStepFinish:
		out.Event = &pb.StreamEvent_StepFinish{StepFinish: &pb.StepEvent{Step: int32(e.Step), FinishReason: e.FinishReason,
			Usage: toPBTokenUsage(e.Usage), Model: e.Model}}
	case agent.EventApprovalDecided:
		t, a := OrEmpty(e.Tool), OrEmpty(e.Approval)
		out.Event = &pb.StreamEvent_ApprovalDecided{ApprovalDecided: &pb.ApprovalDecidedEvent{CallId: t.CallID, Name: t.Name,
			Outcome: a.Outcome, Approver: a.Approver, Reason: a.Reason, Via: a.Via, GrantId: a.GrantID}}
	case agent.EventMessageStart:
		out.Event = &pb.StreamEvent_MessageStart{MessageStart: toPBMessage(e.Message)}
	case agent.EventMessageEnd:
		out.Event = &pb.StreamEvent_MessageEnd{MessageEnd: toPBMessage(e.Message)}
	case agent.EventSteered:
		out.Event = &pb.StreamEvent_Steered{Steered: &pb.SteeredEvent{Id: toPBMessage(e.Message).GetId(), Text: e.Text}}
	case agent.EventQuestion:
		t, q := OrEmpty(e.Tool), OrEmpty(e.Question)
		ev := &pb.QuestionEvent{CallId: t.CallID, Name: t.Name, Text: q.Text, Choices: q.Choices, AllowOther: q.AllowOther, Role: q.Role}
		if t.Deadline != nil {
			ev.Deadline = timestamppb.New(*t.Deadline)
		}
		out.Event = &pb.StreamEvent_Question{Question: ev}
	case agent.EventQuestionAnswered:
		t, q := OrEmpty(e.Tool), OrEmpty(e.Question)
		out.Event = &pb.StreamEvent_QuestionAnswered{QuestionAnswered: &pb.QuestionAnsweredEvent{CallId: t.CallID, Name: t.Name,
			Outcome: q.Outcome, Answerer: q.Answerer, Via: q.Via}}
	case agent.EventCustom:
		c, t := OrEmpty(e.Custom), OrEmpty(e.Tool)
		out.Event = &pb.StreamEvent_Custom{Custom: &pb.CustomEvent{Name: c.Name, Id: c.ID, ValueJson: string(c.Value),
			CallId: t.CallID, Tool: t.Name}}
	}
	return out
}

// OrEmpty is what p points to; the zero value for nil (an event's
// payload a malformed event lacks).
func OrEmpty[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func toPBTokenUsage(u *agent.Usage) *pb.TokenUsage {
	if u == nil {
		return nil
	}
	return &pb.TokenUsage{PromptTokens: int64(u.PromptTokens), CompletionTokens: int64(u.CompletionTokens),
		TotalTokens: int64(u.TotalTokens), CachedTokens: int64(u.CachedTokens), ReasoningTokens: int64(u.ReasoningTokens)}
}

func toPBMessage(m *agent.MessageEvent) *pb.MessageEvent {
	if m == nil {
		return &pb.MessageEvent{}
	}
	return &pb.MessageEvent{Id: m.ID, StreamId: m.StreamID, Status: m.Status, OnBusy: m.OnBusy}
}

// FromPBEvent converts an event back to the domain type, for clients
// written in Go (the starter) that share its rendering and ReplayText.
func FromPBEvent(e *pb.StreamEvent) agent.Event {
	out := agent.Event{StreamID: e.GetMeta().GetStreamId(), Index: e.GetMeta().GetEventIndex()}
	if c := e.GetMeta().GetChild(); c != nil {
		out.Child = &agent.ChildEvent{CallID: c.GetCallId(), StreamID: c.GetStreamId(), Index: c.GetEventIndex()}
	}
	if !fromPBStep(&out, e) {
		fromPBInteraction(&out, e)
	}
	return out
}

// fromPBStep fills in out from an event of a step's run — its status,
// what the model streams, its usage, its start and finish — and reports
// whether e was one; the kinds are split from fromPBInteraction's only to
// keep each conversion short.
func fromPBStep(out *agent.Event, e *pb.StreamEvent) bool {
	switch ev := e.GetEvent().(type) {
	case *pb.StreamEvent_Status:
		out.Kind = agent.EventStatus
		for k, v := range statuses {
			if v == ev.Status.GetStatus() {
				out.Status = k
			}
		}
		out.VoidFrom, out.Attempt, out.Step = ev.Status.GetVoidFrom(), int(ev.Status.GetAttempt()), int(ev.Status.GetStep())
		out.Error = fromPBTurnError(ev.Status.GetError())
	case *pb.StreamEvent_Token:
		out.Kind, out.Text, out.Step, out.Attempt = agent.EventToken, ev.Token.GetText(), int(ev.Token.GetStep()), int(ev.Token.GetAttempt())
	case *pb.StreamEvent_Content:
		out.Kind, out.Content = agent.EventContent, json.RawMessage(ev.Content.GetBlockJson())
	case *pb.StreamEvent_Usage:
		out.Kind, out.Step, out.Model = agent.EventUsage, int(ev.Usage.GetStep()), ev.Usage.GetModel()
		out.Usage = &agent.Usage{PromptTokens: int(ev.Usage.GetPromptTokens()), CompletionTokens: int(ev.Usage.GetCompletionTokens()),
			TotalTokens: int(ev.Usage.GetTotalTokens())}
	case *pb.StreamEvent_Error:
		out.Kind, out.Error = agent.EventError, fromPBTurnError(ev.Error.GetError())
	case *pb.StreamEvent_Reasoning:
		r := ev.Reasoning
		out.Kind, out.Text, out.Step, out.Attempt = agent.EventReasoning, r.GetText(), int(r.GetStep()), int(r.GetAttempt())
	case *pb.StreamEvent_ToolArgsDelta:
		d := ev.ToolArgsDelta
		out.Kind, out.Step, out.Attempt = agent.EventToolArgsDelta, int(d.GetStep()), int(d.GetAttempt())
		out.Tool = &agent.ToolEvent{CallID: d.GetCallId(), Name: d.GetName(), ArgsDelta: d.GetArgsDelta()}
	case *pb.StreamEvent_StepStart:
		out.Kind, out.Step = agent.EventStepStart, int(ev.StepStart.GetStep())
	case *pb.StreamEvent_StepFinish:
		s := ev.StepFinish
		out.Kind, out.Step, out.FinishReason, out.Model = agent.EventStepFinish, int(s.GetStep()), s.GetFinishReason(), s.GetModel()
		if u := s.GetUsage(); u != nil {
			out.Usage = &agent.Usage{PromptTokens: int(u.GetPromptTokens()), CompletionTokens: int(u.GetCompletionTokens()),
				TotalTokens: int(u.GetTotalTokens()), CachedTokens: int(u.GetCachedTokens()), ReasoningTokens: int(u.GetReasoningTokens())}
		}
	default:
		return false
	}
	return true
}

// fromPBInteraction fills in out from an event of what the turn does
// beyond the model's stream: its tool calls, approvals, messages,
// questions and custom events. An event of a kind this build does not
// know leaves out as it is.
func fromPBInteraction(out *agent.Event, e *pb.StreamEvent) {
	switch ev := e.GetEvent().(type) {
	case *pb.StreamEvent_ToolStart:
		out.Kind, out.Tool = agent.EventToolStart, fromPBTool(ev.ToolStart)
	case *pb.StreamEvent_ToolEnd:
		out.Kind, out.Tool = agent.EventToolEnd, fromPBTool(ev.ToolEnd)
	case *pb.StreamEvent_ToolProgress:
		out.Kind, out.Tool = agent.EventToolProgress, fromPBTool(ev.ToolProgress)
	case *pb.StreamEvent_ApprovalRequired:
		out.Kind, out.Tool = agent.EventApprovalRequired, fromPBTool(ev.ApprovalRequired)
	case *pb.StreamEvent_ApprovalDecided:
		a := ev.ApprovalDecided
		out.Kind = agent.EventApprovalDecided
		out.Tool = &agent.ToolEvent{CallID: a.GetCallId(), Name: a.GetName()}
		out.Approval = &agent.ApprovalEvent{Outcome: a.GetOutcome(), Approver: a.GetApprover(), Reason: a.GetReason(), Via: a.GetVia(),
			GrantID: a.GetGrantId()}
	case *pb.StreamEvent_MessageStart:
		out.Kind, out.Message = agent.EventMessageStart, fromPBMessage(ev.MessageStart)
	case *pb.StreamEvent_MessageEnd:
		out.Kind, out.Message = agent.EventMessageEnd, fromPBMessage(ev.MessageEnd)
	case *pb.StreamEvent_Steered:
		out.Kind, out.Message, out.Text = agent.EventSteered, &agent.MessageEvent{ID: ev.Steered.GetId()}, ev.Steered.GetText()
	case *pb.StreamEvent_Question:
		q := ev.Question
		out.Kind = agent.EventQuestion
		out.Tool = &agent.ToolEvent{CallID: q.GetCallId(), Name: q.GetName()}
		if q.GetDeadline() != nil {
			d := q.GetDeadline().AsTime()
			out.Tool.Deadline = &d
		}
		out.Question = &agent.QuestionEvent{Text: q.GetText(), Choices: q.GetChoices(), AllowOther: q.GetAllowOther(), Role: q.GetRole()}
	case *pb.StreamEvent_QuestionAnswered:
		q := ev.QuestionAnswered
		out.Kind = agent.EventQuestionAnswered
		out.Tool = &agent.ToolEvent{CallID: q.GetCallId(), Name: q.GetName()}
		out.Question = &agent.QuestionEvent{Outcome: q.GetOutcome(), Answerer: q.GetAnswerer(), Via: q.GetVia()}
	case *pb.StreamEvent_Custom:
		c := ev.Custom
		out.Kind = agent.EventCustom
		out.Custom = &agent.CustomEvent{Name: c.GetName(), ID: c.GetId()}
		if v := c.GetValueJson(); v != "" {
			out.Custom.Value = json.RawMessage(v)
		}
		if c.GetCallId() != "" || c.GetTool() != "" {
			out.Tool = &agent.ToolEvent{CallID: c.GetCallId(), Name: c.GetTool()}
		}
	}
}

// fromPBTool is toPBTool's inverse. A data preview that does not read
// back is left out: the event's other fields still say what happened.
func fromPBTool(t *pb.ToolEvent) *agent.ToolEvent {
	te := &agent.ToolEvent{CallID: t.GetCallId(), Name: t.GetName(), Status: t.GetStatus(), Output: t.GetOutput(), Reason: t.GetReason(),
		Message: t.GetMessage(), Source: t.GetSource(), FromToolkit: t.GetFromToolkit(), ApprovalID: t.GetApprovalId(), Resend: t.GetResend()}
	if d := t.GetDataJson(); d != "" {
		var p agent.DataPreview
		if json.Unmarshal([]byte(d), &p) == nil {
			te.Data = &p
		}
	}
	if a := t.GetArgsJson(); a != "" {
		te.Args = json.RawMessage(a)
	}
	if t.GetDeadline() != nil {
		te.Deadline = new(t.GetDeadline().AsTime())
	}
	return te
}

// fromPBTurnError is toPBError's inverse; nil for none.
func fromPBTurnError(e *pb.TurnError) *agent.TurnError {
	if e == nil {
		return nil
	}
	return &agent.TurnError{Type: e.GetType(), Message: e.GetMessage(), Retryable: e.GetRetryable(), Tool: e.GetTool(), Step: e.GetStep()}
}

func fromPBMessage(m *pb.MessageEvent) *agent.MessageEvent {
	return &agent.MessageEvent{ID: m.GetId(), StreamID: m.GetStreamId(), Status: m.GetStatus(), OnBusy: m.GetOnBusy()}
}

func toPBAgent(a agent.Agent, isDefault bool) *pb.AgentInfo {
	l := a.Limits.WithDefaults()
	out := &pb.AgentInfo{Id: a.ID, Version: int32(a.Version), Description: a.Description, Model: a.Model, Default: isDefault,
		Limits: &pb.Limits{MaxIterations: int32(l.MaxIterations), TurnTimeoutSec: int32(l.TurnTimeoutSec), TokenBudget: int32(l.TokenBudget),
			ApprovalTimeoutSec: int32(l.ApprovalTimeoutSec), MaxOutputTokens: int32(l.MaxOutputTokens),
			TurnsPerMinute: int32(l.TurnsPerMinute)}, Expose: a.Expose}
	for _, t := range a.Tools {
		approval := cmp.Or(t.Approval, agent.ApprovalNever)
		out.Tools = append(out.Tools, &pb.ToolInfo{Name: t.Name, Kind: t.Kind, Description: t.Description,
			ParametersJson: string(t.Parameters), Approval: approval, Source: t.Entry(), FromToolkit: t.FromToolkit})
	}
	return out
}

func toPBQuestion(q agent.PendingQuestion) *pb.PendingQuestion {
	return &pb.PendingQuestion{CallId: q.CallID, Tool: q.Tool, Question: q.Question, Choices: q.Choices, AllowOther: q.AllowOther,
		Role: q.Role, AskedAt: timestamppb.New(q.AskedAt), Deadline: timestamppb.New(q.Deadline)}
}

func toPBPending(p agent.PendingApproval) *pb.PendingApproval {
	return &pb.PendingApproval{CallId: p.CallID, Tool: p.Tool, ArgsJson: string(p.Args),
		RequestedAt: timestamppb.New(p.RequestedAt), Deadline: timestamppb.New(p.Deadline), ApprovalId: p.ApprovalID, Resend: p.Resend}
}

// fromPBMatch is an approval's argument match, its values as JSON.
func fromPBMatch(in []*pb.ArgCondition) (agent.ArgsMatch, error) {
	var out agent.ArgsMatch
	for i, c := range in {
		if c.GetEquals() == nil {
			return nil, agent.Errorf(agent.CodeInvalid, "match[%d].equals is required: the JSON value the argument must have", i)
		}
		v, err := json.Marshal(c.GetEquals().AsInterface())
		if err != nil {
			return nil, agent.Errorf(agent.CodeInvalid, "match[%d].equals: %v", i, err)
		}
		out = append(out, agent.ArgCondition{Path: c.GetPath(), Equals: v})
	}
	return out, nil
}

func toPBMatch(m agent.ArgsMatch) []*pb.ArgCondition {
	var out []*pb.ArgCondition
	for _, c := range m {
		v := &structpb.Value{}
		if err := protojson.Unmarshal(c.Equals, v); err != nil {
			continue // a stored match is valid JSON: unreachable
		}
		out = append(out, &pb.ArgCondition{Path: c.Path, Equals: v})
	}
	return out
}

func toPBGrant(g agent.Grant) *pb.Grant {
	out := &pb.Grant{Id: g.ID, Scope: g.Scope, SessionId: g.SessionID, StreamId: contract.TurnWorkflowID(g.TenantID, g.JobID),
		AgentId: g.AgentID, Tool: g.Tool, Match: toPBMatch(g.Match), CallId: g.CallID, ApprovalId: g.ApprovalID,
		Approver: g.Approver, ApproverIssuer: g.ApproverIssuer, ApproverSubject: g.ApproverSubject, Reason: g.Reason,
		CreatedAt: timestamppb.New(g.CreatedAt), RevokedBy: g.RevokedBy, RevokedByIssuer: g.RevokedByIssuer,
		RevokedBySubject: g.RevokedBySubject}
	if g.ExpiresAt != nil {
		out.ExpiresAt = timestamppb.New(*g.ExpiresAt)
	}
	if g.RevokedAt != nil {
		out.RevokedAt = timestamppb.New(*g.RevokedAt)
	}
	return out
}

// toPBList converts each of in with f, in order; nil for none, as a
// message with no items has.
func toPBList[S, T any](in []S, f func(S) *T) []*T {
	if len(in) == 0 {
		return nil
	}
	out := make([]*T, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
