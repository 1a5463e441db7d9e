// Package tools builds and runs the tools that agents call.
//
// It must not import the activities, the workflows, the store or the
// registry: the activities hand it a call and its capabilities (Call,
// Deps).
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
// # What a call tells the turn's clients
//
// While it runs, a call may say what it is doing and hand clients data
// of its own, through its Call: Progress("fetching 3 pages") shows as a
// tool_progress event (batched, the latest message winning), and
// Emit(agent.CustomEvent{Name: "chart", ID: "c1", Value: …}) as a custom
// event of the call (docs/events.md): every one delivered, in order,
// between the call's tool_start and tool_end, a JSON value of at most
// agent.MaxCustomValueBytes, and at most eventlog.MaxCustomBytes of values
// a call. An event with an id replaces, for clients, the earlier ones of
// its name and id: a progress bar or a table that grows sends the whole
// value each time. Emit refuses an event not of its shape, or past the
// call's budget, with an agent.CodeInvalid error and sends nothing; a tool
// goes on with its work. Both pass through the registry's secret
// redaction like the call's output. The model never sees them: they are
// for the people watching, not part of the result.
//
// # Data and files
//
// A call reads data by ref through its Call, never from the store:
// Data for structured data, whole (bounded), and OpenBlob for binary
// data as a stream that seeks, a chunk at a time. Both take a ref
// (cas://…, artifact://…) or an input of the turn by index,
// previous_results[i], the i-th of the turn request's
// context.previous_results. A call writes binary results — a download,
// a rendered image — with WriteBlob, which stores a stream as the
// tenant's content-addressed blob as it reads it, all or nothing, and
// names them in Output.Files by ref; small files may go in
// Output.Files as bytes instead. execute_pipeline's http_request uses
// both (response_as "file", body_ref).
//
// # Built-in kinds
//
// Builtin returns the twelve kinds every worker offers; the big ones are
// packages of their own (pipelinetool, openapitool, mcptool), written
// against package kind (Kind, Tool, Call, Output, Deps, which this
// package names by alias) so that this one can offer them:
//
//   - calculator (Calculator, local): evaluates arithmetic exactly; see
//     Calculator for the syntax and for how results are written.
//   - execute_pipeline (pipelinetool.ExecutePipeline): the model writes a short
//     pipeline of steps — http_request, table and JSON steps, jq_transform
//     (internal/pipeline, internal/jqproc) — that fetches and reshapes
//     data; the result is kept by reference and cached per tenant. A pipeline the tenant runs often enough is promoted into a
//     composite (Deps.Composites).
//   - composite_pipeline (pipelinetool.CompositePipeline): a pipeline kept as a tool of
//     its own, called with just the values that differ between runs;
//     promoted by execute_pipeline or declared in the catalog.
//   - search_tools (SearchTools, local): full-text search over the
//     tenant's tools and composites (Deps.ToolSearch), so the model finds
//     one before it builds a pipeline.
//   - openapi_action (openapitool.OpenAPIAction): calls the operations of an HTTP API
//     described by an OpenAPI 3 document (internal/openapi); its entries
//     are resolved when the catalog is applied, which pins the document in
//     the tool's config.
//   - patch_workflow (PatchWorkflow): changes one of the tenant's process
//     definitions with RFC 6902 operations, stored as a new version with
//     an audit record (Deps.Processes, internal/process).
//   - mcp (mcptool.MCP): the tools of an MCP server, over Streamable HTTP or a
//     stdio command the worker allows (Deps.MCPCommands); resolved into one
//     tool per server tool when the catalog is applied.
//   - delegate_to_agent (DelegateToAgent): hands a sub-task to another
//     agent. The turn's workflow runs its calls as child turns
//     (workflows/delegate.go, activities/delegate.go, with the config and
//     arguments in internal/agent); this kind's Build checks the config and
//     its Run only refuses.
//   - ask_user (AskUser): the model asks a person a question (free text or
//     choices) and waits for the answer. The turn's workflow holds its
//     calls until a token with the config's role answers
//     (workflows/question.go); this kind's Build checks the config and its
//     Run only refuses.
//   - retrieve (Retrieve): searches the tenant's collections of documents
//     (Deps.Knowledge, internal/knowledge) and hands the model the chunks
//     found as passages under markers [n], with their citations
//     (Output.Citations); the collections are checked to be the tenant's
//     when the catalog is applied and at every call.
//   - remember (Remember): long-term memory (memory.go): keeps a fact
//     about the user who asks, in the scope of the call's tenant, agent
//     and the turn's caller (Call.Caller, from the credential), never
//     the arguments'. It changes nothing outside the caller's own memory,
//     so it asks for no approval by default.
//   - recall (Recall): searches what remember kept, in the same scope;
//     what it returns is marked as data (MemoryContext).
//
// # Approval
//
// Whether a call waits for a person is decided by one rule, written out in
// approval.go: the catalog entry's policy, else its kind's default
// (Kind.Approval), held to the kind's floor (Kind.ApprovalFloor); a tool
// derived from an entry (Kind.Resolve) is never held to less than the
// policy the catalog wrote for the entry (DerivedApproval).
// Registry.Approval is the one function that says what a call's policy
// is. A kind whose
// calls change things elsewhere sets a default that asks for approval of
// those calls: patch_workflow and mcp always, openapi_action for
// operations other than GET and HEAD, execute_pipeline and
// composite_pipeline for pipelines that POST.
//
// # Delivery
//
// Whether a retried call may send again a write an earlier attempt may
// have sent is one rule too, written out in delivery.go: at most once
// unless the far side deduplicates (internal/effects). Kinds do nothing
// for it but use the call's context for their requests: the egress
// transport gates every HTTP write; mcp gates its tools/call itself, over
// any transport.
//
// # Secrets
//
// A kind never reads the environment: its config names secrets by
// reference (`env:NAME`, `file:/path`), always in fields called "secret", at any depth
// (a pipeline's credentials, an API's auth, an MCP server's headers and
// env). SecretRefs finds them by that name alone, so the catalog checks
// every kind's references against what the operator granted the tenant
// (Deps.SecretGrants) without knowing the kind; Build resolves none, and
// a call resolves them through Deps.Secrets when it is made. A new kind
// keeps to the field name, or its secrets escape that check.
//
// # Adding a kind
//
// Write a func returning its Kind (name, description, parameters, config
// schema, Build; Local, Approval and Resolve when they apply), with tests
// beside it, and add it to Builtin. A big kind gets a package of its own
// under internal/tools, as pipelinetool, openapitool and mcptool are: it
// imports package kind (never this one, which imports it) and keeps to
// the rules here — approval, delivery, secrets by reference, egress —
// which stay in this package and internal/egress, not copied into it. The catalog checks each entry's config
// against Kind.Config, and catalog/schema.json publishes those schemas to
// editors; it is generated from Builtin, not written by hand:
//
//	go test ./internal/catalog -run TestPublishedKindConfigs -update
//
// rewrites it (without -update the test fails while the file is behind
// the kinds). A kind whose calls the workflow must run itself, as
// delegate_to_agent's are, also needs workflow code and a change id
// (workflows/changes.go).
package tools
