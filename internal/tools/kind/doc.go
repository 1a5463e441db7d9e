// Package kind is what a tool kind is made of and given: the Kind a
// catalog names with `kind:`, the Tool its Build returns, the Call a tool
// runs and the Output it returns, and the Deps every Build gets.
//
// Package tools names all of these (tools.Kind, tools.Call, …: aliases)
// and runs them (tools.Registry); this package holds them so that a kind
// kept in a package of its own (internal/tools/openapitool, mcptool,
// pipelinetool) can be written against them while package tools, which
// offers those kinds in tools.Builtin, imports it. A kind's package
// imports this one, never package tools.
package kind
