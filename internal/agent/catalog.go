package agent

import "encoding/json"

// Catalog is what a catalog apply stores: the tools, agents and routing
// rules of some tenants. internal/catalog reads and checks it from catalog
// files; the store applies it and checks only what needs the stored
// catalog.
type Catalog struct {
	Tenants []TenantCatalog
}

// TenantCatalog is one tenant's part of a Catalog.
//
// Applying it is additive: tools and agents it does not mention keep their
// stored versions, and an empty DefaultAgent keeps the stored default.
type TenantCatalog struct {
	TenantID     string
	DefaultAgent string
	// Tools are the tenant's tool definitions, which agents reference by name.
	Tools []Tool
	// Agents to store, with Version 0 (the store assigns versions) and
	// TenantID empty or the tenant's. Each of an agent's Tools is a full
	// spec, as the catalog resolves them, or a reference (only Name set)
	// that the store resolves against Tools and then the tenant's stored
	// tools.
	Agents []Agent
	// Rules become the tenant's routing rules when ReplaceRules is set —
	// a document had a rules key — and rules missing from them are
	// deleted (an empty list deletes them all); otherwise the stored rules
	// stay.
	Rules        []Rule
	ReplaceRules bool
	// Egress becomes the tenant's egress allowlist when ReplaceEgress is
	// set (a document had an egress key): the hosts and address ranges its
	// tools may call.
	Egress        []string
	ReplaceEgress bool
	// Processes are the tenant's process definitions. A process's first
	// version comes from here; a later one only when its definition or
	// schema changes here (see store.ApplyCatalog), so that patched
	// versions stay the latest while the catalog is applied unchanged.
	Processes []Process
	// PromoteAfter, when set, is how many runs of one pipeline shape make
	// it a composite tool of the tenant; 0 turns promotion off.
	PromoteAfter *int
	// Prices become the tenant's price table when ReplacePrices is set (a
	// document had a prices key): what its model calls cost.
	Prices        []Price
	ReplacePrices bool
	// Budgets, when set (a document had a budgets key), become the
	// tenant's budgets; an empty one removes them.
	Budgets *Budgets
	// PII becomes the tenant's PII redaction (internal/guard.Config, as
	// JSON; null removes it) when ReplacePII is set (a document had a pii
	// key).
	PII        json.RawMessage
	ReplacePII bool
	// Retention, when set (a document had a retention key), becomes the
	// tenant's TTLs, each at most the operator's; an empty one leaves
	// the operator's.
	Retention *Retention
	// ModelLimits become the tenant's own limits on its model calls, by
	// governed key, when ReplaceModelLimits is set (a document had a
	// model_limits key); each must narrow the operator's (Narrows).
	ModelLimits        map[string]ModelLimits
	ReplaceModelLimits bool
}

// Rule routes a tenant's requests that name no agent: the rules are tried
// in priority order (highest first, then by name) and the first whose
// condition holds names the agent. Conditions are CEL expressions over
// the request (see internal/routing).
type Rule struct {
	Name      string `json:"name"`
	Priority  int    `json:"priority"`
	Condition string `json:"condition"` // CEL, must evaluate to a bool
	AgentID   string `json:"agent_id"`
}

// RuleError is a routing rule skipped because its condition failed when
// it was evaluated, e.g. "no such key: tier".
type RuleError struct {
	Rule string `json:"rule"`
	Err  string `json:"error"`
}
