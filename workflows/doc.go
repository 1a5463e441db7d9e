// Package workflows holds agentflow's Temporal workflows: AgentTurn (one
// agent turn: route, load, call the model, run tools, save the result) and
// Conversation (a session's turns, one after the other, continued as new
// when its history grows). Register registers both under their names in
// internal/contract, the one home of the Temporal contract: the workflows
// know the activities by those names and payload types only, and link no
// adapter (no store, model provider or CEL). The package name is plural so
// it does not clash with the SDK's workflow package.
//
// # Determinism
//
// Workflow code is replayed from history, so it must make the same
// decisions every time:
//
//   - time comes from workflow.Now, waiting from workflow.NewTimer and
//     workflow.Sleep, never from package time;
//   - concurrency uses workflow.Go, workflow.Channel and workflow.Selector,
//     never goroutines, channels or sync;
//   - there is no randomness, no I/O and no iteration over maps whose order
//     affects a decision (sort keys first);
//   - every side effect — the store, the model, tools — is an activity.
//
// # The turn's core and its components
//
// AgentTurn is a core — check, route, load, the model and its tools in a
// loop, save (turn.go, model.go, tools.go, result.go) — and components,
// one per feature, each in its own file with its state (component.go).
// The core calls no feature by name: at each stage of a turn it calls
// the components that implement the stage's hook, in the components'
// order — routed, loaded (search attributes, the cancellation taken
// while loading, the prepare phase), beforeStep (messages steered in),
// beforeCall (those messages, the answer they cut short, the steps read
// whole), cutShort, afterModel (metrics, the token budget), answerAgain,
// refuse (tool limits), afterTool (metrics), afterTools (the token
// budget), beforeSave (steered messages, delivery) and ended (metrics).
// The hooks are workflow code like the core: what they start is recorded
// where the core started it before they were hooks, so the recorded
// histories replay unchanged. The core still steers by the turn's
// cancellation, its model policy (model, fallback, repair), its event
// log, and the kinds of tool call a round runs (approvals, delegations,
// questions, programs): they decide the loop's course rather than add
// to a stage.
//
// # Versioning: pinned turns, gated conversations
//
// Production runs Worker Deployment Versioning (the Kubernetes manifests
// and `starter up --production` do): every worker belongs to a build, and
// register.go gives each workflow its behavior.
//
//   - AgentTurn and Evaluation are Pinned: a run replays only on the build
//     that started it, so their code has no workflow.GetVersion gates, and a
//     change to it needs none.
//   - Conversation is AutoUpgrade: a session outlives deploys, so a change
//     to its code that a run in flight could replay differently is gated
//     with workflow.GetVersion. Its gates, declared in changes.go with
//     what each changed, are memoryChange, conversationStreamsChange,
//     agentOnBusyChange, jobTakenChange and memoryExtractChange;
//     TestChangeIDs holds this list to changes.go and refuses a gate
//     outside conversation.go, conversation_stream.go and memory.go.
//
// An unversioned worker (`go tool task up`, tests) is the development
// mode: drain the turns in flight before deploying a change to them. The
// worker says so at start when it is not on a local stack.
//
// When a change needs a recorded history. Every history in testdata/ is
// a run of the current code, and TestReplay replays them all. A change
// that alters what a turn records — which activities, timers, children,
// signals, updates or markers, in which order — for a shape testdata/
// holds re-records that history in the same commit (the end-to-end tests
// record with AGENTFLOW_RECORD_HISTORIES=1), so that the test keeps
// covering the path; a change that adds a shape records one for it. A
// history is never deleted to make the test pass. A change to
// Conversation also keeps the histories recorded before it replaying,
// which is what its gates are for.
//
// # Local model calls, reached from outside
//
// A model call is a local activity — the default (agent.ModelLocal) —
// unless its agent says activity or its turn streams into another
// workflow (localCall): a one-tool turn is then one workflow
// task, which makes agentflow's turn cheaper than the same turn on bare
// Temporal activities. What a local call costs is that the turn's
// workflow task is busy while it runs: signals and timers are read only
// at the task's heartbeats (every 8 s at the default task timeout). Two
// of them must not wait that long, and reach the call in the worker
// instead, with the turn's history and determinism as they were:
//
//   - A cancellation through agentflow's API: the gateway signals
//     cancel_turn, then sends the turn's id on the live path
//     (pglive.Interrupt); the worker running the call ends its context,
//     and the call fails as Canceled. The turn then waits for the signal
//     (awaitStop), which is in its next workflow task, brought at once by
//     the call's end, and stops as it would have; a replay takes the same
//     failure from the call's marker and the same signal from history.
//     Only the worker is told sooner, and only once the signal is in, so
//     a lost notification costs time, never correctness.
//   - The turn's timeout: a local call's schedule-to-close timeout is the
//     time the turn has left, so the worker ends it at the deadline, and
//     the turn waits for its timer the same way.
//
// Shorter workflow-task heartbeats were the other way to have both: they
// would add three history events per heartbeat to every call (about 110
// for a 30-s call at 1 s) and make a busy worker's tasks time out, where
// the interruption adds none. A steer that arrives mid-call interrupts
// the call the same way, sent by the turn itself (InterruptModel, a
// local activity) as soon as it reads the message: at once for a call
// that is an activity (a Conversation's turn), at the heartbeat for a
// local one. The call fails as interrupted (contract.IsInterrupted, not
// retried); the turn takes a cancellation if one came, else keeps what
// the call streamed as the model's answer cut short and calls the model
// again with the message (steer.go). A follower that joins mid-call reads the live path, which
// stores the turn's handed-on events with its calls' batches, not the
// log, whose query the task would answer only at its heartbeat. A worker
// killed mid-task loses the task and every local call it ran: the
// surviving worker runs them again, each finding its reply stored and
// taking it as followers were shown it (eventlog.Shown), so the log goes
// on at the indices they hold. What remains: the call holds a workflow
// task slot; docs/reference/catalog.md says so. A task that runs local
// calls and local tools back to back records their markers only when it
// completes, so the history length it reads stays where the task began:
// the turn adds a marker for each local activity it started since
// (taskClock.historyLength), and continues as new at its bound all the same.
// A local call the provider governor would have wait does not wait in
// the task: the governor refuses it at once (governor.Call.NoWait), and
// the turn sends the call again as an activity, whose wait holds no task
// slot and shows on its pending state (callModel).
//
// A turn with a notify workflow (a parent turn, a process, a
// Conversation) or a Workflow Streams subscriber keeps its calls as
// activities: its log takes each batch as a signal, in order with its
// own events, between workflow tasks, which a local call would hold back
// until it ended.
//
// # History stays small
//
// Histories carry ids, counts and short previews, not transcripts: model
// calls read the turn's steps and the session's messages from Postgres by
// id, and long tool outputs travel as cas:// references.
package workflows
