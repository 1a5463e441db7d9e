// Package catalog reads the agent catalog: which tools and agents each
// tenant has. The catalog is kept as code — YAML files under version
// control, applied with `starter catalog apply -f catalog/` — so that a
// change to an agent is reviewed like any other change.
//
// It owns the catalog's format and its checks: parse, validate, resolve.
// What a tenant's applied catalog means at run time — its routing table,
// its egress-limited HTTP client, billing, PII redaction — is
// internal/tenant's, which reads it back from the store.
//
// # Imports
//
// catalog imports no database package (internal/store, pgx, database/sql)
// and no Temporal package of its own: a catalog is a pure function of its
// files and the tool kinds, so the gateway checks one before anything is
// stored, and its tests need no database. Temporal's SDK reaches it only
// through internal/tools, whose logging (internal/telemetry) links it, and
// internal/approval, whose gate takes the model call's contract.
// What resolving needs from the store, the tenant's stored egress
// allowlist, is passed in (tenant.ResolveEnvOf). internal/codebase holds the
// rule.
//
// LoadFiles, ParseFiles and Parse turn catalog files into an
// agent.Catalog: every tool spec complete (description and parameters
// defaulted from its kind, config checked by the kind's builder) and every
// agent's tools resolved to full specs, ready for store.ApplyCatalog, which
// checks only what needs the stored catalog. They decode each document
// into typed structs whose yaml tags are the format, and report every
// problem they find at once, each with its file, line and field, as a
// *ValidationError.
//
// # Format
//
// Each YAML document describes one tenant; a file may hold several
// documents (separated by ---) and several files may add to one tenant.
//
//	tenant: demo                 # required
//	default_agent: assistant     # optional; one of the tenant's agents
//	tools:
//	  - name: calculator         # required, unique per tenant, [a-zA-Z0-9_-]{1,64}
//	    kind: calculator         # required: a tool kind the workers offer
//	    description: ...         # default: the kind's description
//	    parameters: {...}        # JSON Schema (type: object); default: the kind's
//	    approval: never          # never (default) | always | a CEL expression
//	    config: {}               # kind-specific, checked by the kind
//	    execution: local         # local | activity; default: local for quick in-process
//	                             # kinds (calculator), activity for the rest
//	agents:
//	  - id: assistant            # required, unique per tenant
//	    description: ...
//	    model: openai:gpt-4o-mini  # required, provider:model
//	    fallback_models: [anthropic:claude-3-5-haiku-latest]  # optional, in order
//	    fallback_on: [ModelFailed, Unavailable, ContextLengthExceeded]  # the default
//	    models_allowed: [openai:gpt-4o]  # optional: models a turn may name instead
//	    system_prompt: ...
//	    examples: [{user: ..., assistant: ...}]  # optional few-shot examples
//	    tools: [calculator]      # names of the tenant's tools
//	    temperature: 0           # 0 to 2; absent = the provider's default
//	    limits: {max_iterations: 6, turn_timeout_sec: 120, token_budget: 20000,
//	             approval_timeout_sec: 600, max_output_tokens: 1024,
//	             turns_per_minute: 60}  # 0 or absent = default
//	rules:                       # optional; when present, the tenant's routing rules
//	  - name: billing            # required, unique per tenant
//	    priority: 10             # highest first; default 0
//	    when: ui_page == "billing"  # required: a CEL condition over the request
//	    agent: billing           # required: one of the tenant's agents
//
// Unknown fields are errors, so a misspelt field is never silently ignored.
package catalog
