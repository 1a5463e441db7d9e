// Command worker runs an agentflow process: the Temporal worker for the
// AgentTurn and Conversation workflows and their activities, the gRPC
// gateway, or both (AGENTFLOW_ROLES), with /healthz and /metrics. It is
// configured by environment variables; see internal/server.Config. On
// SIGTERM or SIGINT it shuts down gracefully: unready first, the gateway's
// streams told to resume elsewhere, the activities in flight given up to
// AGENTFLOW_STOP_TIMEOUT to finish; a second signal ends it at once. With
// -healthcheck it probes a running worker's /healthz instead, for
// container health checks.
//
// It is the public API (package agentflow) with the built-in set: a
// worker of your own is the same few lines with your tools and hooks.
package main

import (
	"fmt"
	"os"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/internal/tools/k8sjob"
)

func main() {
	kinds, err := k8sJobs(os.Getenv("AGENTFLOW_K8S_JOBS"), os.Getenv("KUBECONFIG"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	agentflow.Main(agentflow.Options{Tools: kinds, ScriptedModel: scriptedModel()})
}

// k8sJobs returns the k8s_job kind when the operator allows tenants Jobs
// (AGENTFLOW_K8S_JOBS), with the cluster's credentials from KUBECONFIG or
// the pod's service account; else none, and catalogs that name the kind
// are refused. It is added here, not in the runtime, so that only this
// command links client-go.
func k8sJobs(allowList, kubeconfig string) ([]agentflow.Tool, error) {
	allow, err := k8sjob.ParseAllow(allowList)
	if err != nil {
		return nil, fmt.Errorf("AGENTFLOW_K8S_JOBS: %w", err)
	}
	if allow.Empty() {
		return nil, nil
	}
	client, err := k8sjob.Client(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("AGENTFLOW_K8S_JOBS: %w", err)
	}
	return []agentflow.Tool{k8sjob.Kind(k8sjob.Options{Client: client, Allow: allow})}, nil
}
