// Command worker is the warehouse team's own worker: its Nexus service
// and the workflow behind it, in the team's namespace, which agentflow's
// turns call through the endpoint "warehouse". It needs no part of
// agentflow but the header reader (agentflow.WhoAskedNexus).
//
//	TEMPORAL_ADDRESS=localhost:7233 go run ./examples/nexustools/worker
package main

import (
	"cmp"
	"log"
	"os"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"

	"github.com/agentflow/agentflow/examples/nexustools"
)

func main() {
	c, err := client.Dial(client.Options{
		HostPort:  cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "localhost:7233"),
		Namespace: cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), nexustools.Namespace),
	})
	if err != nil {
		log.Fatalln("dial Temporal:", err)
	}
	defer c.Close()
	w := worker.New(c, cmp.Or(os.Getenv("WAREHOUSE_TASK_QUEUE"), nexustools.TaskQueue), worker.Options{})
	if err := nexustools.Register(w); err != nil {
		log.Fatalln("register:", err)
	}
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatalln("worker:", err)
	}
}
