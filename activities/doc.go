// Package activities implements agentflow's Temporal activities: LoadAgent,
// Route, CallModel, ExecuteTool and SaveResult. The package name is plural
// so it does not clash with the SDK's activity package.
//
// One Activities struct holds the injected dependencies (store, model,
// tools, logger); each activity is a method with one input and one result
// struct. The workflows package refers to activities by their registered
// names (the constants below) and uses the input/result types only.
//
// # Idempotency and retries
//
// Temporal retries activities, and a worker may die after an activity's
// work is done but before its completion reached the server. Every write
// is therefore keyed so that a retry is harmless:
//
//   - LoadAgent records the turn under (tenant_id, job_id) and writes the
//     prompt as step 0; a second write is a no-op.
//   - CallModel writes its reply as step Seq of the turn. A retry that finds
//     the step already stored returns it without calling the model again,
//     so the workflow always acts on what is stored.
//   - ExecuteTool writes the tool's result as step Seq the same way; a tool
//     is therefore not run again once its result is stored.
//   - SaveResult inserts under (tenant_id, job_id) and returns the stored
//     row: the first result wins, and every caller sees the same one.
//
// Errors that a retry cannot fix (bad input, an unknown agent, a model
// that rejects the request) are returned as non-retryable application
// errors whose type is one of the agent.ErrType* names. A 429 from the
// model becomes a retryable error whose next retry delay honours the
// provider's Retry-After.
package activities
