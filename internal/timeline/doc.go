// Package timeline builds a turn's timeline: what the turn did, step by
// step, with when, at what cost and in which workflow run, for a person
// who reads a turn after the fact or while it runs (the JSON of
// GET /v1/turn/{tenant}/{job}/timeline, types.go).
//
// A timeline is a header, the turn's totals and its runs, on every page,
// and a page of items, one per stored step in seq order: the prompt
// (seq 0), each model call with its reply, each tool call with its
// result, and each message added to the running turn. Nothing is
// derived from the workflow's history; every part comes from a table
// the turn already writes:
//
//   - the turns row: agent, version, session, workflow id, the request
//     (as redacted at intake: the prompt is shown as stored, never
//     anything unredacted) and when the turn began; its agent_results
//     row, once it ended: status, error and when it ended.
//   - turn_steps: each step's message and created_at. An item ends when
//     its step was stored and starts when the step before it was; the
//     results of one round of tool calls all start when the reply that
//     asked for them was stored, so parallel calls draw side by side.
//   - usage_ledger: one row per model call the model answered, keyed by
//     the turn_steps seq of its reply (step) and the activity attempt
//     that stored it: model, tokens, cost, and what the call read of the
//     turn (whole_from, digest_from). Attempt 2 is one retry.
//   - approvals: how a call behind approval was decided (the latest
//     decision of the call, should it have several).
//   - tool_effects: the side-effects ledger of a call's write to the far
//     side (its first delivery).
//   - Temporal's visibility: the turn's workflow runs (a turn that
//     continued as new has several), each item placed in the run it was
//     stored in. Visibility is a convenience: when it cannot be read the
//     page is answered without runs.
//
// Every read is keyed by (tenant, job) and is a key lookup or a range of
// a primary key's index, so a page costs the same in a turn of 20,000
// steps as in one of twenty; the totals are one aggregate over the turn.
// Build reads through Store (the store satisfies it) and RunLister
// (TemporalRuns), so that it is tested without either.
//
// BuildRequest answers what one model call read: the agent version's
// system prompt (for admins only) and tools, the prompt, and the steps
// it read whole, naming those a digest described.
package timeline
