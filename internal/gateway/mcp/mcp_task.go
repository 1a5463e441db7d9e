package mcp

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway"
)

// An MCP task (the Tasks extension of MCP 2026-07-28,
// io.modelcontextprotocol/tasks) is a turn: its id is the turn's stream id,
// the one id every door names the turn by, and its state is read from the
// turn's event log whenever it is asked for, by whichever gateway is
// asked. Nothing of a task is kept apart from its turn:
//
//	turn running                          working (statusMessage: the latest progress)
//	a call waits for approval             input_required, an elicitation per waiting call
//	  (the caller has the approver role)    (approved: boolean, reason)
//	ask_user waits for an answer          input_required, an elicitation per question
//	  (the caller has the question's role)  (answer: string, the choices as an enum)
//	either, and the caller may not decide working ("waiting for a person to approve …")
//	status COMPLETED, FAILED              completed, result = what tools/call answers
//	                                        (a failed turn: isError, as a tool's failure)
//	status CANCELED                       cancelled
//
// A task is never "failed": that status is for JSON-RPC errors, and a
// turn that failed is a tool result with isError, as the spec asks.

// The Tasks extension's names.
const (
	// mcpTasksExtension names the extension in capabilities.
	mcpTasksExtension = "io.modelcontextprotocol/tasks"
	// mcpTasksVersion is the first protocol version with the extension.
	mcpTasksVersion = "2026-07-28"
	// codeMissingClientCapability is the JSON-RPC error of a request that
	// needs a capability its client did not declare.
	codeMissingClientCapability = -32021
	// mcpTaskPollMs is the polling interval tasks suggest.
	mcpTaskPollMs = 1000
)

// Task statuses.
const (
	mcpTaskWorking       = "working"
	mcpTaskInputRequired = "input_required"
	mcpTaskCompleted     = "completed"
	mcpTaskCancelled     = "cancelled"
)

// mcpTask is a task folded from its turn's log.
type mcpTask struct {
	id     string
	events []agent.Event // the turn's own events (not its children's), in order
	// waiting are the approval_required and question events not yet
	// decided or answered, in order.
	waiting []agent.Event
	end     *agent.Event // the terminal status event, once there is one
	last    int64        // the index of the last event folded, a child's too
}

// newMCPTask folds a turn's events into its task.
func newMCPTask(streamID string, events []agent.Event) *mcpTask {
	t := &mcpTask{id: streamID}
	for _, e := range events {
		t.apply(e)
	}
	return t
}

// apply folds one event.
func (t *mcpTask) apply(e agent.Event) {
	t.last = max(t.last, e.Index)
	if e.Child != nil {
		return
	}
	t.events = append(t.events, e)
	switch e.Kind {
	case agent.EventApprovalRequired, agent.EventQuestion:
		if e.Tool != nil {
			t.waiting = append(t.waiting, e)
		}
	case agent.EventApprovalDecided:
		t.settle(agent.EventApprovalRequired, e)
	case agent.EventQuestionAnswered:
		t.settle(agent.EventQuestion, e)
	case agent.EventStatus:
		if e.Terminal() {
			t.end = &e
			t.waiting = nil
		}
	}
}

// settle drops the waiting event of kind that e decides or answers.
func (t *mcpTask) settle(kind agent.EventKind, e agent.Event) {
	if e.Tool == nil {
		return
	}
	for i, w := range t.waiting {
		if w.Kind == kind && w.Tool.CallID == e.Tool.CallID {
			t.waiting = append(t.waiting[:i:i], t.waiting[i+1:]...)
			return
		}
	}
}

// mcpInputKey is the inputRequests key of a waiting event: its kind and
// its index in the log, which no other event ever has, so a key names one
// request over the task's whole life, as the extension asks.
func mcpInputKey(e agent.Event) string {
	prefix := "approval"
	if e.Kind == agent.EventQuestion {
		prefix = "question"
	}
	return prefix + "-" + strconv.FormatInt(e.Index, 10)
}

// inputs are the requests the caller can answer, by key: the approvals
// when the caller may approve, the questions whose role the caller has.
// The rest wait for someone else, over the approvals and questions APIs
// or another door.
func (t *mcpTask) inputs(caller gateway.Token) map[string]agent.Event {
	out := map[string]agent.Event{}
	for _, e := range t.waiting {
		if mayDecide(caller, e) {
			out[mcpInputKey(e)] = e
		}
	}
	return out
}

// mayDecide reports whether caller may decide the waiting event e: an
// approval needs the approver role, a question its own role.
func mayDecide(caller gateway.Token, e agent.Event) bool {
	switch e.Kind {
	case agent.EventApprovalRequired:
		return caller.Has(gateway.RoleApprover)
	case agent.EventQuestion:
		return e.Question != nil && caller.Has(gateway.Role(e.Question.Role))
	}
	return false
}

// mcpElicitation is what the client is asked for a waiting event, as
// an elicitation: the same question whether it is asked during a call
// (elicitation/create) or through a task (inputRequests).
func mcpElicitation(e agent.Event) *mcp.ElicitParams {
	if e.Kind == agent.EventQuestion {
		q := gateway.QuestionOrEmpty(e.Question)
		return &mcp.ElicitParams{Message: q.Text, RequestedSchema: mcpQuestionSchema(q)}
	}
	return &mcp.ElicitParams{
		Message:         fmt.Sprintf("The agent wants to call %s with %s. Approve?", e.Tool.Name, agent.Clip(string(e.Tool.Args), 1000)),
		RequestedSchema: mcpApprovalSchema,
	}
}

// mcpQuestionSchema is what an elicited answer to q asks for.
func mcpQuestionSchema(q agent.QuestionEvent) json.RawMessage {
	answer := map[string]any{"type": "string", "description": "Your answer."}
	if len(q.Choices) > 0 && !q.AllowOther {
		answer["enum"] = q.Choices
	} else if len(q.Choices) > 0 {
		answer["description"] = "Your answer: one of " + strings.Join(q.Choices, ", ") + ", or your own."
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "required": []string{"answer"},
		"properties": map[string]any{"answer": answer}})
	return schema
}

// status is the task's status and its message, for caller; elicits: the
// client can be asked (it declares elicitation), else nothing is asked of
// it and the task works on, waiting for someone who can answer.
func (t *mcpTask) status(caller gateway.Token, elicits bool) (string, string) {
	if t.end != nil {
		switch t.end.Status {
		case agent.StreamCanceled:
			msg := "the turn was cancelled"
			if t.end.Error != nil && t.end.Error.Message != "" {
				msg += ": " + t.end.Error.Message
			}
			return mcpTaskCancelled, msg
		case agent.StreamCompleted:
			return mcpTaskCompleted, ""
		}
		return mcpTaskCompleted, "the turn ended " + strings.ToLower(t.end.Status)
	}
	if n := len(t.inputs(caller)); n > 0 && elicits {
		return mcpTaskInputRequired, fmt.Sprintf("waiting for your input (%d request(s))", n)
	}
	// The latest progress, as a call's progress notifications say it.
	p := &mcpProgress{asks: caller.Has(gateway.RoleApprover) && elicits, elicits: elicits, caller: caller}
	msg := ""
	for _, e := range t.events {
		if e.Kind == agent.EventToken {
			continue // the text is the result's, not a status
		}
		if m := p.message(e); m != "" {
			msg = m
		}
	}
	return mcpTaskWorking, msg
}

// mcpTaskState is a task as the extension's messages carry it: the Task,
// with its status's own fields (DetailedTask). It is the result of
// tools/call (resultType "task") and of tasks/get (resultType
// "complete").
type mcpTaskState struct {
	mcp.ResultBase
	ResultType    string `json:"resultType"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is null: a task lasts as long as its turn is kept (the
	// Temporal namespace's retention after the turn ends); then tasks/get
	// says it is not found.
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	InputRequests  mcp.InputRequestMap `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
}

// mcpTaskTimes are when a task was created and last changed.
type mcpTaskTimes struct{ created, updated time.Time }

// state is the task as caller sees it, from a client that can be asked
// (elicits) or not.
func (t *mcpTask) state(caller gateway.Token, times mcpTaskTimes, resultType string, elicits bool) *mcpTaskState {
	status, msg := t.status(caller, elicits)
	s := &mcpTaskState{ResultType: resultType, TaskID: t.id, Status: status, StatusMessage: msg,
		CreatedAt: times.created.UTC().Format(time.RFC3339Nano), LastUpdatedAt: times.updated.UTC().Format(time.RFC3339Nano)}
	switch status {
	case mcpTaskInputRequired:
		s.InputRequests = mcp.InputRequestMap{}
		for key, e := range t.inputs(caller) {
			s.InputRequests[key] = mcpElicitation(e)
		}
	case mcpTaskCompleted:
		s.Result = mcpResult(t.events, t.id)
	}
	if status == mcpTaskWorking || status == mcpTaskInputRequired {
		s.PollIntervalMs = mcpTaskPollMs
	}
	return s
}
