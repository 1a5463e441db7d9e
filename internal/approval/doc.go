// Package approval decides which tool calls wait for a person, outside the
// workflow: a tool's approval policy applied to a call (Checker), policies
// combined into the strictest (Strictest), and the calls of a model's answer
// sorted into those that run and those that wait, with the grant that
// decides a waiting call in the person's stead (Gate). It must not import
// the workflows, the activities, the gateway, internal/tools (the tool
// registry reaches it through Policies) or internal/store (the store
// reaches it through Grants; the catalog, which imports approval to check
// policies, links no database); the waits themselves are workflow
// code (workflows/approval.go, workflows/question.go), the decisions and
// grants are stored by internal/store beside the rest of a turn, and their
// shapes are internal/agent's.
//
// # Policies
//
// A tool's approval policy is "never" (the default), "always", or a CEL
// expression that must evaluate to a bool, over:
//
//	tool              string               the tool's name
//	args              map(string, dyn)     the call's arguments (the model's JSON)
//	tenant_id         string
//	caller.name       string               from the credential the turn was started with
//	caller.roles      list(string)         from the credential (empty when started through Temporal)
//	client.user_role  string               what the client says: a hint, never identity
//	ui_page           string               a client hint
//	metadata          map(string, string)  client hints
//
// e.g. `args.amount > 100.0 && !("supervisor" in caller.roles)`. Who asks
// comes from the credential only (agent.Caller); what a request body says
// about its sender is exposed under client.*, so that a policy reads as
// what it trusts. Expressions are compiled once and cached. When an
// expression cannot be evaluated for a call (a missing argument, arguments
// that are not a JSON object) the call needs approval: the policy fails
// safe, and the reason says why.
package approval
