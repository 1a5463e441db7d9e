// Package gateway serves the agentflow.v1 gRPC API (proto/agentflow/v1):
// it starts turns on Temporal, follows their event logs (internal/stream)
// and reads stored results and the catalog (internal/store).
//
// Every call is scoped to the tenant of the caller's bearer token; another
// tenant's stream ids and result refs look exactly like ones that do not
// exist (NotFound). Starting a turn is detached from the RPC: a client that
// goes away never cancels its turn, and can resume its stream by index.
// gRPC health and reflection are served and need no token.
package gateway
