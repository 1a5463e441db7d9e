// Package bench holds agentflow's benchmarks (`go tool task bench`). They
// run against the real stack — the Temporal dev server, PostgreSQL, the
// worker in-process — with the scripted model, and report percentiles as
// benchmark metrics; BENCHMARKS.md records the figures and how they were
// produced.
package bench
