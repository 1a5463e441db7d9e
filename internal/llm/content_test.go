package llm_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm"
)

// pngRef names a tiny PNG the tests' Media serves.
const pngRef = "cas://sha256:" + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

var (
	pngBytes = []byte("\x89PNG\r\n\x1a\n-a-tiny-image")
	pdfRef   = "cas://sha256:" + "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	svgRef   = "cas://sha256:" + "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
)

func media(_ context.Context, ref string) ([]byte, string, error) {
	switch ref {
	case pngRef:
		return pngBytes, "image/png", nil
	case pdfRef:
		return []byte("%PDF-1.4 tiny"), "application/pdf", nil
	case svgRef:
		return []byte("<svg/>"), "image/svg+xml", nil
	}
	return nil, "", agent.Errorf(agent.CodeNotFound, "data %s not found", ref)
}

// anthropicRecorder is a Messages API server that records each request
// body and answers with reply.
func anthropicRecorder(t *testing.T, reply string) (*llm.Router, func() []map[string]json.RawMessage) {
	var mu sync.Mutex
	var bodies []map[string]json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(reply))
	}))
	t.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{AnthropicAPIKey: "sk-ant-test", AnthropicBaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	return r, func() []map[string]json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]json.RawMessage(nil), bodies...)
	}
}

// TestAnthropicThinkingGoesBack: a reply's thinking blocks are kept with
// their signatures (and a redacted block as it came), and sent back,
// unchanged and before the text and tool calls, with the next call; a
// reasoning budget asks for thinking and raises max_tokens above it.
func TestAnthropicThinkingGoesBack(t *testing.T) {
	r, bodies := anthropicRecorder(t, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
"content":[{"type":"thinking","thinking":"The user wants a sum.","signature":"sig-1"},{"type":"redacted_thinking","data":"opaque"},
{"type":"tool_use","id":"toolu_1","name":"calculator","input":{"expression":"2+3"}}],"stop_reason":"tool_use",
"usage":{"input_tokens":10,"output_tokens":20}}`)
	ctx := context.Background()
	resp, err := r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Messages: user("add 2 and 3"),
		Tools: []agent.Tool{calculator}, ReasoningBudget: 2048, MaxTokens: 1024, Temperature: new(float64)})
	require.NoError(t, err)
	require.Equal(t, []agent.Reasoning{{Text: "The user wants a sum.", Signature: "sig-1"}, {Redacted: "opaque"}}, resp.Message.Reasoning)
	require.Equal(t, "The user wants a sum.", resp.Reasoning)
	require.Empty(t, resp.Message.Content, "thinking is never the answer's text")

	first := bodies()[0]
	require.JSONEq(t, `{"type":"enabled","budget_tokens":2048}`, string(first["thinking"]))
	require.JSONEq(t, `6144`, string(first["max_tokens"]), "max_tokens above the thinking budget")
	require.NotContains(t, first, "temperature", "thinking takes the default temperature")

	msgs := append(user("add 2 and 3"), resp.Message, agent.Message{Role: agent.RoleTool, ToolCallID: "toolu_1", Name: "calculator", Content: "5"})
	_, err = r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Messages: msgs, Tools: []agent.Tool{calculator}, ReasoningBudget: 2048})
	require.NoError(t, err)
	var sent []struct {
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
	}
	require.NoError(t, json.Unmarshal(bodies()[1]["messages"], &sent))
	require.Len(t, sent, 3)
	require.Equal(t, "assistant", sent[1].Role)
	require.Len(t, sent[1].Content, 3)
	require.JSONEq(t, `{"type":"thinking","thinking":"The user wants a sum.","signature":"sig-1"}`, string(sent[1].Content[0]))
	require.JSONEq(t, `{"type":"redacted_thinking","data":"opaque"}`, string(sent[1].Content[1]))
	require.JSONEq(t, `{"type":"tool_use","id":"toolu_1","name":"calculator","input":{"expression":"2+3"}}`, string(sent[1].Content[2]))
}

// TestAnthropicUnsignedReasoningIsNotSent: reasoning another provider
// wrote (no signature) stays out of an Anthropic request, which would be
// refused with it.
func TestAnthropicUnsignedReasoningIsNotSent(t *testing.T) {
	r, bodies := anthropicRecorder(t, anthropicReply)
	msgs := append(user("hi"), agent.Message{Role: agent.RoleAssistant, Content: "Hello.", Reasoning: []agent.Reasoning{{Text: "from deepseek"}}},
		agent.Message{Role: agent.RoleUser, Content: "again"})
	_, err := r.Generate(context.Background(), llm.Request{Model: "anthropic:claude-test", Messages: msgs})
	require.NoError(t, err)
	require.NotContains(t, string(bodies()[0]["messages"]), "from deepseek")
}

// TestPartsReachModels: a user's image and PDF and a tool's image are
// sent by their bytes — to Anthropic as image and document blocks (the
// tool's inside its tool_result), to OpenAI as data: URLs (the tool's in a
// user message after the tool results, which cannot hold images).
func TestPartsReachModels(t *testing.T) {
	ctx := context.Background()
	enc := base64.StdEncoding.EncodeToString(pngBytes)
	turn := func(userParts []agent.Part) []agent.Message {
		return []agent.Message{
			{Role: agent.RoleSystem, Content: "be brief"},
			{Role: agent.RoleUser, Content: "what is this?", Parts: userParts},
			{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "render", Arguments: `{}`}}},
			{Role: agent.RoleTool, ToolCallID: "call_1", Name: "render", Content: "rendered",
				Parts: []agent.Part{{Type: agent.PartImage, URL: pngRef}}},
		}
	}

	t.Run("anthropic", func(t *testing.T) {
		r, bodies := anthropicRecorder(t, anthropicReply)
		_, err := r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Media: media,
			Messages: turn([]agent.Part{{Type: agent.PartImage, URL: pngRef}, {Type: agent.PartFile, URL: pdfRef, Name: "report.pdf"}})})
		require.NoError(t, err)
		var sent []struct {
			Role    string            `json:"role"`
			Content []json.RawMessage `json:"content"`
		}
		require.NoError(t, json.Unmarshal(bodies()[0]["messages"], &sent))
		require.Len(t, sent, 3)
		require.Len(t, sent[0].Content, 3)
		require.JSONEq(t, `{"type":"text","text":"what is this?"}`, string(sent[0].Content[0]))
		require.JSONEq(t, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+enc+`"}}`, string(sent[0].Content[1]))
		require.JSONEq(t, `{"type":"document","title":"report.pdf","source":{"type":"base64","media_type":"application/pdf","data":"`+
			base64.StdEncoding.EncodeToString([]byte("%PDF-1.4 tiny"))+`"}}`, string(sent[0].Content[2]))
		require.JSONEq(t, `{"type":"tool_result","tool_use_id":"call_1","content":[{"type":"text","text":"rendered"},
			{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+enc+`"}}]}`, string(sent[2].Content[0]))
	})

	t.Run("openai", func(t *testing.T) {
		r, body := openAIRecorder(t, "A cat.")
		resp, err := r.Generate(ctx, llm.Request{Model: "openai:m", Media: media, Messages: turn([]agent.Part{{Type: agent.PartImage, URL: pngRef}})})
		require.NoError(t, err)
		require.Equal(t, "A cat.", resp.Message.Content)
		sent := sentMessages(t, *body)
		require.Len(t, sent.Messages, 5)
		dataURL := "data:image/png;base64," + enc
		require.JSONEq(t, `[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"`+dataURL+`"}}]`, string(sent.Messages[1].Content))
		require.Equal(t, "tool", sent.Messages[3].Role)
		require.Equal(t, "user", sent.Messages[4].Role, "the tool's image follows the tool results")
		require.JSONEq(t, `[{"type":"text","text":"Images the tool calls above returned:"},{"type":"text","text":"From call call_1:"},
			{"type":"image_url","image_url":{"url":"`+dataURL+`"}}]`, string(sent.Messages[4].Content))
	})
}

// TestPartsRefused: what a provider cannot take is refused before
// anything is sent, saying what and why.
func TestPartsRefused(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls++ }))
	t.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL + "/v1", AnthropicAPIKey: "k", AnthropicBaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name, model string
		part        agent.Part
		media       bool
		want        string
	}{
		{"file to openai", "openai:m", agent.Part{Type: agent.PartFile, URL: pdfRef, Name: "report.pdf"}, true, "provider openai cannot take file parts (report.pdf)"},
		{"svg as image", "anthropic:c", agent.Part{Type: agent.PartImage, URL: svgRef}, true, "is image/svg+xml, not an image type models take"},
		{"svg to openai", "openai:m", agent.Part{Type: agent.PartImage, URL: svgRef}, true, "is image/svg+xml, not an image type models take"},
		{"unknown ref", "anthropic:c", agent.Part{Type: agent.PartImage, URL: "cas://sha256:" + "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"}, true, "not found"},
		{"https url", "openai:m", agent.Part{Type: agent.PartImage, URL: "https://example.com/cat.png"}, true, "parts reach a model by cas:// ref"},
		{"no media reader", "anthropic:c", agent.Part{Type: agent.PartImage, URL: pngRef}, false, "this call cannot read image parts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := llm.Request{Model: tc.model, Messages: []agent.Message{{Role: agent.RoleUser, Content: "look", Parts: []agent.Part{tc.part}}}}
			if tc.media {
				req.Media = media
			}
			_, err := r.Generate(context.Background(), req)
			require.ErrorContains(t, err, tc.want)
			require.Zero(t, calls, "nothing was sent")
		})
	}
}

// TestToolFilesModelCannotTake: a tool's file the model cannot take — a
// document for an OpenAI-compatible model, one larger than a model is
// sent — is left out of the call, which goes on; the tool's text, which
// names the file, is sent. What the model can take is sent as before.
func TestToolFilesModelCannotTake(t *testing.T) {
	ctx := context.Background()
	bigRef := "cas://sha256:" + "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	withBig := func(ctx context.Context, ref string) ([]byte, string, error) {
		if ref == bigRef {
			return nil, "", agent.Errorf(agent.CodeInvalid, "%s is %d bytes; a model is sent at most %d", ref, 50<<20, llm.MaxMediaBytes)
		}
		return media(ctx, ref)
	}
	msgs := []agent.Message{
		{Role: agent.RoleUser, Content: "fetch the report"},
		{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "call_1", Name: "fetch", Arguments: `{}`}}},
		{Role: agent.RoleTool, ToolCallID: "call_1", Name: "fetch", Content: "file: " + pdfRef + " (application/pdf, 13 bytes)",
			Parts: []agent.Part{
				{Type: agent.PartFile, URL: pdfRef, MIMEType: "application/pdf", Name: "report.pdf"},
				{Type: agent.PartImage, URL: bigRef, MIMEType: "image/png"},
				{Type: agent.PartImage, URL: pngRef, MIMEType: "image/png"},
			}},
	}
	enc := base64.StdEncoding.EncodeToString(pngBytes)

	t.Run("openai", func(t *testing.T) {
		r, body := openAIRecorder(t, "Here it is.")
		_, err := r.Generate(ctx, llm.Request{Model: "openai:m", Media: withBig, Messages: msgs})
		require.NoError(t, err)
		sent := sentMessages(t, *body)
		require.Len(t, sent.Messages, 4)
		require.Equal(t, "tool", sent.Messages[2].Role)
		require.Contains(t, string(sent.Messages[2].Content), pdfRef, "the tool's text names the file")
		require.JSONEq(t, `[{"type":"text","text":"Images the tool calls above returned:"},{"type":"text","text":"From call call_1:"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,`+enc+`"}}]`, string(sent.Messages[3].Content))
	})

	t.Run("anthropic", func(t *testing.T) {
		r, bodies := anthropicRecorder(t, anthropicReply)
		_, err := r.Generate(ctx, llm.Request{Model: "anthropic:claude-test", Media: withBig, Messages: msgs})
		require.NoError(t, err)
		var sent []struct {
			Content []json.RawMessage `json:"content"`
		}
		require.NoError(t, json.Unmarshal(bodies()[0]["messages"], &sent))
		require.Len(t, sent, 3)
		var result struct {
			Content []struct {
				Type string `json:"type"`
			} `json:"content"`
		}
		require.NoError(t, json.Unmarshal(sent[2].Content[0], &result))
		var types []string
		for _, c := range result.Content {
			types = append(types, c.Type)
		}
		require.Equal(t, []string{"text", "document", "image"}, types, "the PDF and the small image; not the large one")
	})
}

// openAIRecorder is a router on an OpenAI-compatible server that answers
// every call with answer and keeps the last request's body.
func openAIRecorder(t *testing.T, answer string) (*llm.Router, *[]byte) {
	t.Helper()
	body := new([]byte)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		reply, _ := json.Marshal(map[string]any{"id": "1", "object": "chat.completion", "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": answer}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
		_, _ = w.Write(reply)
	}))
	t.Cleanup(srv.Close)
	r, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL + "/v1"})
	require.NoError(t, err)
	return r, body
}

// sentRequest is what a chat-completions request sent of its messages.
type sentRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

func sentMessages(t *testing.T, body []byte) sentRequest {
	t.Helper()
	var sent sentRequest
	require.NoError(t, json.Unmarshal(body, &sent))
	return sent
}
