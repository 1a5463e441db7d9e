// Package routing picks the agent for a request that names none, from the
// tenant's routing rules.
//
// It imports only the domain and CEL: it must not import the store or the
// registry, which hand it the rules.
//
// # Rules
//
// A rule (agent.Rule) has a name, a priority, a condition written in CEL
// and the agent it routes to. Compile checks a tenant's rules and compiles
// every condition once; internal/catalog checks each condition
// (CompileCondition) when a catalog is applied and internal/tenant compiles
// the rules once per catalog version, so a bad rule is refused when the
// catalog is applied, not when a request arrives.
// Compile refuses, naming the rule:
//   - a condition that does not parse or type-check (with CEL's message),
//   - a condition whose type is not bool,
//   - an empty name, condition or agent, or a name used twice,
//   - an agent the tenant does not have (when the caller passes the list),
//   - a condition longer than MaxConditionBytes or deeper or larger than
//     the parser's limits, so that no rule is too big to reason about.
//
// # Conditions
//
// A condition sees these variables:
//
//	caller.name       string               the caller, from its credential
//	caller.roles      list(string)         the credential's roles, e.g. "supervisor"
//	client.user_role  string               what the client says its user's role is: a hint
//	ui_page           string               the page the request came from (a client hint)
//	metadata          map(string, string)  free-form request metadata (client hints)
//	message           string               the prompt
//	tenant_id         string               the tenant
//
// A rule that routes by identity reads caller.*, which the gateway takes
// from the bearer token; the body's context is the client's word.
//
// with CEL's standard functions, regular expressions
// (`message.matches("(?i)\\binvoice\\b")`) and the string extensions
// (`message.lowerAscii().contains("refund")`, `ui_page.split("/")[0]`).
//
// # Semantics of Route
//
//  1. Rules are tried in priority order: highest Priority first; rules of
//     equal priority in order of Name, so the order never depends on the
//     order in which the catalog lists them.
//  2. The first rule whose condition is true wins: Decision.AgentID is its
//     agent and Decision.Rule its name.
//  3. A condition that fails at run time does not fail the request. The
//     usual case is a missing metadata key: `metadata.tier == "gold"` on a
//     request without a tier is an error in CEL ("no such key: tier"), not
//     false. Such a rule is skipped, the error is recorded in
//     Decision.Errors, and the next rule is tried. Callers put these errors
//     where an operator sees them (the turn's metadata, logs, metrics); the
//     rule's author fixes it with `has(metadata.tier) && metadata.tier ==
//     "gold"` or `metadata.?tier.orValue("") == "gold"`.
//  4. A condition that exceeds its evaluation cost budget (CostLimit) is
//     stopped and treated like any other run-time error: skipped and
//     reported. A pathological rule therefore costs at most a bounded amount
//     of CPU per request and cannot hang a worker.
//  5. When no rule matches, the tenant's default agent answers, with
//     Decision.Rule "default" (RuleDefault). Rules skipped in step 3 are
//     still reported.
//  6. When no rule matches and the tenant has no default agent, Route fails
//     with agent.CodeNotFound; the turn fails with a non-retryable
//     AgentNotFound error that says so.
//
// # Cost
//
// CEL's run-time cost tracking allocates on every evaluation, which would
// dominate a scan of many rules. So Compile also estimates each condition's
// worst-case cost statically, assuming an input no larger than the turn
// protocol allows for the prompt (agent.MaxPromptBytes) and 1 KiB strings
// and at most 64 entries elsewhere. A condition whose estimate is within
// CostLimit runs untracked on such inputs: it cannot exceed the limit
// there. Conditions without such a bound (a comprehension over the words
// of the prompt, say) and inputs above those sizes run tracked. Both give
// the same decisions; only the cost differs (see BenchmarkRoute1000Rules:
// about 75 ns and no allocation per rule untracked, 4 allocations and
// about 550 ns tracked).
//
// A Table is immutable once compiled and safe for concurrent use.
package routing
