package mcp

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/gateway"
	"github.com/agentflow/agentflow/internal/gateway/projection"
	"github.com/agentflow/agentflow/internal/words"
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
	// mcpTaskFailed is 2025-11-25's status of a call whose result is an
	// error (the 2026-07-28 extension's task completes with it).
	mcpTaskFailed = "failed"
)

// A task is its creator's, in both protocol versions, as 2025-11-25's
// tasks ask of a server with authorization: its turn's job id begins
// with its creator's mark (mcpTaskJobPrefix: a hash of the token's
// tenant, issuer and subject), then a random part, so no one guesses
// one; and it is a turn the MCP door started (its AgentflowChannel),
// where no caller chooses a job id. tasks/get, tasks/result,
// tasks/update, tasks/cancel of a task that is not the caller's, or not
// a task, say it is not found; tasks/list lists the caller's tasks only.
// Other doors name the turn by the same id as they name every turn of
// the tenant.

// mcpTaskJobPrefix begins the job ids of caller's tasks.
func mcpTaskJobPrefix(caller gateway.Token) string {
	sum := sha256.Sum256([]byte(caller.Principal()))
	return "mcp-task-" + hex.EncodeToString(sum[:16]) + "-"
}

// mcpTaskJob is the job id of a new task of caller's.
func mcpTaskJob(caller gateway.Token) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return mcpTaskJobPrefix(caller) + hex.EncodeToString(b[:])
}

// ownsTask reports whether taskID names a task of caller's (its turn
// may not exist).
func ownsTask(caller gateway.Token, taskID string) bool {
	return strings.HasPrefix(taskID, contract.TurnWorkflowID(caller.Tenant, mcpTaskJobPrefix(caller)))
}

// startedByMCP reports whether the MCP door started the turn a workflow
// runs: its AgentflowChannel search attribute says so.
func startedByMCP(info *workflowpb.WorkflowExecutionInfo) bool {
	p := info.GetSearchAttributes().GetIndexedFields()[contract.SearchChannel.GetName()]
	var channel string
	return p != nil && converter.GetDefaultDataConverter().FromPayload(p, &channel) == nil && channel == agent.ChannelMCP
}

// mcpTask is a task made from its turn's projection
// (internal/gateway/projection, Held: a model call's text once it has
// answered), item by item:
//
//	input required                    waits, until its input is resolved or the turn ends
//	a call's start, progress, end;    the latest is the statusMessage, in the words
//	  input required or resolved;       of a call's progress notifications (mcpWording)
//	  a model call retried
//	answer: text and JSON blocks      the result's text and structured content
//	answer: image and file blocks     the result's resource links, by cas:// ref
//	text, in a log without blocks     the result's text
//	end                               completed or cancelled, with the result
//
// Events of delegated child turns are the child's and are left out.
type mcpTask struct {
	id string
	p  *projection.Projection
	// waiting are the inputs the turn waits for and has not had, in order.
	waiting []projection.Item
	// latest is the last item that tells of the turn's progress.
	latest *projection.Item
	// The answer: its blocks, and its text for a log without them.
	content    []mcp.Content
	structured any
	text       strings.Builder
	end        *projection.Item // the turn's end, once there is one
	last       int64            // the index of the last event folded, a child's too
}

// newMCPTask folds a turn's events into its task.
func newMCPTask(streamID string, events []agent.Event) *mcpTask {
	t := &mcpTask{id: streamID, p: projection.New(projection.Held)}
	for _, e := range events {
		t.apply(e)
	}
	return t
}

// apply folds one event and returns the items it projects to.
func (t *mcpTask) apply(e agent.Event) []projection.Item {
	t.last = max(t.last, e.Index)
	items := t.p.Add(e)
	for _, it := range items {
		t.item(it)
	}
	return items
}

func (t *mcpTask) item(it projection.Item) {
	switch it.Kind {
	case projection.InputRequired:
		t.waiting = append(t.waiting, it)
	case projection.InputResolved:
		// The input it resolves: an approval's decision or a question's
		// answer, of the same call.
		if i := slices.IndexFunc(t.waiting, func(w projection.Item) bool {
			return (w.Question != nil) == (it.Question != nil) && w.Tool.CallID == it.Tool.CallID
		}); i >= 0 {
			t.waiting = slices.Delete(t.waiting, i, i+1)
		}
	case projection.Delta:
		if it.Part == projection.Text {
			t.text.WriteString(it.Text)
		}
	case projection.Answer:
		t.answer(it)
	case projection.End:
		t.end, t.waiting = &it, nil
	}
	// Whether an item tells of progress does not depend on who asks;
	// only its words do (status).
	if (mcpWording{}).say(it) != "" {
		t.latest = &it
	}
}

// answer folds a content block of the answer.
func (t *mcpTask) answer(it projection.Item) {
	b, ok := projection.Block(it.Event)
	if !ok {
		return
	}
	switch b.Type {
	case agent.BlockText:
		t.content = append(t.content, &mcp.TextContent{Text: b.Text})
	case agent.BlockJSON:
		t.structured = b.JSON
	case agent.BlockImage, agent.BlockFile:
		// Read with resources/read, by its ref.
		t.content = append(t.content, &mcp.ResourceLink{URI: b.Ref, Name: cmp.Or(b.Name, b.Ref), MIMEType: b.MIMEType})
	}
}

// result is the answer of a turn that ended, as tools/call answers it:
// its text, its JSON as structured content, or its failure. The turn's
// stream id goes in _meta, for the rest of the API (events, result,
// approvals).
func (t *mcpTask) result() *mcp.CallToolResult {
	meta := mcp.Meta{"agentflow/stream_id": t.id}
	if t.end == nil || t.end.Status != agent.StreamCompleted {
		res := mcpError(t.ended())
		meta[mcpErrorMeta] = turnFailure(t.end)
		res.Meta = meta
		return res
	}
	res := &mcp.CallToolResult{Meta: meta, Content: slices.Clone(t.content), StructuredContent: t.structured}
	if !slices.ContainsFunc(res.Content, func(c mcp.Content) bool { _, ok := c.(*mcp.TextContent); return ok }) {
		// A turn that logged no blocks (recorded before them): its text.
		res.Content = append([]mcp.Content{&mcp.TextContent{Text: t.text.String()}}, res.Content...)
	}
	return res
}

// ended says how a turn that did not complete ended, and why.
func (t *mcpTask) ended() string {
	var status string
	var err *agent.TurnError
	if t.end != nil {
		status, err = t.end.Status, t.end.Error
	}
	msg := "the turn ended " + strings.ToLower(status)
	if err != nil && err.Message != "" {
		msg += ": " + err.Message
	}
	return msg
}

// mcpInputKey is the inputRequests key of an input the turn waits for:
// its kind and its event's index in the log, which no other event ever
// has, so a key names one request over the task's whole life, as the
// extension asks.
func mcpInputKey(it projection.Item) string {
	prefix := "approval"
	if it.Question != nil {
		prefix = "question"
	}
	return prefix + "-" + strconv.FormatInt(it.Event.Index, 10)
}

// inputs are the requests the caller can answer, by key: the approvals
// when the caller may approve, the questions whose role the caller has.
// The rest wait for someone else, over the approvals and questions APIs
// or another door.
func (t *mcpTask) inputs(caller gateway.Token) map[string]projection.Item {
	out := map[string]projection.Item{}
	for _, it := range t.waiting {
		if mayDecide(caller, it) {
			out[mcpInputKey(it)] = it
		}
	}
	return out
}

// mayDecide reports whether caller may give the input it waits for: an
// approval needs the approver role, a question its own role.
func mayDecide(caller gateway.Token, it projection.Item) bool {
	if it.Question != nil {
		return caller.Has(gateway.Role(it.Question.Role))
	}
	return caller.Has(gateway.RoleApprover)
}

// mcpElicitation is what the client is asked for an input the turn
// waits for, as an elicitation: the same question whether it is asked
// during a call (elicitation/create) or through a task (inputRequests).
func mcpElicitation(it projection.Item) *mcp.ElicitParams {
	if it.Question != nil {
		return &mcp.ElicitParams{Message: it.Question.Text, RequestedSchema: mcpQuestionSchema(*it.Question)}
	}
	return &mcp.ElicitParams{
		Message:         fmt.Sprintf("The agent wants to call %s with %s. Approve?", it.Tool.Name, words.Clip(string(it.Tool.Args), 1000)),
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
	if t.latest == nil {
		return mcpTaskWorking, ""
	}
	// The latest progress, as a call's progress notifications say it.
	return mcpTaskWorking, mcpWording{elicits: elicits, caller: caller}.say(*t.latest)
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
	mcpTaskTimes
	// TTLMs is null: a task lasts as long as its turn is kept (the
	// Temporal namespace's retention after the turn ends); then tasks/get
	// says it is not found.
	TTLMs          *int64              `json:"ttlMs"`
	PollIntervalMs int64               `json:"pollIntervalMs,omitempty"`
	InputRequests  mcp.InputRequestMap `json:"inputRequests,omitempty"`
	Result         *mcp.CallToolResult `json:"result,omitempty"`
}

// mcpTaskTimes are when a task was created and last changed, in UTC.
type mcpTaskTimes struct {
	CreatedAt     time.Time `json:"createdAt"`
	LastUpdatedAt time.Time `json:"lastUpdatedAt"`
}

// state is the task as caller sees it, from a client that can be asked
// (elicits) or not.
func (t *mcpTask) state(caller gateway.Token, times mcpTaskTimes, resultType string, elicits bool) *mcpTaskState {
	status, msg := t.status(caller, elicits)
	s := &mcpTaskState{ResultType: resultType, TaskID: t.id, Status: status, StatusMessage: msg, mcpTaskTimes: times}
	switch status {
	case mcpTaskInputRequired:
		s.InputRequests = mcp.InputRequestMap{}
		for key, it := range t.inputs(caller) {
			s.InputRequests[key] = mcpElicitation(it)
		}
	case mcpTaskCompleted:
		s.Result = t.result()
	}
	if status == mcpTaskWorking || status == mcpTaskInputRequired {
		s.PollIntervalMs = mcpTaskPollMs
	}
	return s
}
