package store

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/llm/strictschema"
)

// strictNote says, for the apply report (Change.Note), which of an
// agent's tools its model is sent without strict, and why — the
// computation the model call makes (strictschema.Schemas) — so that a
// schema strict mode cannot describe is seen when the catalog is applied,
// not found at call time, where it is never an error; "" when every tool
// goes strict, or the model takes no strict tools. A tool only a program
// calls (code mode) is not the model's.
func strictNote(a agent.Agent) string {
	if strictschema.For(a.Model) == "" {
		return ""
	}
	var tools []agent.Tool
	var schemas []json.RawMessage
	for _, t := range a.Tools {
		if a.CodeMode == nil || !a.CodeModeTool(t.Name) {
			tools, schemas = append(tools, t), append(schemas, t.Parameters)
		}
	}
	var not []string
	for i, r := range strictschema.Schemas(a.Model, schemas) {
		if !r.Strict {
			not = append(not, fmt.Sprintf("%s (%s)", tools[i].Name, r.Reason))
		}
	}
	if len(not) == 0 {
		return ""
	}
	if len(not) > maxNotStrict {
		not = append(not[:maxNotStrict], fmt.Sprintf("and %d more", len(not)-maxNotStrict))
	}
	return "tools sent to " + a.Model + " without strict: " + strings.Join(not, "; ")
}

// maxNotStrict bounds the tools a note names: an entry may stand for
// hundreds (an API's operations).
const maxNotStrict = 5
