// Command worker is agentflow's worker with the example's tool and guard:
// configured by the environment like the shipped worker.
package main

import (
	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/examples/ownworker"
)

func main() { agentflow.Main(ownworker.Options()) }
