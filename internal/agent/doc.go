// Package agent holds agentflow's domain types: agents and their tools, the
// catalog that stores them per tenant with its routing rules, the v1 turn
// protocol (TurnRequest, TurnResult), conversation messages and the error
// codes every adapter maps to its own transport.
//
// It imports nothing outside the standard library so that every other
// package — workflows, activities, store, llm, gateway — can depend on it
// without dragging in the others.
package agent
