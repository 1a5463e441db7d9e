package openai

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	oairesp "github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/gatewaytest"
)

// citedLog is a turn whose answer cites a chunk: its content blocks end
// with a citation block.
func citedLog() []agent.Event {
	cite, _ := json.Marshal(agent.CitationBlocks([]agent.Citation{{ChunkID: "doc_ab#2", DocumentID: "doc_ab", DocumentTitle: "Refund policy", Position: 2}})[0])
	return gatewaytest.Log(gatewaytest.Status(agent.StreamRunning), gatewaytest.Token(1, 1, "Paid in 14 days [1]."), gatewaytest.Usage(1, 10, 5),
		agent.Event{Kind: agent.EventStepFinish, Step: 1, FinishReason: agent.FinishStop},
		gatewaytest.Content("Paid in 14 days [1]."), agent.Event{Kind: agent.EventContent, Content: cite}, gatewaytest.Status(agent.StreamCompleted))
}

// TestCitationAnnotations: a cited chunk is, read by openai-go, a chat
// completion message's url_citation (the chunk's agentflow:// URL, the
// document's title, the answer's span) and a response's output_text
// file_citation (the document as the file); the answer's text is as it
// was without it.
func TestCitationAnnotations(t *testing.T) {
	var reply chatReply
	var deltas []chatDelta
	for _, e := range citedLog() {
		deltas = append(deltas, reply.add(e)...)
	}
	require.Equal(t, []chatDelta{{Content: "Paid in 14 days [1]."}}, deltas)
	raw, err := json.Marshal(chatCompletion{ID: "turn/demo/j", Object: "chat.completion", Choices: []chatChoice{{
		Message:      chatAnswer{Role: "assistant", Content: reply.content.String(), Annotations: urlCitations(reply.content.String(), reply.citations)},
		FinishReason: "stop", Logprobs: jsonNull}}})
	require.NoError(t, err)
	var cc openai.ChatCompletion
	require.NoError(t, json.Unmarshal(raw, &cc))
	anns := cc.Choices[0].Message.Annotations
	require.Len(t, anns, 1)
	u := anns[0].URLCitation
	require.Equal(t, []any{"url_citation", "agentflow://document/doc_ab#2", "Refund policy", int64(0), int64(20)},
		[]any{string(anns[0].Type), u.URL, u.Title, u.StartIndex, u.EndIndex})

	f, _ := streamOf(citedLog(), -1)
	raw, err = json.Marshal(f.snapshot())
	require.NoError(t, err)
	var resp oairesp.Response
	require.NoError(t, json.Unmarshal(raw, &resp))
	require.Equal(t, "Paid in 14 days [1].", resp.OutputText())
	msg := resp.Output[len(resp.Output)-1].AsMessage()
	text := msg.Content[0].AsOutputText()
	require.Len(t, text.Annotations, 1)
	fc := text.Annotations[0].AsFileCitation()
	require.Equal(t, []any{"file_citation", "doc_ab", "Refund policy", int64(0)}, []any{string(fc.Type), fc.FileID, fc.Filename, fc.Index})
}
