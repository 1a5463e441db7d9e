// Command worker is the orders team's own worker: its activities on its
// task queue, which agentflow's turns call as tools. It needs no part of
// agentflow but the header reader (agentflow.AskedPropagator).
//
//	TEMPORAL_ADDRESS=localhost:7233 ORDERS_LEDGER=/tmp/refunds go run ./examples/activitytools/worker
package main

import (
	"cmp"
	"log"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/examples/activitytools"
)

func main() {
	c, err := client.Dial(client.Options{
		HostPort:  cmp.Or(os.Getenv("TEMPORAL_ADDRESS"), "localhost:7233"),
		Namespace: cmp.Or(os.Getenv("TEMPORAL_NAMESPACE"), "default"),
		// Who asked for each call: the tenant, the caller, the call's key.
		ContextPropagators: []workflow.ContextPropagator{agentflow.AskedPropagator()},
	})
	if err != nil {
		log.Fatalln("dial Temporal:", err)
	}
	defer c.Close()
	o := &activitytools.Orders{Ledger: cmp.Or(os.Getenv("ORDERS_LEDGER"), os.TempDir())}
	if d, err := time.ParseDuration(os.Getenv("ORDERS_REFUND_WORK")); err == nil {
		o.Work = d
	}
	if err := os.MkdirAll(o.Ledger, 0o755); err != nil {
		log.Fatalln("ledger:", err)
	}
	w := worker.New(c, cmp.Or(os.Getenv("ORDERS_TASK_QUEUE"), activitytools.TaskQueue), worker.Options{})
	activitytools.Register(w, o)
	if err := w.Run(worker.InterruptCh()); err != nil {
		log.Fatalln("worker:", err)
	}
}
