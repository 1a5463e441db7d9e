// Command worker is agentflow's worker with the example's model provider:
// configured by the environment like the shipped worker.
package main

import (
	"github.com/agentflow/agentflow"
	"github.com/agentflow/agentflow/examples/ownmodel"
)

func main() { agentflow.Main(ownmodel.Options()) }
