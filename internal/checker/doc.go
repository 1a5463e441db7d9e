// Package checker judges a cluster trial after it ran: it reads records
// a workload gathered from sources independent of each other — the
// clients that followed the turns, a counting API on the far side of the
// tools' writes, Temporal's visibility, the database — and reports each
// promise the product broke as a Violation, never by eye.
//
// The promises:
//   - a turn the gateway accepted ends exactly once: one closed workflow
//     chain (continue-as-new runs are links of one chain), none still
//     running at the check;
//   - a write to an API that deduplicates nothing reaches it at most
//     once; one the stream called ok reached it once (an idempotent write:
//     was applied once, however many requests carried it), one it called
//     failed never reached it, one whose outcome was unknown at most once;
//   - each client that followed a turn got every event index from where it
//     started to the last, each once, in order, across its reconnects, and
//     the terminal event when the turn ended;
//   - an approval is decided once and honoured: an approved call runs (when
//     its turn completed), a denied one never does;
//   - an ended turn has one stored result, and its answer is the one its
//     clients streamed; a conversation's transcript holds every message
//     sent, once, in order, each followed by its answer;
//   - after the fault heals, turns succeed again (the probes say when).
//
// Check is pure: it reads Records and returns a Report. Table renders the
// reports of a run of trials as Markdown. For the parts that arrive
// concurrently while a trial runs, Recorder and StreamRecorder gather
// what clients see, and CountingAPI is the far side of the writes.
//
// The package stands outside the system under test: it imports nothing
// of agentflow's, so a bug in the product cannot hide in its own checker.
package checker
