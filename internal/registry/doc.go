// Package registry reads the agent catalog: which tools and agents each
// tenant has. The catalog is kept as code — YAML files under version
// control, applied with `starter catalog apply -f catalog/` — so that a
// change to an agent is reviewed like any other change.
//
// LoadFiles and Parse turn catalog files into an agent.Catalog: every tool
// spec complete (description and parameters defaulted from its kind, config
// checked by the kind's builder) and every agent's tools resolved to full
// specs, ready to be stored. They report every problem they find at once,
// each with its file, line and field, as a *ValidationError.
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
//	    system_prompt: ...
//	    tools: [calculator]      # names of the tenant's tools
//	    temperature: 0           # 0 to 2; absent = the provider's default
//	    limits: {max_iterations: 6, turn_timeout_sec: 120, token_budget: 20000,
//	             approval_timeout_sec: 600, max_output_tokens: 1024}  # 0 or absent = default
//
// Unknown fields are errors, so a misspelt field is never silently ignored.
//
// Later this package also holds the cached catalog snapshots the workers
// read and their hot reload.
package registry
