// Package agent holds agentflow's domain types: agents and their tools, the
// catalog that stores them per tenant with its routing rules, the v1 turn
// protocol (TurnRequest, TurnResult), conversation messages, stream events,
// and the error codes with the one table (Code.Class) that says what each
// is on every transport: its Temporal error type, its gRPC code and
// whether a retry may succeed.
//
// It imports nothing outside the standard library so that every other
// package — workflows, activities, store, llm, gateway — can depend on it
// without dragging in the others.
package agent
