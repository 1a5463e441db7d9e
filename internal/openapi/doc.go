// Package openapi calls the operations of HTTP APIs described by OpenAPI 3
// documents, for the openapi_action tool kind (seed 004 §5.4). It is built
// on github.com/getkin/kin-openapi: openapi3 loads and validates documents,
// openapi3filter checks requests and responses against them.
//
// It imports only the domain: it must not import the tools, the egress
// client or the store; the openapi_action kind (internal/tools) calls it.
//
// # Documents
//
// The descriptions people publish are large (GitHub's REST description
// is 13 MB with 811 paths), and kin-openapi holds a loaded document as a
// tree many times that size, so a document is narrowed before it is
// loaded. Read takes it in, JSON or YAML, up to a limit, and keeps it as
// compressed JSON (a Source); Source.Narrow walks it twice with a
// streaming decoder — the first pass finds the operations wanted and what
// every component refers to, the second copies the components they need,
// transitively — and returns a small document of its own, without the
// examples, external docs and schema prose that no check reads (slim.go);
// Outline lists a source's operations. Memory while narrowing grows with
// the number of components (about a hundred bytes each), not with their
// size.
//
// Load reads a document (JSON or YAML), refuses references to other files
// or URLs (a pinned document must stand alone), validates it, and indexes
// its operations by operation id; an operation without one is named
// "METHOD /path". LoadOperations narrows a source and loads what is left.
// Keep drops the operations a catalog does not grant, so that what is
// pinned is what may be called.
// BaseURL finds where calls go: a server the catalog names, else the
// document's first server, resolved against the URL the document came
// from. Description and Parameters tell a model which operations exist and
// how to call them.
//
// # Calls
//
// A call's arguments are {"operation_id", "params", "body"}, and where its
// tool lets calls choose, "openapi_url" and "auth_profile" (DecodeArgs):
// params maps parameter names to JSON values, which NewRequest serialises
// by each parameter's location, style and explode (path, query, header and
// cookie; simple, label, matrix, form, spaceDelimited, pipeDelimited and
// deepObject), and body is the request body, sent as JSON or as a form.
// The request is then validated with openapi3filter before anything is
// sent: an unknown operation or parameter, a missing required parameter or
// a value of the wrong type is an agent.CodeInvalid error that names the
// parameter, written for the model. Security requirements are not checked:
// credentials are the caller's to add, after validation, so that they
// never appear in an error. CheckResponse compares a response with the
// operation's responses and says how it differs.
package openapi
