// Package docs holds agentflow's documentation — the Markdown pages of
// this folder, embedded — and its checks: every relative link and anchor
// of the repository's Markdown resolves, README.md's package map lists
// exactly the packages the module has, every page is in the index, the
// gRPC reference (reference/grpc-api.md) has a method heading for each rpc
// of proto/agentflow/v1/agentflow.proto and names nothing the API lacks,
// and the Nexus contract (proto/agentflow/v1/agents.nexusrpc.yaml) names
// exactly the operations of agentflow.v1.Agents and, for each type,
// exactly the JSON fields of the Go type it describes.
//
// Tests elsewhere run the recipes these pages show (a catalog loaded, a
// curl recipe run against a real server); they read a page's section and
// its fenced blocks through Section and Blocks, so that a page can move
// without its recipes going untested.
//
// It imports only the standard library.
package docs
