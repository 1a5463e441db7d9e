// Package e2e is agentflow's end-to-end suite: tests of the whole product
// on the real stack. Each test runs the worker (and, where the test needs
// it, the gRPC gateway and /metrics) in-process with internal/testserver,
// on a database of its own and a task queue of its own, against the
// Temporal dev server and PostgreSQL that devtest starts once for the
// test binary; the model is internal/scripted, faked only at the wire.
// Tests that must kill a worker the hard way build the worker binary
// (./worker) and run it as processes.
//
// It is tests only: no package imports it.
//
// What it covers:
//
//   - turns: started with the temporal CLI as the docs show, the same
//     job twice, bad input, every way a model call fails, tools as local
//     activities or activities, token budgets;
//   - streaming: the gRPC Stream and Resume, a retried attempt voided, a
//     slow client, a worker killed mid-stream; the gateway's chat page in
//     headless Chromium;
//   - approvals and people: approve and timeout with the temporal CLI, the
//     caller taken from the credential, approval across a worker kill;
//   - conversations: a thousand turns across continue-as-new, messages
//     during the roll-over, schedules;
//   - tool kinds on real servers: execute_pipeline against local APIs and
//     composites it promotes, openapi_action against internal/crm, MCP
//     over HTTP and stdio, delegate_to_agent, patch_workflow, the example
//     process;
//   - trust: egress at the operator's and the tenant's level, secrets kept
//     out of histories, tables and logs, jq's memory budget, token batches
//     kept in their tenant;
//   - operations: a PostgreSQL outage, cancels from Temporal, catalog hot
//     reload with `starter catalog apply`, /healthz, /metrics and traces.
//
// Run it on a private stack (a Postgres and a Temporal dev server for the
// run, shared by every test binary the command starts):
//
//	go build -o .bin/starter ./starter
//	.bin/starter stack -- go test -race ./internal/e2e/
//
// Without the stack, devtest starts the servers itself. The tests that
// record replay histories write them to workflows/testdata when
// AGENTFLOW_RECORD_HISTORIES=1; each test checks, whether it records or
// not, that the current workflow code replays the history it made.
package e2e
