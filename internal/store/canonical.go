package store

import "github.com/agentflow/agentflow/internal/agent"

// canonicalJSON encodes v so that equal values give equal bytes, and
// returns the bytes and their sha256 in hex (agent.Canonical, which tool
// versions and compiled agents are named by too).
func canonicalJSON(v any) ([]byte, string, error) { return agent.Canonical(v) }
