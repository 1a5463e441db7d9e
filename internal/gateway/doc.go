// Package gateway serves the agentflow.v1 gRPC API (proto/agentflow/v1).
// Service (AgentService) starts turns, sends messages to conversations and
// decides approvals through internal/turnclient, follows turns' event logs
// (internal/eventlog) and reads stored results and agents (internal/store).
// CatalogService validates and applies catalog YAML
// (internal/catalog), lists the routing rules, answers RouteDryRun from
// the tenants' cached settings (internal/tenant), and streams the
// catalog's changes.
//
// The core must not import the workflows or the activities: it reaches
// turns through internal/turnclient and the names of internal/contract.
//
// Every call is scoped to the tenant of the caller's bearer token; another
// tenant's stream ids and result refs look exactly like ones that do not
// exist (NotFound), and catalog documents that name another tenant are
// refused (PermissionDenied). Starting a turn is detached from the RPC: a
// client that goes away never cancels its turn, and can resume its stream
// by index. gRPC health and reflection are served and need no token.
//
// Every error leaves through Status, which maps it once by agent's table
// of codes: errors written for the caller keep their message; others reach
// the client as a plain message with a reference, and the log has the
// details under the same reference. The status carries the error's type
// (an ErrorInfo of ErrorDomain), and a limit's wait (a RetryInfo). Each
// door says each class of error (ClassOf) as its row of the error table
// says (doorerrors.go, DoorErrors).
//
// HTTPAPI serves the same API over HTTP/JSON: grpc-gateway's handlers,
// generated from the .proto and agentflow_http.yaml, call the gRPC API on
// an in-process server that NewGRPCServer makes, so that a request is
// authenticated, authorized, scoped and answered by exactly the code a
// gRPC call is. What is HTTP's own lives here too: the strict reading of
// bodies and query parameters, errors as RFC 9457 problem details (from
// the status Status made), CORS and the OpenAPI document, and the one
// body reader every door reads through (body.go, internal/gateway/intake):
// a request's credential is checked from its headers before any byte of
// its body is read, and bodies are bounded in size, in bytes in flight
// per credential and in total, and in time.
// Files (files.go) are HTTP's alone: POST /v1/files stores one file as a
// blob of the caller's tenant and answers its cas:// ref; GET
// /v1/files/{ref} serves a tenant's blob back, so that no browser runs it
// on the API's origin.
// Knowledge (internal/gateway/knowledgeapi) and memories (memories.go)
// have routes of their own, whose JSON is not the messages':
// /v1/collections, /v1/ingests and /v1/memories (GET and DELETE list and
// erase the caller's own long-term memories, the user being the
// credential's; DELETE /v1/memories/{id} forgets one; an admin erases a
// named user's). KnowledgeService (knowledgeapi) serves the same over
// gRPC; both doors are thin adapters over one core each (knowledgeapi's,
// memoryCore), and each route is authorized as its KnowledgeService
// method.
//
// The core and its doors. This package is the core: auth and tenancy
// (auth.go, tokens.go), limits and bodies (body.go, intake), HTTP's
// plumbing (http.go, httperr.go, httpin.go, jsonin.go, cors.go), event
// streams with keep-alives and a slot per tenant (eventstream.go,
// streams.go), the turn API the doors call (service.go, sessions.go,
// decisions.go, door.go) and the follower (EventSource). Every other
// protocol on the same listener is a door, a package of its own under
// internal/gateway that implements Door and renders a turn's events
// through internal/gateway/projection: sse, ws, openai, aisdk, agui, mcp
// and a2a, each for the agents the catalog exposes through it
// (agent.Agent.Expose) and each running the same turn pipeline and
// reading the same event log. The telegram door serves the bots of
// agents' telegram targets with a webhook_secret; its answers leave
// through those targets' deliveries. A door imports no other door and the core
// imports none; internal/gateway/doors lists them for the server.
//
// The service APIs (knowledgeapi, catalogapi, evalapi, usageapi) are
// packages of their own so that the core keeps to auth, tenancy, bodies
// and limits: each reaches the core and the store only through narrow
// interfaces of its own, and the core registers it where it builds its
// gRPC server (and, for knowledgeapi, its HTTP mux).
package gateway
