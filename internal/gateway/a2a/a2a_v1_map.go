package a2a

import (
	"encoding/json"
	"fmt"

	"github.com/a2aproject/a2a-go/a2a"
)

// A2A 1.0's JSON (the ProtoJSON of the specification's a2a.proto: camel
// case names, enums by their names, a oneof by its member's name) for
// what the 0.3 door's projection (a2aTask) makes. The task, its updates
// and its artifact are made once, by a2aTask, with a2a-go v0.3's types;
// this file only renders them the 1.0 way, so both versions say the same
// thing about a turn.

// v1Task is 1.0's Task.
type v1Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId,omitempty"`
	Status    v1Status       `json:"status"`
	Artifacts []v1Artifact   `json:"artifacts,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// v1Status is 1.0's TaskStatus.
type v1Status struct {
	State   string     `json:"state"`
	Message *v1Message `json:"message,omitempty"`
}

// v1Message is 1.0's Message, as sent and as received.
type v1Message struct {
	MessageID string          `json:"messageId"`
	ContextID string          `json:"contextId,omitempty"`
	TaskID    string          `json:"taskId,omitempty"`
	Role      json.RawMessage `json:"role"`
	Parts     []v1Part        `json:"parts"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	// ReferenceTaskIDs and Extensions are read and not used.
	ReferenceTaskIDs []string `json:"referenceTaskIds,omitempty"`
	Extensions       []string `json:"extensions,omitempty"`
}

// v1Part is 1.0's Part: one of text, raw (base64), url and data, with
// its file name and media type.
type v1Part struct {
	Text      *string         `json:"text,omitempty"`
	Raw       *string         `json:"raw,omitempty"`
	URL       *string         `json:"url,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	Metadata  map[string]any  `json:"metadata,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
}

// v1Artifact is 1.0's Artifact.
type v1Artifact struct {
	ArtifactID string   `json:"artifactId"`
	Name       string   `json:"name,omitempty"`
	Parts      []v1Part `json:"parts"`
}

// v1StatusUpdate is 1.0's TaskStatusUpdateEvent: 0.3's without "final"
// (a 1.0 stream ends when its task does).
type v1StatusUpdate struct {
	TaskID    string   `json:"taskId"`
	ContextID string   `json:"contextId"`
	Status    v1Status `json:"status"`
}

// v1ArtifactUpdate is 1.0's TaskArtifactUpdateEvent.
type v1ArtifactUpdate struct {
	TaskID    string     `json:"taskId"`
	ContextID string     `json:"contextId"`
	Artifact  v1Artifact `json:"artifact"`
	Append    bool       `json:"append,omitempty"`
	LastChunk bool       `json:"lastChunk,omitempty"`
}

// v1StreamResponse is 1.0's StreamResponse (and SendMessageResponse,
// which is its task or message): one member set.
type v1StreamResponse struct {
	Task           *v1Task           `json:"task,omitempty"`
	StatusUpdate   *v1StatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *v1ArtifactUpdate `json:"artifactUpdate,omitempty"`
}

// v1States are 1.0's names of the task states.
var v1States = map[a2a.TaskState]string{
	a2a.TaskStateSubmitted:     "TASK_STATE_SUBMITTED",
	a2a.TaskStateWorking:       "TASK_STATE_WORKING",
	a2a.TaskStateInputRequired: "TASK_STATE_INPUT_REQUIRED",
	a2a.TaskStateAuthRequired:  "TASK_STATE_AUTH_REQUIRED",
	a2a.TaskStateCompleted:     "TASK_STATE_COMPLETED",
	a2a.TaskStateCanceled:      "TASK_STATE_CANCELED",
	a2a.TaskStateFailed:        "TASK_STATE_FAILED",
	a2a.TaskStateRejected:      "TASK_STATE_REJECTED",
}

func v1State(s a2a.TaskState) string {
	if n, ok := v1States[s]; ok {
		return n
	}
	return "TASK_STATE_UNSPECIFIED"
}

// v1Role names a message's role.
func v1Role(r a2a.MessageRole) json.RawMessage {
	if r == a2a.MessageRoleUser {
		return json.RawMessage(`"ROLE_USER"`)
	}
	return json.RawMessage(`"ROLE_AGENT"`)
}

// v1TaskOf renders a task.
func v1TaskOf(t *a2a.Task) *v1Task {
	out := &v1Task{ID: string(t.ID), ContextID: t.ContextID, Status: v1StatusOf(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, v1ArtifactOf(a))
	}
	return out
}

func v1StatusOf(s a2a.TaskStatus) v1Status {
	return v1Status{State: v1State(s.State), Message: v1MessageOf(s.Message)}
}

func v1MessageOf(m *a2a.Message) *v1Message {
	if m == nil {
		return nil
	}
	return &v1Message{MessageID: m.ID, ContextID: m.ContextID, TaskID: string(m.TaskID), Role: v1Role(m.Role),
		Parts: v1PartsOf(m.Parts), Metadata: m.Metadata}
}

func v1ArtifactOf(a *a2a.Artifact) v1Artifact {
	return v1Artifact{ArtifactID: string(a.ID), Name: a.Name, Parts: v1PartsOf(a.Parts)}
}

func v1PartsOf(parts a2a.ContentParts) []v1Part {
	out := make([]v1Part, 0, len(parts))
	for _, p := range parts {
		out = append(out, v1PartOf(p))
	}
	return out
}

// v1PartOf renders a part: text as text, data as JSON data, a file by
// its URI (a cas:// ref) or its bytes.
func v1PartOf(p a2a.Part) v1Part {
	switch p := p.(type) {
	case a2a.TextPart:
		return v1Part{Text: &p.Text, Metadata: p.Metadata}
	case a2a.DataPart:
		data, err := json.Marshal(p.Data)
		if err != nil {
			data = json.RawMessage(`null`)
		}
		return v1Part{Data: data, MediaType: "application/json", Metadata: p.Metadata}
	case a2a.FilePart:
		switch f := p.File.(type) {
		case a2a.FileURI:
			return v1Part{URL: &f.URI, Filename: f.Name, MediaType: f.MimeType, Metadata: p.Metadata}
		case a2a.FileBytes:
			return v1Part{Raw: &f.Bytes, Filename: f.Name, MediaType: f.MimeType, Metadata: p.Metadata}
		}
	}
	return v1Part{Text: new(fmt.Sprintf("(a part of kind %s)", p.Meta()))}
}

// v1EventOf renders a stream's event.
func v1EventOf(ev a2a.Event) v1StreamResponse {
	switch ev := ev.(type) {
	case *a2a.Task:
		return v1StreamResponse{Task: v1TaskOf(ev)}
	case *a2a.TaskStatusUpdateEvent:
		return v1StreamResponse{StatusUpdate: &v1StatusUpdate{TaskID: string(ev.TaskID), ContextID: ev.ContextID, Status: v1StatusOf(ev.Status)}}
	case *a2a.TaskArtifactUpdateEvent:
		return v1StreamResponse{ArtifactUpdate: &v1ArtifactUpdate{TaskID: string(ev.TaskID), ContextID: ev.ContextID,
			Artifact: v1ArtifactOf(ev.Artifact), Append: ev.Append, LastChunk: ev.LastChunk}}
	}
	return v1StreamResponse{}
}

// a2aCardJSON is an agent's card as served: one card for both versions,
// as a2a-go v2's compatibility producer writes it. A 1.0 client reads
// supportedInterfaces (the same endpoint twice: protocolVersion 1.0 and
// 0.3, the first preferred), securityRequirements and each scheme's
// httpAuthSecurityScheme; a 0.3 client reads url, protocolVersion,
// preferredTransport, security and each scheme's type, and ignores the
// rest.
func a2aCardJSON(card *a2a.AgentCard) ([]byte, error) {
	legacy, err := json.Marshal(card)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(legacy, &out); err != nil {
		return nil, err
	}
	out["supportedInterfaces"] = []map[string]string{
		{"url": card.URL, "protocolBinding": string(a2a.TransportProtocolJSONRPC), "protocolVersion": A2AV1ProtocolVersion},
		{"url": card.URL, "protocolBinding": string(a2a.TransportProtocolJSONRPC), "protocolVersion": a2aV03},
	}
	reqs := make([]map[string]any, 0, len(card.Security))
	for _, r := range card.Security {
		schemes := map[string]any{}
		for name, scopes := range r {
			schemes[string(name)] = map[string]any{"list": append([]string{}, scopes...)}
		}
		reqs = append(reqs, map[string]any{"schemes": schemes})
	}
	out["securityRequirements"] = reqs
	if schemes, ok := out["securitySchemes"].(map[string]any); ok {
		for name, s := range schemes {
			obj, ok := s.(map[string]any)
			if !ok || obj["type"] != "http" {
				continue
			}
			v1 := map[string]any{"scheme": obj["scheme"]}
			if d, ok := obj["description"]; ok {
				v1["description"] = d
			}
			obj["httpAuthSecurityScheme"] = v1
			schemes[name] = obj
		}
	}
	return json.Marshal(out)
}
