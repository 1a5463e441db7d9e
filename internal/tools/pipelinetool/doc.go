// Package pipelinetool is the execute_pipeline tool kind
// (ExecutePipeline) and its saved form, composite_pipeline
// (CompositePipeline): the model writes a short pipeline of steps, run
// by internal/pipeline, that fetches data through the tenant's egress
// (with the entry's credentials, by reference) or reads it by ref, and
// reshapes it; the result is kept by reference and cached per tenant.
//
// A pipeline a tenant runs often enough is promoted into a composite
// (kind.Deps.Composites): a tool of its own, called with just the values
// that differ between runs (composite.go). A composite's calls are held
// to the approval of the pipelines they run (Kind.ApprovalFloor,
// Kind.ApprovalArgs); the rule itself is package tools'
// (tools.Registry.Approval). Package tools offers both kinds in
// tools.Builtin.
package pipelinetool
