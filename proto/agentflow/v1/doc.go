// Package agentflowv1 is the agentflow.v1 gRPC API, generated from
// agentflow.proto by `go tool task proto` (buf with local plugins): the
// AgentService (Start, Invoke, Stream, Resume, ListEvents, GetResult,
// ListAgents, SendMessage, Approve, ListPendingApprovals, Cancel) and the
// CatalogService (UpsertCatalog, ListRules, RouteDryRun, StreamCatalog,
// processes and usage). The implementation is internal/gateway.
//
// The same generation makes the HTTP/JSON API from agentflow_http.yaml:
// grpc-gateway's handlers (agentflow.pb.gw.go), which call the gRPC API,
// and its OpenAPI document (agentflow.swagger.json, OpenAPI 2.0, also
// described by agentflow_openapi.yaml), which OpenAPI embeds.
package agentflowv1

import _ "embed"

// OpenAPI is the OpenAPI 2.0 document of the HTTP API, as generated.
//
//go:embed agentflow.swagger.json
var OpenAPI []byte
