// Package ownmodel is a model provider of your own, through agentflow's
// public Go API: any langchaingo model (llms.Model) — one of langchaingo's
// many providers, or an implementation of your own such as FAQ, a stand-in
// for an in-house model — registered by the name a catalog's agents use
// ("faq:v1"). ./worker is its main.
package ownmodel

import (
	"context"
	"fmt"
	"strings"

	"github.com/tmc/langchaingo/llms"

	"github.com/agentflow/agentflow"
)

// Options are what this worker adds to agentflow's runtime.
func Options() agentflow.Options {
	return agentflow.Options{Models: map[string]llms.Model{"faq": FAQ{}}}
}

// answers are what FAQ knows, by a word of the question.
var answers = map[string]string{
	"refund":   "Refunds take 5 to 7 working days.",
	"shipping": "Orders ship within 24 hours.",
}

// FAQ is a model that answers from a table. It streams its answer word
// by word when asked to, and reports what it counted, as a provider's
// client does.
type FAQ struct{}

// GenerateContent answers the last message a person wrote.
func (FAQ) GenerateContent(ctx context.Context, messages []llms.MessageContent, options ...llms.CallOption) (*llms.ContentResponse, error) {
	var opts llms.CallOptions
	for _, o := range options {
		o(&opts)
	}
	question := ""
	for _, m := range messages {
		if m.Role == llms.ChatMessageTypeHuman {
			question = ""
			for _, p := range m.Parts {
				if t, ok := p.(llms.TextContent); ok {
					question += t.Text
				}
			}
		}
	}
	answer := "I can only answer questions about refunds and shipping."
	for word, a := range answers {
		if strings.Contains(strings.ToLower(question), word) {
			answer = a
		}
	}
	for i, word := range strings.SplitAfter(answer, " ") {
		if err := stream(ctx, opts, word); err != nil {
			return nil, fmt.Errorf("stream word %d: %w", i, err)
		}
	}
	return &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content: answer, StopReason: "stop",
		GenerationInfo: map[string]any{"PromptTokens": len(strings.Fields(question)), "CompletionTokens": len(strings.Fields(answer))},
	}}}, nil
}

// stream sends a piece of the answer to whichever streaming function the
// caller set.
func stream(ctx context.Context, opts llms.CallOptions, piece string) error {
	switch {
	case opts.StreamingReasoningFunc != nil:
		return opts.StreamingReasoningFunc(ctx, nil, []byte(piece))
	case opts.StreamingFunc != nil:
		return opts.StreamingFunc(ctx, []byte(piece))
	}
	return nil
}

// Call answers a single prompt (langchaingo's older interface).
func (f FAQ) Call(ctx context.Context, prompt string, options ...llms.CallOption) (string, error) {
	return llms.GenerateFromSinglePrompt(ctx, f, prompt, options...)
}
