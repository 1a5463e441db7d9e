// Package tenant holds each tenant's runtime settings: what every turn of
// a tenant needs besides its agent, built from the catalog the store holds.
// Settings are the routing table (default agent and compiled rules), the
// HTTP client limited to the tenant's egress allowlist, billing, and PII
// redaction; Cache.Settings returns them for the gateway and the workers.
//
// # Cache and hot reload
//
// Cache holds each tenant's Settings at its catalog version. Cache.Run
// listens for the store's catalog notifications and drops a tenant's
// settings when its catalog changes, so the next request routes and calls
// out with the new catalog while turns in flight keep the agent versions
// they loaded. Settings older than 30 seconds are checked against the
// store anyway, in case a notification was lost.
//
// # Imports
//
// tenant reads the store (internal/store), never catalog files: it does
// not import internal/catalog, whose checks ran when the catalog was
// applied. It imports nothing of the gateway, activities or workflows,
// which all hold a Cache. internal/codebase holds the rule.
package tenant
