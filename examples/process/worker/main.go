// Command worker runs the example processes (package process) on a task
// queue of its own. AgentProcessNexusExample calls agentflow's agents
// through the Nexus endpoint agents, so its worker runs in the callers'
// namespace (teams, under `go tool task up`):
//
//	TEMPORAL_NAMESPACE=teams go run ./examples/process/worker
//	temporal workflow execute --namespace teams --type AgentProcessNexusExample \
//	  --task-queue agentflow-examples --input '{"question":"What is 12.5 * 4?"}'
//
// AgentProcessExample runs the turns as child workflows on agentflow's
// workers (task queue agentflow; the input's task_queue names another),
// so its worker runs in agentflow's namespace:
//
//	go run ./examples/process/worker
//	temporal workflow execute --type AgentProcessExample --task-queue agentflow-examples \
//	  --input '{"tenant_id":"demo","question":"What is 12.5 * 4?"}'
//
// It reads TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE (default: default)
// like agentflow's worker, and EXAMPLE_TASK_QUEUE for its own task queue.
package main

import (
	"cmp"
	"fmt"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/examples/process"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "example worker:", err)
		os.Exit(1)
	}
}

func run() error {
	address := cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "127.0.0.1:7233")
	c, err := client.Dial(client.Options{HostPort: address, Namespace: cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default")})
	if err != nil {
		return fmt.Errorf("connect to temporal at %s: %w", address, err)
	}
	defer c.Close()
	w := worker.New(c, cmp.Or(os.Getenv("EXAMPLE_TASK_QUEUE"), process.TaskQueue), worker.Options{})
	process.Register(w)
	return w.Run(worker.InterruptCh())
}
