// Package mcptool is the mcp tool kind (MCP): the tools of an MCP server,
// over Streamable HTTP or a stdio command the operator allows
// (kind.Deps.MCPCommands, CheckExecutable), resolved into one tool per
// server tool when the catalog is applied (kind.go).
//
// A call is a tools/call, gated as every write whose delivery is at most
// once (internal/effects), over a session kept open between calls when
// the worker gives the registry a pool (Sessions, as
// kind.Deps.MCPSessions; sessions.go). A stdio server starts with the
// few harmless variables of the worker's environment (EnvFrom,
// kind.Deps.MCPEnv) and those its config names by secret reference.
//
// The rules every kind keeps — approval (mcp asks for it by default),
// delivery (a tool annotated read-only or idempotent is idempotent),
// the registry's redaction of the secrets a call resolved, egress — are
// package tools' and internal/egress's; this package applies them.
// Package tools offers the kind in tools.Builtin.
package mcptool
