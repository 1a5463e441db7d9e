// Package tools builds and runs the tools that agents call.
//
// A tool kind (Kind) is a builder: the catalog names it with `kind:` and
// gives it kind-specific config; the kind validates that config and returns
// a runnable Tool. A Registry holds the kinds a worker offers, builds a
// tool from an agent.Tool spec the first time it is called (and caches it
// by a hash of the spec), and runs it. Builders get their dependencies (a
// logger, an HTTP client, …) from Deps, never from globals, so tests and
// workers can inject their own. A kind marked Local is quick and
// in-process: its tools run as local activities unless the catalog says
// `execution: activity`.
//
// # Errors
//
// Registry.Execute returns errors whose code tells the caller who can fix
// them. agent.CodeInvalid means the model's arguments are wrong; the
// message is written for the model, names the problem and, where it can,
// the position, so the model can correct its call and try again.
// agent.CodeNotFound means the spec names a kind this registry does not
// offer. Anything else is a failure of the tool itself, worth a retry.
//
// # Built-in kinds
//
// calculator evaluates arithmetic exactly; see Calculator for the syntax
// and for how results are written. execute_pipeline fetches and reshapes
// data in steps (ExecutePipeline). openapi_action calls the operations of
// an HTTP API described by an OpenAPI 3 document (OpenAPIAction); its
// entries are resolved when the catalog is applied, which pins the
// document in the tool's config.
// delegate_to_agent hands a sub-task to another agent: the turn's
// workflow runs its calls as child turns, and its Run only refuses
// (DelegateToAgent).
package tools
