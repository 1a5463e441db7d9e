// Package agentflowv1 is the agentflow.v1 gRPC API, generated from
// agentflow.proto by `go tool task proto` (buf with local plugins): the
// AgentService (Invoke, Stream, Resume, GetResult, ListAgents, Approve,
// ListPendingApprovals, SendMessage) and the CatalogService (UpsertCatalog,
// ListRules, RouteDryRun, StreamCatalog). The implementation is
// internal/gateway.
package agentflowv1
