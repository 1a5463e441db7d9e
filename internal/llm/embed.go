package llm

import (
	"context"
	"fmt"
	"net/http"

	openaisdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentflow/agentflow/internal/agent"
)

// MaxEmbedInputs is how many texts one Embed call may send: OpenAI's
// limit for one request (2048 inputs).
const MaxEmbedInputs = 2048

// embeddingClient is the OpenAI SDK's client of a provider that speaks
// OpenAI's API, for its /embeddings endpoint. Its retries are off:
// Temporal owns them, as for chat calls.
func embeddingClient(key, baseURL string, hc *http.Client) *openaisdk.Client {
	return openAIClient(key, baseURL, hc, 0)
}

// openAIClient is the OpenAI SDK's client of a provider that speaks
// OpenAI's API (baseURL, else OpenAI's), retrying a call retries times.
func openAIClient(key, baseURL string, hc *http.Client, retries int) *openaisdk.Client {
	opts := []option.RequestOption{option.WithAPIKey(key), option.WithHTTPClient(hc), option.WithMaxRetries(retries)}
	if baseURL != "" {
		opts = append(opts, option.WithBaseURL(baseURL))
	}
	c := openaisdk.NewClient(opts...)
	return &c
}

// Embed returns the embeddings of texts, in order, by model
// ("provider:model": openai, or ollama and other OpenAI-compatible servers
// through their /v1/embeddings). dims, when positive, asks for vectors of
// that length (OpenAI's "dimensions"; models that cannot shorten theirs
// refuse it). Anthropic has no embedding API: naming it is a CodeInvalid
// error.
//
// Failures are classified as Generate's are: *Error with Retryable and
// the provider's Retry-After; requests that cannot be valid (no texts, an
// empty text, too many) as CodeInvalid; a reply that does not match the
// request (count, length) as a retryable *Error.
func (r *Router) Embed(ctx context.Context, model string, dims int, texts []string) ([][]float32, agent.Usage, error) {
	p, name, err := r.resolve(model)
	if err != nil {
		return nil, agent.Usage{}, err
	}
	fullName := p.name + ":" + name
	if p.embeddings == nil {
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid,
			"model %q: provider %s has no embedding API; use an OpenAI-compatible or Ollama embedding model", model, p.name)
	}
	switch {
	case len(texts) == 0:
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid, "embed with %s: no texts", fullName)
	case len(texts) > MaxEmbedInputs:
		return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid, "embed with %s: %d texts; the limit of one call is %d", fullName, len(texts), MaxEmbedInputs)
	}
	for i, t := range texts {
		if t == "" {
			return nil, agent.Usage{}, agent.Errorf(agent.CodeInvalid, "embed with %s: text %d is empty", fullName, i)
		}
	}
	params := openaisdk.EmbeddingNewParams{
		Model:          openaisdk.EmbeddingModel(name),
		Input:          openaisdk.EmbeddingNewParamsInputUnion{OfArrayOfStrings: texts},
		EncodingFormat: openaisdk.EmbeddingNewParamsEncodingFormatFloat,
	}
	if dims > 0 {
		params.Dimensions = openaisdk.Int(int64(dims))
	}
	st := &callState{}
	resp, err := p.embeddings.Embeddings.New(withCallState(ctx, st), params)
	if err != nil {
		return nil, agent.Usage{}, r.failure(ctx, fullName, st, err)
	}
	if len(resp.Data) != len(texts) {
		return nil, agent.Usage{}, &Error{Model: fullName, Retryable: true,
			Message: fmt.Sprintf("embeddings: %d returned for %d texts", len(resp.Data), len(texts))}
	}
	out := make([][]float32, len(texts))
	for _, e := range resp.Data {
		i := int(e.Index)
		if i < 0 || i >= len(out) || out[i] != nil || len(e.Embedding) == 0 || dims > 0 && len(e.Embedding) != dims {
			return nil, agent.Usage{}, &Error{Model: fullName, Retryable: true,
				Message: fmt.Sprintf("embeddings: entry %d (%d values) does not match the request", i, len(e.Embedding))}
		}
		v := make([]float32, len(e.Embedding))
		for j, x := range e.Embedding {
			v[j] = float32(x)
		}
		out[i] = v
	}
	u := agent.Usage{PromptTokens: int(resp.Usage.PromptTokens), TotalTokens: int(resp.Usage.TotalTokens)}
	return out, u, nil
}
