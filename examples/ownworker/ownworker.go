// Package ownworker is a worker of your own, built with agentflow's public
// Go API: the runtime, a Go function as a tool (weather.go), a guard of
// the team's own as a hook (guard.go) and a scorer of its evaluations
// (scorer.go). ./worker is its ten-line main.
package ownworker

import "github.com/agentflow/agentflow"

// Options are what this worker adds to agentflow's runtime.
func Options() agentflow.Options {
	return agentflow.Options{
		Tools: []agentflow.Tool{
			agentflow.Func("weather", "Today's weather in a city.", Weather, agentflow.ReadOnly(), agentflow.Local()),
		},
		Hooks: []agentflow.Hook{
			NoCardNumbers(), // guard.go: one file and this line
		},
		Scorers: []agentflow.Scorer{
			UnitsStated(), // scorer.go
		},
	}
}
