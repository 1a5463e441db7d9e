// Package registry reads the agent catalog: which tools and agents each
// tenant has. The catalog is kept as code — YAML files under version
// control, applied with `starter catalog apply -f catalog/` — so that a
// change to an agent is reviewed like any other change.
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
//
// # Cache and hot reload
//
// Cache holds each tenant's routing (default agent and compiled rules) at
// its catalog version, for the gateway and the workers. Cache.Run listens
// for the store's catalog notifications and drops a tenant's snapshot when
// its catalog changes, so the next request routes with the new catalog
// while turns in flight keep the agent versions they loaded. A snapshot
// older than 30 seconds is checked against the store anyway, in case a
// notification was lost.
package registry
