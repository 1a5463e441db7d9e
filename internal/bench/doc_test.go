// Package bench holds agentflow's benchmarks (`go tool task bench`). They
// run against the real stack — the Temporal dev server, PostgreSQL, the
// worker in-process — with the scripted model, and report percentiles as
// benchmark metrics; BENCHMARKS.md records the figures and how they were
// produced.
//
// It is tests only, beside the commands under it: no production package
// imports it or its sub-packages.
package bench
