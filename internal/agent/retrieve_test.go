package agent_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestCited(t *testing.T) {
	a := []agent.Citation{{ChunkID: "d1#0"}, {ChunkID: "d1#1"}, {ChunkID: "d2#0"}}
	b := []agent.Citation{{ChunkID: "d3#0"}, {ChunkID: "d1#0"}}
	ids := func(cs []agent.Citation) (out []string) {
		for _, c := range cs {
			out = append(out, c.ChunkID)
		}
		return out
	}
	require.Equal(t, []string{"d1#0", "d1#1", "d2#0", "d3#0"}, ids(agent.Cited("no markers", [][]agent.Citation{a, b})))
	require.Equal(t, []string{"d2#0"}, ids(agent.Cited("It ships daily [3].", [][]agent.Citation{a})))
	require.Equal(t, []string{"d1#1", "d1#0"}, ids(agent.Cited("See [2].", [][]agent.Citation{a, b})))
	require.Equal(t, []string{"d1#0", "d1#1", "d2#0"}, ids(agent.Cited("See [9].", [][]agent.Citation{a})), "markers naming nothing keep all")
	require.Empty(t, agent.Cited("See [1].", nil))
}
