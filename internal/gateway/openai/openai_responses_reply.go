package openai

import (
	"cmp"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/projection"
)

// What a turn's log is as an OpenAI response (POST /v1/responses): the
// response object and the stream of its events, folded from the log's
// events in order by responseFold, through the turn's projection
// (internal/gateway/projection), which the chat reply reads and hands on.
//
// The answer and the reasoning are chat completions' (chatReply): the
// text of the turn's last model call, released once nothing can take it
// back, and each call's reasoning once it has answered. The agent's own
// tool calls, which run on the server, are mcp_call output items (the
// Responses item of a call a server made and answered, which no client
// runs), with the tool's arguments, its output preview, and failed when
// the call did not end ok (from the projection's ToolStart and
// ToolResult); a call that waits for approval is first an
// mcp_approval_request item (InputRequired), which an
// mcp_approval_response decides.
//
// Sequence numbers are the log's: the events an event of the log gives
// are numbered from its index times seqStride, and the two that open a
// stream (response.created, response.in_progress) are 0 and 1. A stream
// is the same fold of the same log whoever reads it, so a client that
// resumes after sequence number N (GET /v1/responses/{id}?stream=true
// &starting_after=N) gets exactly the events it has not read, none twice;
// and a number says which event of the log gave it (N / seqStride).

// seqStride is how many stream events one event of the log may give: far
// more than the most it gives (a terminal status that closes the answer
// gives seven).
const seqStride = 100

// Statuses of a response.
const (
	respQueued     = "queued"
	respInProgress = "in_progress"
	respCompleted  = "completed"
	respFailed     = "failed"
	respCancelled  = "cancelled"
	respIncomplete = "incomplete"
)

// Wire types of a response, its items and its stream's events.
type (
	responseObject struct {
		ID                 string             `json:"id"`
		Object             string             `json:"object"`
		CreatedAt          int64              `json:"created_at"`
		Status             string             `json:"status"`
		Background         *bool              `json:"background"`
		Error              *responseError     `json:"error"`
		IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
		Instructions       *string            `json:"instructions"`
		Model              string             `json:"model"`
		Output             []responseItem     `json:"output"`
		ParallelToolCalls  bool               `json:"parallel_tool_calls"`
		PreviousResponseID *string            `json:"previous_response_id"`
		Store              bool               `json:"store"`
		Temperature        *float64           `json:"temperature"`
		TopP               *float64           `json:"top_p"`
		ToolChoice         string             `json:"tool_choice"`
		Tools              []json.RawMessage  `json:"tools"`
		Text               responseTextConfig `json:"text"`
		Truncation         string             `json:"truncation"`
		Usage              *responseUsage     `json:"usage"`
		Metadata           map[string]string  `json:"metadata"`
	}
	responseError struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	incompleteDetails struct {
		Reason string `json:"reason"`
	}
	responseTextConfig struct {
		Format json.RawMessage `json:"format"`
	}
	responseUsage struct {
		InputTokens        int `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int `json:"total_tokens"`
	}
	// responseItem is an output item: a message, a reasoning item or an
	// mcp_call, by Type; fields of the other types are left out.
	responseItem struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		Status string `json:"status,omitempty"`
		// A message's.
		Role    string        `json:"role,omitempty"`
		Content []contentPart `json:"content,omitempty"`
		// A reasoning item's.
		Summary *[]contentPart `json:"summary,omitempty"`
		// An mcp_call's.
		Name        string  `json:"name,omitempty"`
		Arguments   *string `json:"arguments,omitempty"`
		ServerLabel string  `json:"server_label,omitempty"`
		Output      *string `json:"output,omitempty"`
		Error       *string `json:"error,omitempty"`
	}
	contentPart struct {
		Type        string             `json:"type"`
		Text        string             `json:"text"`
		Annotations *[]json.RawMessage `json:"annotations,omitempty"`
		Logprobs    *[]json.RawMessage `json:"logprobs,omitempty"`
	}
	// responseEvent is one event of a response's stream, by Type.
	responseEvent struct {
		Type           string          `json:"type"`
		SequenceNumber int64           `json:"sequence_number"`
		Response       *responseObject `json:"response,omitempty"`
		OutputIndex    *int            `json:"output_index,omitempty"`
		ItemID         string          `json:"item_id,omitempty"`
		ContentIndex   *int            `json:"content_index,omitempty"`
		Item           *responseItem   `json:"item,omitempty"`
		Part           *contentPart    `json:"part,omitempty"`
		Delta          *string         `json:"delta,omitempty"`
		Text           *string         `json:"text,omitempty"`
		Logprobs       *[]any          `json:"logprobs,omitempty"`
		// An error event's.
		Code    string  `json:"code,omitempty"`
		Message string  `json:"message,omitempty"`
		Param   *string `json:"param,omitempty"`
	}
)

// textFormat is the text config of a response without an output schema.
var textFormat = json.RawMessage(`{"type":"text"}`)

// newResponseObject is a response of model, before its turn has run.
func newResponseObject(id, model string, created int64) responseObject {
	return responseObject{
		ID: id, Object: "response", CreatedAt: created, Status: respQueued, Model: model,
		Output: []responseItem{}, Store: true, ToolChoice: "auto", Tools: []json.RawMessage{},
		Text: responseTextConfig{Format: textFormat}, Truncation: "disabled", Metadata: map[string]string{},
	}
}

// responseFold folds a turn's log into its response.
type responseFold struct {
	resp      responseObject
	reply     chatReply
	msg       int                       // the output index of the answer's message, -1 before it
	tools     map[string]int            // the output index of each tool call's item, by call id
	approvals map[string]*approvalAsked // the approvals asked, by their items' ids
	// settled are approval requests, by their items' ids, known to be
	// decided before the log shows it: those the request decided.
	settled map[string]bool
	waiting bool // the turn's last status is WAITING_APPROVAL
	ended   bool
}

// approvalAsked is a call's approval request, as its item names it.
type approvalAsked struct {
	callID, approvalID string
	decided            bool
}

func newResponseFold(resp responseObject) *responseFold {
	return &responseFold{resp: resp, msg: -1, tools: map[string]int{}, approvals: map[string]*approvalAsked{}, settled: map[string]bool{}}
}

// waits reports whether the turn waits for the approval of a call nobody
// has decided: where a whole response pauses, showing its approval
// request, as OpenAI's answers one whose MCP call needs approval.
func (f *responseFold) waits() bool {
	if !f.waiting || f.ended {
		return false
	}
	for _, a := range f.approvals {
		if !a.decided {
			return true
		}
	}
	return false
}

// approvalItemID is the id of a call's mcp_approval_request item, which
// an mcp_approval_response names: made of its approval id (apr_<hex> as
// mcpr_<hex>), which binds the decision to the call of the step and run
// that asked; of the call id for a turn from before approvals were bound.
func approvalItemID(t *agent.ToolEvent) string {
	if t.ApprovalID != "" {
		return "mcpr_" + strings.TrimPrefix(t.ApprovalID, "apr_")
	}
	return "mcpr_" + t.CallID
}

// decided marks the approval asked of callID decided.
func (f *responseFold) decided(callID string) {
	for _, a := range f.approvals {
		if a.callID == callID {
			a.decided = true
		}
	}
}

// start is the two events that open a stream: the response as created,
// and in progress.
func (f *responseFold) start() []responseEvent {
	created := f.snapshot()
	f.resp.Status = respInProgress
	return f.number(0, []responseEvent{
		{Type: "response.created", Response: created},
		{Type: "response.in_progress", Response: f.snapshot()},
	})
}

// add takes the next event of the log and returns the stream events it
// gives, numbered.
func (f *responseFold) add(e agent.Event) []responseEvent {
	if f.ended || e.Child != nil {
		return nil
	}
	if f.resp.Status == respQueued {
		f.resp.Status = respInProgress
	}
	if e.Kind == agent.EventStatus {
		f.waiting = e.Status == agent.StreamWaitingApproval
	}
	var out []responseEvent
	for _, d := range f.reply.add(e) {
		switch {
		case d.Tool != nil:
			out = append(out, f.tool(*d.Tool)...)
		case d.Reasoning != "":
			out = append(out, f.reasoning(e.Index, d.Reasoning)...)
		case d.Content != "":
			out = append(out, f.text(e.Index, d.Content)...)
		}
	}
	if f.reply.done {
		out = append(out, f.end(e)...)
	}
	return f.number(e.Index, out)
}

// number gives the events of the log's event at index their sequence
// numbers.
func (f *responseFold) number(index int64, events []responseEvent) []responseEvent {
	for j := range events {
		events[j].SequenceNumber = index*seqStride + int64(j)
	}
	return events
}

// snapshot is a copy of the response as it is now.
func (f *responseFold) snapshot() *responseObject {
	r := f.resp
	r.Output = make([]responseItem, len(f.resp.Output))
	for i, it := range f.resp.Output {
		it.Content = append([]contentPart(nil), it.Content...)
		r.Output[i] = it
	}
	return &r
}

// item appends an output item and returns its index.
func (f *responseFold) item(it responseItem) int {
	f.resp.Output = append(f.resp.Output, it)
	return len(f.resp.Output) - 1
}

func (f *responseFold) itemEvent(typ string, i int) responseEvent {
	it := f.resp.Output[i]
	it.Content = append([]contentPart(nil), it.Content...)
	return responseEvent{Type: typ, OutputIndex: &i, Item: &it}
}

// tool renders a tool call's item of the projection: its start and its
// result as an mcp_call item, its approval waiting as an
// mcp_approval_request item, and the approval's decision.
func (f *responseFold) tool(it projection.Item) []responseEvent {
	switch {
	case it.Kind == projection.ToolStart:
		return f.toolStart(it.Tool)
	case it.Kind == projection.ToolResult:
		return f.toolEnd(it.Tool)
	case it.Event.Kind == agent.EventApprovalRequired:
		return f.approvalRequest(it.Tool)
	case it.Event.Kind == agent.EventApprovalDecided:
		f.decided(it.Tool.CallID)
	}
	return nil
}

func (f *responseFold) toolStart(t *agent.ToolEvent) []responseEvent {
	if _, ok := f.tools[t.CallID]; ok {
		return nil
	}
	args := cmp.Or(string(t.Args), "{}")
	i := f.item(responseItem{Type: "mcp_call", ID: "mcp_" + t.CallID, Status: respInProgress, Name: t.Name, Arguments: &args, ServerLabel: f.resp.Model})
	f.tools[t.CallID] = i
	return []responseEvent{
		f.itemEvent("response.output_item.added", i),
		{Type: "response.mcp_call.in_progress", OutputIndex: &i, ItemID: f.resp.Output[i].ID},
	}
}

// approvalRequest is a tool call that waits for a person's approval, as
// an mcp_approval_request item, which an mcp_approval_response decides
// (openai_responses_approve.go), as does any door's approval; the call
// runs, as an mcp_call item, once approved.
func (f *responseFold) approvalRequest(t *agent.ToolEvent) []responseEvent {
	args := cmp.Or(string(t.Args), "{}")
	id := approvalItemID(t)
	i := f.item(responseItem{Type: "mcp_approval_request", ID: id, Name: t.Name, Arguments: &args, ServerLabel: f.resp.Model})
	f.approvals[id] = &approvalAsked{callID: t.CallID, approvalID: t.ApprovalID, decided: f.settled[id]}
	return []responseEvent{f.itemEvent("response.output_item.added", i), f.itemEvent("response.output_item.done", i)}
}

func (f *responseFold) toolEnd(t *agent.ToolEvent) []responseEvent {
	i, ok := f.tools[t.CallID]
	if !ok {
		return nil
	}
	it := &f.resp.Output[i]
	if it.Status != respInProgress {
		return nil
	}
	it.Output = new(t.Output)
	typ := "response.mcp_call.completed"
	it.Status = respCompleted
	if t.Status != "ok" {
		typ, it.Status = "response.mcp_call.failed", respFailed
		it.Error = new("the call ended " + t.Status)
	}
	return []responseEvent{
		{Type: typ, OutputIndex: &i, ItemID: it.ID},
		f.itemEvent("response.output_item.done", i),
	}
}

// reasoning is a model call's reasoning, as one reasoning item whole.
func (f *responseFold) reasoning(index int64, text string) []responseEvent {
	id := "rs_" + strconv.FormatInt(index, 10)
	i := f.item(responseItem{Type: "reasoning", ID: id, Status: respInProgress, Summary: &[]contentPart{}})
	added := f.itemEvent("response.output_item.added", i)
	zero := 0
	f.resp.Output[i].Content = []contentPart{{Type: "reasoning_text", Text: text}}
	f.resp.Output[i].Status = respCompleted
	return []responseEvent{
		added,
		{Type: "response.reasoning_text.delta", OutputIndex: &i, ItemID: id, ContentIndex: &zero, Delta: &text},
		{Type: "response.reasoning_text.done", OutputIndex: &i, ItemID: id, ContentIndex: &zero, Text: &text},
		f.itemEvent("response.output_item.done", i),
	}
}

// text is more of the answer, in the response's message, which the first
// text opens.
func (f *responseFold) text(index int64, text string) []responseEvent {
	var out []responseEvent
	zero := 0
	if f.msg < 0 {
		f.msg = f.item(responseItem{Type: "message", ID: "msg_" + strconv.FormatInt(index, 10), Status: respInProgress, Role: "assistant", Content: []contentPart{}})
		out = append(out, f.itemEvent("response.output_item.added", f.msg))
		f.resp.Output[f.msg].Content = []contentPart{newOutputText("")}
		part := newOutputText("")
		out = append(out, responseEvent{Type: "response.content_part.added", OutputIndex: &f.msg, ItemID: f.resp.Output[f.msg].ID, ContentIndex: &zero, Part: &part})
	}
	f.resp.Output[f.msg].Content[0].Text += text
	out = append(out, responseEvent{Type: "response.output_text.delta", OutputIndex: &f.msg, ItemID: f.resp.Output[f.msg].ID, ContentIndex: &zero, Delta: &text, Logprobs: &[]any{}})
	return out
}

func newOutputText(text string) contentPart {
	return contentPart{Type: "output_text", Text: text, Annotations: &[]json.RawMessage{}, Logprobs: &[]json.RawMessage{}}
}

// end closes the answer's message and ends the response: completed,
// incomplete (the answer was cut by its length or a content filter),
// failed, or cancelled.
func (f *responseFold) end(e agent.Event) []responseEvent {
	f.ended = true
	var out []responseEvent
	if f.msg >= 0 {
		zero := 0
		it := &f.resp.Output[f.msg]
		if cites := fileCitations(f.reply.citations); len(cites) > 0 {
			it.Content[0].Annotations = &cites
		}
		text, part := it.Content[0].Text, it.Content[0]
		it.Status = respCompleted
		out = append(out,
			responseEvent{Type: "response.output_text.done", OutputIndex: &f.msg, ItemID: it.ID, ContentIndex: &zero, Text: &text, Logprobs: &[]any{}},
			responseEvent{Type: "response.content_part.done", OutputIndex: &f.msg, ItemID: it.ID, ContentIndex: &zero, Part: &part},
			f.itemEvent("response.output_item.done", f.msg))
	}
	for _, i := range f.tools {
		if it := &f.resp.Output[i]; it.Status == respInProgress {
			it.Status = respIncomplete // the turn ended before the call did
		}
	}
	u := f.reply.usage
	usage := &responseUsage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.TotalTokens}
	usage.InputTokensDetails.CachedTokens = u.CachedTokens
	usage.OutputTokensDetails.ReasoningTokens = u.ReasoningTokens
	f.resp.Usage = usage
	typ := "response.completed"
	switch {
	case f.reply.failure != nil:
		typ, f.resp.Status = "response.failed", respFailed
		if e.Status == agent.StreamCanceled {
			f.resp.Status = respCancelled
		}
		f.resp.Error = &responseError{Code: responseErrorCode(f.reply.failure), Message: f.reply.failure.Message}
	case f.reply.finishReason() == agent.FinishLength:
		typ, f.resp.Status = "response.incomplete", respIncomplete
		f.resp.IncompleteDetails = &incompleteDetails{Reason: "max_output_tokens"}
	case f.reply.finishReason() == agent.FinishContentFilter:
		typ, f.resp.Status = "response.incomplete", respIncomplete
		f.resp.IncompleteDetails = &incompleteDetails{Reason: "content_filter"}
	default:
		f.resp.Status = respCompleted
	}
	return append(out, responseEvent{Type: typ, Response: f.snapshot()})
}

// responseErrorCode is a failed turn's error as a response's error code:
// its type in agent's table of errors, in OpenAI's snake case.
func responseErrorCode(e *agent.TurnError) string {
	code, _ := agent.CodeOfType(e.Type)
	switch code {
	case agent.CodeRateLimited:
		return "rate_limit_exceeded"
	case agent.CodeInternal, agent.CodeUnavailable:
		return "server_error"
	}
	if e.Type == "" {
		return "server_error"
	}
	return snakeCase(e.Type)
}

// snakeCase writes an error type (InvalidRequest) as OpenAI writes its
// codes (invalid_request).
func snakeCase(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			if i > 0 {
				b = append(b, '_')
			}
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return string(b)
}
