// Package egress gives tools an HTTP client that can reach only what a
// tenant's egress policy allows within what the operator allows, so that
// a model cannot steer a tool into the worker's own network (server-side
// request forgery), nor a tenant admin into the platform's.
//
// It imports only the domain and internal/secrets: it must not import the
// tools, the store or the gateway, which hand it policies and use its
// client.
//
// # Policy
//
// A tenant's catalog lists allowed destinations; ParsePolicy reads them:
//
//	api.example.com          that host, any port
//	api.example.com:8443     that host, port 8443 only
//	*.example.com            every subdomain at any depth, not example.com itself
//	203.0.113.7, [2001:db8::1]:8443
//	                         an IP literal, optionally with a port
//	10.1.2.0/24, fd12::/16   a CIDR prefix: its addresses may be dialled even
//	                         though they are private (where the operator
//	                         opened them), and URLs may name them
//
// A zero Policy allows nothing. Policy's other fields cap what a call may
// cost: response size, time, redirects. The response cap bounds what a
// tool holds in memory; a request whose body its caller streams to
// storage (Streamed) carries a cap of its own instead.
//
// # Two levels
//
// A tenant's allowlist narrows what the operator allows, never more. The
// operator's policy (Operator) is configuration of the processes that run
// tools or apply catalogs, not of a catalog: by default it opens the public
// internet and none of the ranges below; AGENTFLOW_EGRESS_ALLOW
// (ParseAllow) opens CIDRs, IP literals, IP:port and host:port entries.
// The platform's own listening addresses (the Temporal frontend's gRPC and
// HTTP APIs, Postgres, the gateway, the health and metrics endpoint, and
// any named in AGENTFLOW_PLATFORM_ADDRS) stay closed whatever either level
// says, because a tenant that reaches them reaches every tenant's data.
// Build clients with Operator.Client; Client alone, or a nil *Operator,
// applies the default operator policy with no platform address known.
//
// Operator.CheckEntry is the check a catalog gets when it is applied: an
// IP literal or CIDR entry of a refused range must lie wholly in what the
// operator opened, and no entry may name a platform port. The dialer
// checks the same again at every call, for allowlists stored before.
//
// # Two checks
//
// Every request, and every redirect, is checked by name: its scheme must be
// http or https and its host must match an entry. Then every address the
// host resolves to is checked when it is dialled: the platform's own ports
// are refused; loopback, private, link-local, multicast and other
// special-purpose addresses, and cloud metadata endpoints, are refused
// unless an IP literal entry or a CIDR entry names them and the operator
// opened them (a metadata address only by an exact entry at both levels:
// an IP literal, or a /32 or /128 prefix). A host name entry never admits
// such an address by itself, because its DNS answers are what an attacker
// controls; only a host:port the operator opened by name does, since the
// operator vouches for that name. The dialer resolves the name once and
// dials the addresses it checked, so that DNS rebinding cannot slip
// another address in between. Proxies from the environment are ignored,
// since a proxy would do the dialling instead.
//
// # Credentials and what comes back
//
// Tools describe their secrets as Credentials, which add them to the
// requests to their own host only and clean every answer of them, and of
// the parts a request carries apart (a basic login's password), with the
// Redactor: the one redactor of every tool kind, which the tool registry
// also runs over every call's output. It finds a value and its parts in
// the encodings an echo gives them (case, hex, base64 at any offset,
// percent-encoding, JSON escapes, halves across two fields).
//
// # Writes, once
//
// A request whose context carries a tool call's delivery gate
// (internal/effects) and whose method is not idempotent (a POST, a
// PATCH) is a write: the gate records its intent before it leaves, and
// whether it was answered after, and holds it back when an earlier
// attempt of the call may have sent it. A failure to dial (the name did
// not resolve, every address was refused or unreachable) is a write that
// never left. This transport is the one place every HTTP tool kind's
// writes pass, so the rule is the same for all of them.
//
// # Errors
//
// Refusals and an oversized response are agent.CodeInvalid errors whose
// messages are written for the model ("host api.x.com is not in tenant
// demo's egress allowlist"): retrying the same call cannot help. http.Client
// wraps them in *url.Error, so test them with agent.IsCode or errors.As.
// The messages written here leave out a URL's user info and query, where
// tools put credentials; *url.Error's own prefix does not, so a tool that
// puts a key in a query must not show the model the error as it is.
// A call that runs out of time fails like any http.Client timeout
// (net.Error with Timeout() true) and may be retried.
package egress
