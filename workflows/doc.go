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
// Changes to a workflow keep the replay tests over the saved histories in
// testdata/ green, or are guarded by workflow.GetVersion with a change id
// declared in changes.go, which lists them all.
//
// # History stays small
//
// Histories carry ids, counts and short previews, not transcripts: model
// calls read the turn's steps and the session's messages from Postgres by
// id, and long tool outputs travel as cas:// references.
package workflows
