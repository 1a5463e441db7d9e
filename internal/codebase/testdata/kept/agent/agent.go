// Package agent is a domain package that imports nothing of the tree.
package agent

// Agent is a domain type.
type Agent struct{ ID string }
