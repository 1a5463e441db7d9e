// Package spend measures what holds a tenant's model calls under load:
// its budgets (the usage ledger never passes one) and the provider
// governor (the tenants' shares of a provider's capacity, and a
// provider's 429 with a Retry-After holding the whole fleet back).
//
// It is tests only: no package imports it.
//
// It is tests only: TestSpendUnderLoad, a short run that `go tool task
// test` runs and that asserts the invariants that hold whatever the
// timing (no call or token past a budget; every turn completed or
// refused by its budget), and BenchmarkSpend, `go tool task spend`, the
// full run of 64 concurrent turns of three tenants that prints the
// report BENCHMARKS.md records and asserts, besides, that no request
// reached the provider inside a Retry-After window. Both run a worker on the real stack
// (internal/devstack) against the scripted provider (internal/scripted),
// whose RefuseFor answers 429 for a stretch.
package spend
