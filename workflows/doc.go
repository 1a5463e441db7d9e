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
// # History stays small
//
// Histories carry ids, counts and short previews, not transcripts: model
// calls read the turn's steps and the session's messages from Postgres by
// id, and long tool outputs travel as cas:// references.
package workflows
