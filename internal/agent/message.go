package agent

import "strings"

// Role of a message in a conversation.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of the conversation sent to a model.
type Message struct {
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// ToolCalls are the calls an assistant message asked for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name identify the call a tool message answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	// Usage and Model, on a stored assistant message, are those of the
	// model call that wrote it: a retried call that finds the reply stored
	// reports what it cost instead of nothing.
	Usage *Usage `json:"usage,omitempty"`
	Model string `json:"model,omitempty"`
	// Data, on a stored tool message, describes the data the call
	// produced and where it is kept.
	Data *DataPreview `json:"data,omitempty"`
	// CacheHit, on a stored tool message, says the result came from the
	// tenant's cache.
	CacheHit bool `json:"cache_hit,omitempty"`
	// Parts are what a message carries beside its text: the images and
	// files a person sent with a prompt, the images a tool produced. By
	// ref only (Part).
	Parts []Part `json:"parts,omitempty"`
	// Reasoning, on a stored assistant message, is what the model
	// thought before this reply, block by block; it goes back to a
	// provider that needs it (Reasoning.Signature).
	Reasoning []Reasoning `json:"reasoning,omitempty"`
	// Partial, on an assistant message of a session's transcript, says
	// its turn was stopped while the model wrote it: the text is what it
	// had written (TurnResult.Partial). The model reads it with
	// InterruptedNote.
	Partial bool `json:"partial,omitempty"`
	// Citations, on a stored tool message, are the chunks of documents
	// the call's output quotes (a retrieve call's), as it numbered them.
	Citations []Citation `json:"citations,omitempty"`
	// Program, on a stored tool message, is the run_program call whose
	// program made the call (code mode): the program reads the result,
	// the model does not (it reads the run_program call's result). Such
	// a message keeps the call in ToolCalls, for the program's next run
	// to check that it made the same call.
	Program string `json:"program,omitempty"`
	// ToolVersion, on a stored tool message, is the definition of the
	// tool that ran (the pinned agent version's): replay and audit read
	// which one it was, whatever the catalog holds now.
	ToolVersion *ToolVersion `json:"tool_version,omitempty"`
}

// Text is every text the message carries, as the model reads it: its
// content, then each of its text parts, a paragraph each.
func (m Message) Text() string {
	texts := make([]string, 0, 1+len(m.Parts))
	if m.Content != "" {
		texts = append(texts, m.Content)
	}
	for _, p := range m.Parts {
		if p.Type == PartText && p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n\n")
}

// InterruptedNote follows a partial answer (Message.Partial) when a
// session's transcript goes back to the model, so that it knows the
// answer was cut short and by whom.
const InterruptedNote = "\n\n[This answer was interrupted: the user stopped it here.]"

// ToolCall is a model's request to run a tool.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON object, as the model wrote it
}

// Usage counts the tokens of one or more model calls.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// CachedTokens is the part of PromptTokens the provider read from its
	// prompt cache (billed at its cached-input price).
	CachedTokens int `json:"cached_tokens,omitempty"`
	// ReasoningTokens is the part of CompletionTokens the model spent
	// reasoning (OpenAI counts and bills them as output).
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		TotalTokens:      u.TotalTokens + v.TotalTokens,
		CachedTokens:     u.CachedTokens + v.CachedTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}
