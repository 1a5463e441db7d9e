// Package eventlog is a turn's event log, all of it: the workflow side
// that keeps it (Log), the activity side that writes to it from a model
// call (Batcher, Sinks, Progress), the reader side that follows it for
// clients (Follower), and, in the sub-package pglive, the Postgres path
// that carries it live. Its shape follows Temporal's Workflow Streams
// (go.temporal.io/sdk/contrib/workflowstreams), one package for both
// sides of one protocol, and a turn speaks that protocol too (see
// Workflow Streams below).
//
// The workflows link it, so it must not import a database driver, a model
// provider or the gateway: its Postgres path is the sub-package pglive.
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
// The turn logs its own events (status, steps, tool calls, approvals,
// usage, the answer) in workflow code (Log.Append). A model call streams
// from an activity, which Temporal may run more than once: its answer's
// text, its reasoning and its tool calls' argument fragments, as token,
// reasoning and tool_args_delta events in the order the model sent them
// (Batcher), in token batches (agent.TokenBatch). Each batch names its
// step (the call's seq), its attempt and the index of its first event, and
// the log takes it only if it continues the log exactly, for the step in
// flight, from an attempt no older than one already seen (Log.Accept). A
// repeated, late or forged batch is refused whole, and a batch can carry
// those three kinds (each of its shape) and RETRYING statuses only: it
// cannot end the stream.
//
// How batches reach the log. A call streams live first
// (contract.CallModelInput.LiveFirst) when the turn has no notify workflow
// and no Workflow Streams subscriber, and the worker's live path stores
// what it carries (Appender): each batch is appended to the live path as
// it leaves — stored in Postgres and published in one statement — and the
// call returns all of them in its result (contract.CallModelResult.Tail),
// which the turn logs at once. A streamed reply then costs the turn no
// signal and no workflow task per batch, which under load is most of what
// a streamed turn costs the Temporal server. Otherwise each batch is
// signalled to the turn (contract.SignalTokens), as before, and only the
// last comes with the result.
//
// # RETRYING and void_from
//
// A retried attempt must not duplicate or garble what clients saw. Before
// it streams, it reads the log's head from the turn (the authority: an
// earlier attempt may have died between a signal and its heartbeat) and,
// if an earlier attempt streamed anything, sends a status RETRYING whose
// void_from is the call's first index: the streamed events (token,
// reasoning, tool_args_delta) from void_from up to that status are void,
// and the new attempt continues the index space (StartBatcher, Restream).
// Clients drop them with agent.Unvoided, or fold the text with
// agent.ReplayText. Nothing is ever removed from the log.
//
// A signalled attempt that Temporal gave up on (its heartbeat timed out,
// say while it waited on that very read of the head) still runs until its
// next heartbeat tells it, and may stream beside the retry, from the same
// head; the turn takes one attempt's batch at each index and refuses the
// other's, and only what it took may be shown, or a follower that takes
// some indices from one attempt's cut of the text and the rest from the
// other's skips or repeats text. So a retried signalled attempt fences the
// stream on the live path before it reads the head (Fencer.Fence): every
// signalled batch is published fenced, and no earlier attempt publishes
// after the fence; and its first batch goes on only once the turn's log
// shows the turn took it (Sinks.SendFirst): an earlier attempt may still
// have got a batch in at that head, and then the retry stops
// (ErrNotTaken) and the next one reads the head again. Once the turn has
// taken a batch of an attempt, it refuses every earlier attempt's.
//
// A live-first attempt also claims the stream (Appender.Claim): from then
// on no earlier attempt appends anything (each append locks the stream's
// fence row and is refused for an older attempt), and the claim returns
// what earlier attempts appended — exactly what followers may have seen —
// which the new attempt's result carries first, before its RETRYING. A
// live-first call that fails for good, or is stopped, is sealed by the
// turn (contract.SealStream, a claim newer than any attempt) before it
// logs anything else: what the call showed is logged at the indices its
// followers saw, and its text stays, as a signalled call's does. Only an
// attempt's first append may claim the stream; once it holds it (its
// claim or an append of it stored), it appends only while the stream's
// fence is still its own: the turn's last activity drops the fence with
// the stored batches (Appender.Forget), so that a new run of the job
// starts afresh, and a stopped call's activity runs on until its next
// heartbeat, which must not put its text at the indices of the turn's
// closing events.
//
// A local call runs again from its first attempt when its workflow task is
// lost with its worker, and that task may have run the turn's later steps
// too, whose events followers were shown. A call that finds its reply
// stored therefore claims nothing: it takes what its attempts stored
// (Shown: the whole reply, since a live-first call appends its last batch
// too) as its batch, so the turn logs everything after it at the indices
// its followers hold, and the later step's call, run again, voids only its
// own (Behind).
//
// # Durable and live
//
// The log in the workflow is the source of truth (the durable path):
// readers read it with the events query, paged (Log.Page), and its
// history holds it. A query costs a round trip through the Temporal
// server, so events also travel a live path: an activity publishes with
// Postgres NOTIFY (pglive.Publisher) what the turn has accepted — a
// signalled batch once its signal returned, fenced (Fencer); the turn's
// own events, handed to the next activity in its input (Log.HandOn,
// contract.Live), once the workflow task that logged them has completed,
// stored too when the live path stores (Appender.Put) — and the batches
// of a live-first call as
// they leave, stored, with the fencing above that makes the log hold
// exactly them; every process that serves clients
// LISTENs once (pglive.Hub) and fans batches out to its followers. The
// live path never shows what the log will not hold, but may lose or delay
// anything: it only makes readers fast, never correct. While a live-first
// call runs, its batches are past the log's end: the events query and
// Workflow Streams do not have them yet (a turn that a Workflow Streams
// subscriber polls signals its later calls' batches), followers read them
// stored (LiveSource.Stored).
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
// A Follower reads the log from the client's position, and what a
// live-first call in flight has stored past its end, then takes live
// batches that continue it. When the live path holds what follows the
// client's position — a turn's handed-on events and its calls' batches
// are stored from its first hand-on until it ends — it reads there
// instead: the events query waits while a local model call holds the
// turn's workflow task, and a client joining mid-call would see nothing
// until the call's end or the task's heartbeat. A batch after a gap or a
// lagging subscription (its buffer full, the listener reconnecting) makes
// it read the live path, then the log if that does not continue the
// stream; a wake-up or a quiet spell, the log. A streamed turn's end
// comes live first: once SaveResult has stored the result (and the
// session its exchange), it publishes the turn's events since its last
// hand-on and the closing ones (Closing: the answer's blocks, the
// terminal status) at the indices the turn gave it
// (contract.SaveResultInput.CloseFrom), in one notification when they
// fit, and returns them; the turn logs them as returned, taking in
// nothing between, so the log holds exactly what followers were shown.
// The workflow's close ends every follower all the same: a turn returns
// the events it logged after its last hand-on, through its terminal
// status (Log.Tail, agent.TurnResult.StreamTail), and a follower that has
// every event before them ends with them; otherwise it reads the log a
// last time (a query that a closed workflow's worker answers by
// replaying its whole history). A follower of a turn it starts subscribes
// before the start (FollowNew), so that with the live path whole it reads
// nothing at all. It delivers each index once, in order, and never waits
// on another follower.
//
// # Reads
//
// Follower.Read is one read of a stream for a client that pages it
// (ListEvents): the log, then what a live-first call in flight has stored
// past its end, never waiting on the turn. A query waits while the turn's
// workflow task is scheduled or running — for a local model call, the
// whole call — so while it does, the read looks at the live path, and
// when the turn is in a task and the live path holds the stream from the
// reader's position, answers from there. A read asked to wait for an
// event that has not come yet follows the stream until one does.
//
// # Workflow Streams
//
// A turn also speaks Temporal's Workflow Streams protocol, so that its
// clients in any language (Go, Python, TypeScript) follow a turn with no
// agentflow code: the poll update contract.UpdateStreamPoll
// ("__temporal_workflow_stream_poll", PollInput → PollResult) and the
// offset query contract.QueryStreamOffset (Log.ServeStream), with the
// package's JSON envelopes, its item encoding (the standard base64 of the
// protobuf of a Payload made by the default payload converter, json/plain),
// its 1,000,000-byte pages with more_ready, and its error types
// (ErrTypeTruncatedOffset, ErrTypeStreamDraining).
//
// Topics. "events" (contract.StreamTopicEvents) carries every event of
// the log, child events and RETRYING included, each as the JSON of its
// agent.Event: what the events query pages and gRPC streams. "text"
// (contract.StreamTopicText) carries the text of each model reply as one
// JSON string, put on the stream when the call that produced it has
// completed (Log.AppendText): a completed activity is never run again,
// so nothing on "text" is ever voided. A client that wants the answer
// without folding RETRYING reads "text" (the turn's answer is its last
// item); one that wants tokens as they stream reads "events" and folds
// them as agent.ReplayText does. Concatenated, the text items are what
// agent.ReplayText makes of the events.
//
// Offsets and indices. The stream's offsets are global across topics and
// start at 0; the items are the log's events in index order with each
// reply's text item after the events of its call. So the event at index i
// has offset i-1 plus the number of text items before it: a subscriber
// resumes from an item's offset + 1, never from an event index. Offsets
// are positions in an append-only list, so a subscriber that resumes from
// an offset gets every later item once. A long turn's later runs hold the
// stream from what was handed on (Continue-as-new, below); a poll from
// before that meets TruncatedOffset.
//
// The publish signal. contract.SignalStreamPublish is accepted (signals
// cannot be refused) and dropped, with a warning in the worker's log. A
// turn's log is written by the turn and its model calls only: token
// batches keep the tokens signal, whose fencing by step, attempt and
// first index is what keeps a retried call's text exact; a publish
// carries a publisher id and a sequence, nothing that could fence an
// attempt, and taking it would let anyone who may signal the workflow put
// events — a forged answer, a COMPLETED — into a tenant's turn.
//
// Draining. An update cannot reach a closed workflow, so before a polled
// turn returns (Log.DrainStream) it keeps answering polls for StreamGrace
// after its last event — a subscriber between two polls comes back and
// reads the end — then answers the polls still waiting with what the log
// holds, and any that still reaches it at once, and waits for every
// handler to finish. (A run that continues as new refuses new polls with
// StreamDraining instead: its next run answers them, and a last run that
// a subscriber of the runs before has not reached yet waits up to
// StreamCatchUp for its poll.) A subscriber polling as the turn ends thus receives
// every event through the final status; a later one (the workflow has
// closed) reads the events query or agentflow's channels. Subscribers
// should stop at the terminal event: the stream has no other end marker.
// A run no one polled neither waits nor records anything for the stream,
// unless its request opened a window for subscribers to come
// (agent.TurnRequest.StreamWindowSec): it then answers polls until the
// window has passed, however soon it ends. No run waits otherwise: the
// workflow's result is there only once it has closed, and callers wait
// for it (DrainStream says more).
//
// Each poll is an update, written to the turn's history; a self-hosted
// Temporal server allows 10 updates in flight per workflow and 2,000 in
// a run by default. Workflow Streams suits a few subscribers per turn;
// many clients of one turn belong on agentflow's channels, which read
// the log once and fan it out.
//
// # Continue-as-new
//
// A long turn continues as new at a step boundary (workflows'
// component.go), and a Conversation between turns: each run hands the
// next the log's tail, at most CarryBytes of it (Carry), with the next
// index and the offset of the tail's first item, and the next run goes on
// from them (Restore), so indices and offsets never restart. Before it
// does, the run releases its Workflow Streams polls (DetachPollers):
// subscribers poll again, reach the next run, and go on from the same
// offset. Once a subscriber has polled, the run hands on every item from
// where it had read (the furthest offset a poll came from, carried from
// run to run), up to ReadCarryBytes, rather than the tail alone: a run of
// local calls can make all its steps in one workflow task, before the
// next poll reaches it, and a subscriber reading along must not lose its
// place to that. One further behind than that gets TruncatedOffset. A turn's
// events query also names the run before (Earlier,
// agent.EventsPage.EarlierRunID), which holds the events before the tail:
// turnclient.Events, which every door's reader uses, walks back to the
// run that holds the events asked for.
package eventlog
