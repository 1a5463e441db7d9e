// Package memory is what a conversation remembers, apart from where it is
// kept and when it is written: which older messages of a session are
// folded into its summary and the prompt a model rewrites the summary
// with, and what a model is asked and answers when the durable facts
// about the caller are extracted for long-term memory.
//
// The rest of the concern lives with the code it is made of: the
// Conversation workflow decides when a session is summarized and when
// its facts are extracted (workflows/conversation.go, memory.go,
// memory_extract.go); the activities read the transcript, call the model
// and store what it wrote (activities/memory.go, memory_extract.go);
// long-term memories are stored and searched like knowledge
// (internal/knowledge/memory.go); the model reads them through the
// remember and recall tools (internal/tools/memory.go). The types are
// the domain's (agent.MemoryRecord, agent.MemoryScope, agent.Memory).
//
// It imports only internal/agent: no store, no model client, no
// Temporal, so that what memory is can be read and tested alone.
package memory

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// SummarizeRead is the most messages after the summary a summarization
// reads.
const SummarizeRead = 1000

// SummaryMaxTokens bounds what a model writes for a summary or an
// extraction.
const SummaryMaxTokens = 1024

// SummarizerPrompt is the system prompt of the model call that writes a
// session's summary.
const SummarizerPrompt = "You keep the memory of a conversation between a user and an assistant. " +
	"Rewrite the summary so far to take in the new messages: keep every fact, name, number, " +
	"preference and decision the user gave, and what was answered, in plain sentences. " +
	"Reply with the summary only."

// maxLine bounds each message a summarizer or an extractor reads.
const maxLine = 4096

// Fold splits a session's messages after its summary, oldest first, when
// what a model would read of them has outgrown window tokens: the latest
// that fill half the window (from a user message on) stay as they are,
// and fold — the ones before — go into the summary. A session that still
// fits folds nothing.
func Fold(msgs []agent.Message, window int) (fold []agent.Message) {
	total := 0
	for _, m := range msgs {
		total += agent.EstimateTokens(m.Content)
	}
	if total <= window {
		return nil
	}
	return msgs[:len(msgs)-len(Recent(msgs, window/2))]
}

// Recent is the latest messages that fit in window tokens, starting at a
// user message, so that a model never reads an answer without its
// question.
func Recent(msgs []agent.Message, window int) []agent.Message {
	used, from := 0, len(msgs)
	for from > 0 {
		t := agent.EstimateTokens(msgs[from-1].Content)
		if used+t > window {
			break
		}
		used += t
		from--
	}
	for from < len(msgs) && msgs[from].Role != agent.RoleUser {
		from++
	}
	return msgs[from:]
}

// FoldPrompt asks for the summary so far rewritten with the messages.
func FoldPrompt(summary string, msgs []agent.Message) string {
	var b strings.Builder
	b.WriteString("Summary so far:\n")
	summary = cmp.Or(summary, "(none yet)")
	b.WriteString(summary)
	b.WriteString("\n\nNew messages:\n")
	writeLines(&b, msgs)
	return b.String()
}

// ExtractRead is how many of a session's latest messages an extraction
// reads.
const ExtractRead = 40

// MaxExtracted bounds the facts one extraction keeps.
const MaxExtracted = 10

// ExtractorPrompt is the system prompt of the model call that finds a
// conversation's durable facts.
const ExtractorPrompt = "You keep a long-term memory of a user for an assistant. From the conversation, " +
	"list the durable facts about the user worth remembering in later conversations: preferences, " +
	"names, circumstances, standing instructions. Leave out anything about this conversation only, " +
	"guesses, and secrets (passwords, keys, card numbers). Each fact is one short self-contained " +
	"sentence. Reply with a JSON array of strings only, [] when there is nothing to keep."

// ExtractionTranscript is the conversation the extractor reads: the
// summary of what came before, if any, and the latest messages.
func ExtractionTranscript(summary string, msgs []agent.Message) string {
	var b strings.Builder
	if summary != "" {
		b.WriteString("Summary of the earlier conversation:\n")
		b.WriteString(summary)
		b.WriteString("\n\n")
	}
	b.WriteString("Conversation:\n")
	writeLines(&b, msgs)
	return b.String()
}

// writeLines writes each message as "role: text", its text cut at
// maxLine bytes (words.Clip marks the cut).
func writeLines(b *strings.Builder, msgs []agent.Message) {
	for _, m := range msgs {
		fmt.Fprintf(b, "%s: %s\n", m.Role, words.Clip(m.Content, maxLine))
	}
}

// ParseFacts reads the extractor's answer: the JSON array of strings in
// it (a model may wrap it in prose or a code fence), each fact trimmed,
// empty and over-long ones dropped, at most MaxExtracted. An answer
// without one is no facts.
func ParseFacts(answer string) []string {
	start, end := strings.Index(answer, "["), strings.LastIndex(answer, "]")
	if start < 0 || end < start {
		return nil
	}
	var raw []string
	if err := json.Unmarshal([]byte(answer[start:end+1]), &raw); err != nil {
		return nil
	}
	var out []string
	for _, f := range raw {
		text, _, err := agent.NormalizeMemory(f, nil)
		if err != nil {
			continue
		}
		out = append(out, text)
		if len(out) == MaxExtracted {
			break
		}
	}
	return out
}
