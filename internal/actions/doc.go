// Package actions counts the Temporal Cloud billable actions that one
// workflow run's event history shows, kind by kind, by the rules Temporal
// publishes at https://docs.temporal.io/cloud/actions (read 2026-11-29,
// temporalio/documentation docs/evaluate/cloud/actions.mdx at commit
// 24afc58a45403e4942a36ac4e4805c05c4298fb9).
//
// A history is an estimate's source, not the bill: Temporal says its
// history event types "do not always map 1:1" to the actions billed, and
// some actions leave no event at all — queries, activity heartbeats,
// workflow task heartbeats, rejected updates, schedule and export
// operations. Count leaves those out and says so on Counts; each rule it
// applies cites the line of the page it follows.
//
// The package is pure: it reads the events it is given, and imports only
// Temporal's API types and the standard library.
package actions
