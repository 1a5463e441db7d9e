// Package server assembles one agentflow process from its Config. New
// opens the store (applying migrations), connects to Temporal, builds the
// model providers (serving the scripted model in-process when
// Config.Script says so and Config.ScriptedModel links one), the operator's egress policy (what tools may
// call beyond the public internet, and the platform's own addresses they
// never may), the tool registry, the per-tenant routing cache
// and the live event hub and follower, and then the roles the process
// plays: the Temporal worker with agentflow's workflows and activities
// (RoleWorker) and the gRPC gateway with the agent and catalog services
// (RoleGateway). /healthz and /metrics are served over HTTP.
//
// It is the one package that wires them all: only the commands and the test
// harnesses import it, and it must not import a test harness
// (internal/testserver, internal/devstack).
//
// Misconfiguration fails in New, not at the first turn: among it a
// Temporal namespace that lacks agentflow's search attributes, whose error
// gives the command that adds them. Run serves until its context ends. The
// worker binary runs it; the starter's demo and up commands, the
// end-to-end tests and the benchmarks run the same assembly in-process.
package server
