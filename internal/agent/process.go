package agent

import (
	"encoding/json"
	"time"
)

// Process is a process definition as a catalog gives it: a JSON document
// of nodes and edges for a tenant, named by its tag (the workflow_tag of
// the job protocol). Applying it stores its first version; patches
// (the patch_workflow tool) add more. internal/process checks it.
type Process struct {
	Tag         string `json:"tag"`
	Description string `json:"description,omitempty"`
	// Schema is a JSON Schema the definition must satisfy besides the
	// built-in rules of nodes and edges; empty: the built-in rules only.
	Schema json.RawMessage `json:"schema,omitempty"`
	// Definition is the document: {"nodes": [...], "edges": [...]}.
	Definition json.RawMessage `json:"definition"`
}

// Where a process version came from.
const (
	ProcessFromCatalog = "catalog"
	ProcessFromPatch   = "patch"
)

// ProcessVersion is one immutable version of a tenant's process
// definition.
type ProcessVersion struct {
	TenantID    string          `json:"tenant_id"`
	Tag         string          `json:"tag"`
	Version     int             `json:"version"`
	Description string          `json:"description,omitempty"` // the process's, from the catalog
	Schema      json.RawMessage `json:"schema,omitempty"`      // what the definition was checked against
	Definition  json.RawMessage `json:"definition"`
	Source      string          `json:"source"`             // catalog | patch
	PatchID     string          `json:"patch_id,omitempty"` // the patch that made it
	CreatedAt   time.Time       `json:"created_at"`
	// Latest is the process's latest version when this one was read.
	Latest int `json:"latest"`
}

// ProcessPatch is the audit record of one patch of a process: what was
// changed, by which tool call of which turn, approved by whom.
type ProcessPatch struct {
	PatchID  string `json:"patch_id"`
	TenantID string `json:"tenant_id"`
	Tag      string `json:"tag"`
	// The turn and the tool call that made the patch.
	JobID      string `json:"job_id"`
	WorkflowID string `json:"workflow_id"`
	CallID     string `json:"call_id"`
	// Approver is the person who approved the call; empty when the call
	// needed no approval.
	Approver    string          `json:"approver,omitempty"`
	Description string          `json:"description"`
	Operations  json.RawMessage `json:"operations"` // RFC 6902, as applied
	FromVersion int             `json:"from_version"`
	ToVersion   int             `json:"to_version"`
	CreatedAt   time.Time       `json:"created_at"`
}

// ProcessHistoryEntry is one version of a process with the patch that
// made it, if a patch did.
type ProcessHistoryEntry struct {
	Version ProcessVersion `json:"version"`
	Patch   *ProcessPatch  `json:"patch,omitempty"`
}
