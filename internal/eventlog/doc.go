// Package eventlog is a turn's event log, all of it: the workflow side
// that keeps it (Log), the activity side that writes to it from a model
// call (Batcher, Sinks, Progress), the reader side that follows it for
// clients (Follower), and, in the sub-package pglive, the Postgres path
// that carries it live. Its shape follows Temporal's Workflow Streams
// (go.temporal.io/sdk/contrib/workflowstreams): one package for both
// sides of one protocol.
//
// # Indices
//
// Every turn has one log of agent.Event, whose stream id is the turn's
// workflow id. Indices start at 1, have no gaps and are never reused: the
// event at index i is the i-th the turn logged, for as long as the
// workflow's history exists. A reader that has index i needs exactly the
// events after it (agent.EventsQuery.AfterIndex).
//
// # Steps, attempts and fencing
//
// The turn logs its own events (status, tool calls, usage, the answer) in
// workflow code (Log.Append). A model call streams its text from an
// activity, which Temporal may run more than once: as token batches
// (agent.TokenBatch), signalled to the turn (contract.SignalTokens). Each
// batch names its step (the call's seq), its attempt and the index of its
// first event, and the log takes it only if it continues the log exactly,
// for the step in flight, from an attempt no older than one already seen
// (Log.Accept). A repeated, late or forged batch is refused whole, and a
// batch can carry token events and RETRYING statuses only: it cannot end
// the stream.
//
// # RETRYING and void_from
//
// A retried attempt must not duplicate or garble what clients saw. Before
// it streams, it reads the log's head from the turn (the authority: an
// earlier attempt may have died between a signal and its heartbeat) and,
// if an earlier attempt streamed anything, sends a status RETRYING whose
// void_from is the call's first index: token events from void_from up to
// that status are void, and the new attempt continues the index space
// (StartBatcher, Restream). Clients fold the text with agent.ReplayText.
// Nothing is ever removed from the log.
//
// # Durable and live
//
// The log in the workflow is the only source of truth (the durable path):
// readers read it with the events query, paged (Log.Page), and its
// history holds it. A query costs a round trip through the Temporal
// server, so events also travel a live path: an activity publishes with
// Postgres NOTIFY (pglive.Publisher) what the turn has already accepted —
// a batch once its signal returned; the turn's own events, handed to the
// next activity in its input (Log.HandOn, contract.Live), once the
// workflow task that logged them has completed — and every process that
// serves clients LISTENs once (pglive.Hub) and fans batches out to its
// followers. The live path never shows what the log will not hold, but
// may lose or delay anything: it only makes readers fast, never correct.
//
// # Child turns and tool progress
//
// A turn that delegates a tool call to a child turn is the child's notify
// workflow: the child's model calls send it their batches too
// (Sinks.Notify), and the child forwards its own tool and approval events
// (Forwarder), in order, one signal at a time (contract.SignalNotifyTokens).
// The parent logs them at its own indices as child events
// (Log.AppendChild), which never end its stream and whose text is not
// its own. A running tool call reports progress the same way, batched
// (Progress, contract.SignalToolProgress); the turn logs it as
// tool_progress.
//
// # Catch up, then follow
//
// A Follower reads the log from the client's position, then takes live
// batches that continue it. A batch after a gap, a wake-up, a lagging
// subscription (its buffer full, the listener reconnecting) or a quiet
// spell makes it read the log again; the workflow's close makes it read
// the log a last time. A follower of a turn it starts subscribes before
// the start (FollowNew), so that with the live path whole it reads the log
// only when the turn has closed. It delivers each index once, in order,
// and never waits on another follower.
//
// # Continue-as-new
//
// A turn does not continue as new: its log lives and ends with its run.
package eventlog
