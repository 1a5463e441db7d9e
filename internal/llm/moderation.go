package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"

	openaisdk "github.com/openai/openai-go/v3"

	"github.com/agentflow/agentflow/internal/agent"
)

// Moderation is what a provider's moderation endpoint said of a text.
type Moderation struct {
	Flagged bool
	// Categories are the categories it was flagged in, sorted.
	Categories []string
}

// Moderator classifies text with a provider's moderation model
// (OpenAI-compatible /v1/moderations).
type Moderator interface {
	Moderate(ctx context.Context, model, text string) (Moderation, error)
}

var _ Moderator = (*Router)(nil)

// moderationClient is the OpenAI SDK's client of a provider that speaks
// OpenAI's API, for its moderation endpoint.
func moderationClient(key, baseURL string, hc *http.Client) *openaisdk.Client {
	return openAIClient(key, baseURL, hc, 2)
}

// Moderate implements Moderator for the providers that speak OpenAI's
// API; model is "provider:model" (e.g. "openai:omni-moderation-latest").
func (r *Router) Moderate(ctx context.Context, model, text string) (Moderation, error) {
	p, name, err := r.resolve(model)
	if err != nil {
		return Moderation{}, err
	}
	if p.moderation == nil {
		return Moderation{}, agent.Errorf(agent.CodeInvalid, "provider %q has no moderation endpoint; use an OpenAI-compatible one", p.name)
	}
	resp, err := p.moderation.Moderations.New(ctx, openaisdk.ModerationNewParams{
		Model: openaisdk.ModerationModel(name),
		Input: openaisdk.ModerationNewParamsInputUnion{OfString: openaisdk.String(text)},
	})
	if err != nil {
		return Moderation{}, agent.Errorf(agent.CodeUnavailable, "moderation by %s: %s", model, r.redact(err.Error()))
	}
	var out Moderation
	for _, res := range resp.Results {
		out.Flagged = out.Flagged || res.Flagged
		var cats map[string]bool
		if json.Unmarshal([]byte(res.Categories.RawJSON()), &cats) == nil {
			for c, on := range cats {
				if on {
					out.Categories = append(out.Categories, c)
				}
			}
		}
	}
	sort.Strings(out.Categories)
	return out, nil
}

// String says what was flagged.
func (m Moderation) String() string {
	if !m.Flagged {
		return "not flagged"
	}
	return fmt.Sprintf("flagged: %v", m.Categories)
}
