// Package server assembles an agentflow worker process: the Temporal
// worker with agentflow's workflows and activities, the store, the model
// providers, the tool registry and the HTTP endpoints (/healthz). The
// worker binary runs it; the starter's demo and the end-to-end tests run
// the same assembly in-process.
package server
