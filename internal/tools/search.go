package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// searchParameters is seed 004 §5.3's schema of search_tools' arguments.
const searchParameters = `{"type":"object","additionalProperties":false,"required":["query"],"properties":{` +
	`"query":{"type":"string","description":"Search query (keywords or description)"},` +
	`"limit":{"type":"integer","minimum":1,"maximum":50,"description":"Max results to return","default":10}}}`

// Search limits.
const (
	defaultSearchLimit = 10
	maxSearchLimit     = 50
	maxQueryBytes      = 500
)

// SearchTools returns the search_tools kind (seed 004 §5.3): full-text
// search over the tenant's tools, composites included — their names,
// descriptions and arguments — best match first. The model reads which
// of them it may call.
func SearchTools() Kind {
	return Kind{
		Name:        "search_tools",
		Description: "Search the tools and saved pipelines (composites) that exist for this tenant before building a new pipeline.",
		Parameters:  json.RawMessage(searchParameters),
		Local:       true,
		Build: func(_ agent.Tool, deps Deps) (Tool, error) {
			return searchTool{deps: deps}, nil
		},
	}
}

type searchTool struct{ deps Deps }

func (t searchTool) Run(ctx context.Context, call Call) (Output, error) {
	var args struct {
		Query string `json:"query"`
		Limit *int   `json:"limit"`
	}
	if err := decodeArgs(call.Args, &args, `{"query": "...", "limit": 10}`); err != nil {
		return Output{}, err
	}
	q, err := queryArg(args.Query, maxQueryBytes, "a few keywords or a description of the tool you need")
	if err != nil {
		return Output{}, err
	}
	limit := defaultSearchLimit
	if args.Limit != nil {
		if *args.Limit < 1 || *args.Limit > maxSearchLimit {
			return Output{}, agent.Errorf(agent.CodeInvalid, "limit must be 1 to %d, got %d", maxSearchLimit, *args.Limit)
		}
		limit = *args.Limit
	}
	if t.deps.ToolSearch == nil {
		return Output{}, agent.Errorf(agent.CodeInternal, "search_tools has no tool index")
	}
	found, err := t.deps.ToolSearch.SearchTools(ctx, call.TenantID, q, limit)
	if err != nil {
		return Output{}, fmt.Errorf("search tools: %w", err)
	}
	if len(found) == 0 {
		return Output{Text: fmt.Sprintf("No tools match %q.", q)}, nil
	}
	var b strings.Builder
	if len(found) == 1 {
		fmt.Fprintf(&b, "1 tool matches %q:", q)
	} else {
		fmt.Fprintf(&b, "%d tools match %q, best first:", len(found), q)
	}
	for _, tool := range found {
		access := "you cannot call it"
		if call.Granted(tool.Name) {
			access = "you can call it"
		}
		fmt.Fprintf(&b, "\n- %s (%s; %s): %s", tool.Name, tool.Kind, access, words.Clip(tool.Description, 300))
		if args := argumentNames(tool.Parameters); args != "" {
			fmt.Fprintf(&b, " Arguments: %s.", args)
		}
	}
	return Output{Text: b.String()}, nil
}

// argumentNames lists the properties of a tool's parameters schema.
func argumentNames(schema json.RawMessage) string {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; ok {
			names = append(names, r)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(s.Properties)) {
		if !slices.Contains(s.Required, k) {
			names = append(names, k+" (optional)")
		}
	}
	return strings.Join(names, ", ")
}

// queryArg is a search's query argument, trimmed: required (need says
// what to send), valid UTF-8, at most max bytes.
func queryArg(raw string, max int, need string) (string, error) {
	q := strings.TrimSpace(raw)
	switch {
	case q == "":
		return "", agent.Errorf(agent.CodeInvalid, "query is required: %s", need)
	case len(q) > max || !utf8.ValidString(q):
		return "", agent.Errorf(agent.CodeInvalid, "query must be valid text of at most %d bytes", max)
	}
	return q, nil
}
