package scripted

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
)

type moderationRule struct {
	category string
	re       *regexp.Regexp
}

func (s *Script) compileModeration() ([]moderationRule, error) {
	var out []moderationRule
	for i, m := range s.Moderation {
		if m.Category == "" {
			return nil, fmt.Errorf("moderation[%d]: category is required", i)
		}
		re, err := regexp.Compile(m.Regex)
		if err != nil {
			return nil, fmt.Errorf("moderation[%d]: regex: %w", i, err)
		}
		out = append(out, moderationRule{m.Category, re})
	}
	return out, nil
}

// moderate answers OpenAI's /v1/moderations: each input is flagged in
// the categories of the script's moderation rules it matches.
func (s *Server) moderate(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model string          `json:"model"`
		Input json.RawMessage `json:"input"`
	}
	if !decodePost(w, r, "a moderation", &body) {
		return
	}
	inputs, ok := decodeInputs(w, body.Input)
	if !ok {
		return
	}
	s.mu.Lock()
	s.moderated = append(s.moderated, inputs...)
	s.mu.Unlock()
	results := make([]map[string]any, len(inputs))
	for i, in := range inputs {
		cats, scores := map[string]bool{}, map[string]float64{}
		flagged := false
		for _, m := range s.moderation {
			if m.re.MatchString(in) {
				cats[m.category], scores[m.category], flagged = true, 0.99, true
			}
		}
		results[i] = map[string]any{"flagged": flagged, "categories": cats, "category_scores": scores,
			"category_applied_input_types": map[string][]string{}}
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": fmt.Sprintf("modr-scripted-%d", s.requestIDs.Add(1)), "model": body.Model, "results": results})
}

// Moderated returns the inputs the server was asked to moderate.
func (s *Server) Moderated() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.moderated...)
}
