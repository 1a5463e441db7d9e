package store

import "example.com/m/agent"

func Save(agent.Agent) {}
