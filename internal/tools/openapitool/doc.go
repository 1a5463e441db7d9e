// Package openapitool is the openapi_action tool kind (OpenAPIAction):
// the operations of an HTTP API described by an OpenAPI 3 (or Swagger
// 2.0) document, checked and called through internal/openapi.
//
// An entry gives its document inline (spec) or by URL (spec_url), which
// Resolve fetches through the tenant's egress when the catalog is
// applied and pins, narrowed to the granted operations, in the tool's
// config (kind.go, document.go); or lets each call name its document
// (openapi_url, url.go), kept in the kind's cache for the entry's TTL.
// A call (call.go) checks its params and body against the document,
// adds the entry's credentials (auth.go: by reference, resolved at the
// call, added by the egress client to the API's host only), sends its
// writes with an Idempotency-Key (kind.CallKey), and checks the answer.
//
// What the kind shares with every other — the approval and delivery
// rules, the registry's secret redaction, the egress client — is package
// tools' and internal/egress's, never this package's: it sets its
// default policy (calls other than GET and HEAD wait for a person) and
// refines it from the document (Kind.RefinesApproval). Package tools
// offers the kind in tools.Builtin.
package openapitool
