// Package temporaltool is the tool kinds that call a team's own code the
// Temporal way: `activity`, an activity type on the team's task queue,
// which the turn schedules there (any SDK's worker polls it);
// `workflow`, a workflow type the turn starts there as its child, for
// tools that wait; and `nexus`, an operation of a Nexus service on an
// endpoint, for code in other namespaces. A catalog entry names its
// target (queue and type, or endpoint); the operator's allow list
// (internal/reach) says which a tenant may name, and a catalog can only
// pick within it. The turn, not the ExecuteTool activity, runs such a
// call: this package checks the entry and gives the turn its options.
package temporaltool
