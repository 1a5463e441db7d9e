// Package activities implements agentflow's Temporal activities: Route,
// LoadAgent, CallModel, ExecuteTool, SaveResult, RecordApproval,
// SealStream and ObserveEvents. The package name is plural so it does not
// clash with the SDK's activity package.
//
// It must not import the workflows or the gateway: the workflows know the
// activities only by the contract's names.
//
// One Activities struct, built by New from checked dependencies (store,
// model, tools, the tenants' settings, logger, Temporal client, the live event publisher,
// the approval policy checker), holds them; each activity is a method with
// one input and one result struct, declared with its name in
// internal/contract. The workflows refer to activities by those names only.
//
// # Idempotency and retries
//
// Temporal retries activities, and a worker may die after an activity's
// work is done but before its completion reached the server. Every write
// is therefore keyed so that a retry is harmless:
//
//   - LoadAgent records the turn under (tenant_id, job_id) and writes the
//     prompt as step 0; a second write is a no-op. It reads the agent
//     version's compiled artefact, and compiles and stores it when it is
//     missing: the same version compiles to the same bytes, stored under
//     the same hash (compiled.go).
//   - CallModel writes its reply as step Seq of the turn. A retry that finds
//     the step already stored returns it without calling the model again,
//     so the workflow always acts on what is stored.
//   - ExecuteTool writes the tool's result as step Seq the same way, with
//     the definition of the tool that ran (agent.ToolVersion); a tool is
//     therefore not run again once its result is stored.
//   - SaveResult inserts under (tenant_id, job_id) and returns the stored
//     row: the first result wins, and every caller sees the same one.
//
// # A model call's stages
//
// CallModel runs as named stages over one value (modelCall): load, then
// prompt; stream inside the hooks (internal/hooks); then price and
// store. Every concern around the call is a hook, the activities' own
// registered in one place, in order (Activities.concerns): the agent's
// input guards, tracing and the worker's own, the budget reservation,
// the output guard and the provider governor's admission. A hook reads
// the call, and keeps what it acquires or decides, in that value
// (modelCallOf); what it must give back when the call fails it hands to
// the one deferred clean-up (giveBack), which gives back whatever is
// still held, once, whichever stage failed. A reply the model gave that
// could not be stored was paid for: the clean-up counts it in the usage
// ledger, under its attempt, before the reservation is released. A new
// concern of a model call is a hook: one file and one registration line.
//
// ExecuteTool's concerns are hooks the same way (toolRun, toolRunOf):
// the PII reveal of a tool's arguments, the tool's rate limit, the PII
// redaction of its output, and the injection guard's screen of what the
// model reads; the write gate and the delivery of effects stay its core.
//
// Activities return domain errors (internal/agent). Register classifies
// them once, with contract.Failure: a code a retry cannot fix (bad input,
// an unknown agent, a model that rejects the request) becomes a
// non-retryable application error whose type is the code's; errors with
// no code stay retryable. A 429 from the model is ModelFailed with the
// provider's Retry-After as the next retry delay.
//
// # Results stay small
//
// Register also checks every result against a payload budget
// (Deps.MaxResultBytes, 1 MiB by default: half the server's blob size
// limit) before it is returned, so that no completion is refused by the
// server, which would time the attempt out and run it again. What grows
// with data travels by cas:// reference with a bounded preview (a tool's
// output and data); a tool's result over the budget all the same is the
// tool's error, and a model reply over it fails the call for good, each
// saying what was too large.
//
// ExecuteTool heartbeats every second while its tool runs: a turn's
// cancellation reaches the call with the next heartbeat the SDK sends,
// cancels the tool's context, and the attempt ends canceled with nothing
// stored.
package activities
