package agent

import (
	"cmp"
	"encoding/json"
)

// Memory is how a session's transcript reaches the model: the latest
// messages within WindowTokens (estimated, EstimateTokens), after a
// rolling summary of the older ones, which a model call of its own
// (SummaryModel, else the agent's model) writes between turns.
type Memory struct {
	WindowTokens int    `json:"window_tokens,omitempty"`
	SummaryModel string `json:"summary_model,omitempty"`
	// Long-term memory (memory.go): Recall puts the user's memories most
	// relevant to the prompt into the turn's context, at most TopK of
	// them within Budget tokens; Extract has the summary model keep a
	// conversation's durable facts when it goes idle.
	Recall  bool `json:"recall,omitempty"`
	TopK    int  `json:"top_k,omitempty"`
	Budget  int  `json:"budget,omitempty"`
	Extract bool `json:"extract,omitempty"`
}

// DefaultWindowTokens is Memory.WindowTokens when the agent sets none;
// MinWindowTokens the least it may set.
const (
	DefaultWindowTokens = 8000
	MinWindowTokens     = 200
)

// Window is the tokens of transcript the model reads.
func (m Memory) Window() int {
	return OrDefault(m.WindowTokens, DefaultWindowTokens)
}

// ContextPolicy is how a turn's own steps reach its model calls. A turn
// of many steps would send every earlier step whole with every call: a
// request growing with the step count, a turn's input tokens with its
// square, past any model's window within a few hundred steps of real
// tool output. Instead a call reads the turn's prompt, a digest of its
// older steps — one line each for the latest of them, a count of the
// rest — and its recent steps whole: at least KeepRecentSteps model
// steps, fewer than twice as many. Steps move into the digest a block of
// KeepRecentSteps at a time, so the request's prefix stays byte-identical
// from call to call between blocks and a provider's prompt cache serves
// it. The whole request is kept under MaxTokens (estimated), cutting the
// longest messages of the recent steps first.
type ContextPolicy struct {
	MaxTokens       int    `json:"max_tokens,omitempty"`
	KeepRecentSteps int    `json:"keep_recent_steps,omitempty"`
	Compaction      string `json:"compaction,omitempty"` // CompactionDigest (default) or CompactionNone
}

// Compactions (ContextPolicy.Compaction).
const (
	CompactionDigest = "digest" // older steps in a mechanical digest
	CompactionNone   = "none"   // every step whole, as long as MaxTokens allows
)

// Context defaults, and the least a catalog may set.
const (
	DefaultContextTokens   = 100_000
	MinContextTokens       = 2_000
	DefaultKeepRecentSteps = 10
)

// RecallStepTool is the tool a model whose turn's context is compacted
// may call to read an earlier step of the turn whole — a tool's long
// output, most often, which the digest only starts — a piece of
// RecallStepBytes at a time: {"step": N, "offset": bytes}. It is offered
// once a call reads a digest, unless the agent has a tool of that name,
// and needs no approval: it reads what the turn already holds.
const (
	RecallStepTool  = "recall_step"
	RecallStepBytes = 16 << 10
)

// RecallStep is RecallStepTool's definition, as the model sees it.
func RecallStep() Tool {
	return Tool{
		Name: RecallStepTool, Kind: RecallStepTool,
		Description: "Read an earlier step of this turn whole, as the short lines of earlier steps only begin it: " +
			"the step's number, and the byte offset to read from for a long one.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"step":{"type":"integer","minimum":0},` +
			`"offset":{"type":"integer","minimum":0}},"required":["step"],"additionalProperties":false}`),
	}
}

// WithDefaults returns p with zero fields replaced by the defaults.
func (p ContextPolicy) WithDefaults() ContextPolicy {
	if p.MaxTokens <= 0 {
		p.MaxTokens = DefaultContextTokens
	}
	if p.KeepRecentSteps <= 0 {
		p.KeepRecentSteps = DefaultKeepRecentSteps
	}
	p.Compaction = cmp.Or(p.Compaction, CompactionDigest)
	return p
}

// EstimateTokens is a close estimate of the tokens text takes, for any
// provider's tokenizer: a token is about four bytes of English, and no
// text of a few runes is less than one.
func EstimateTokens(text string) int {
	return (len(text) + 3) / 4
}
