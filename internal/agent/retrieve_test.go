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

// FuzzRetrieveConfigs: any retrieve config or prepare phase decodes to a
// valid value or a CodeInvalid error, never a panic.
func FuzzRetrieveConfigs(f *testing.F) {
	f.Add(`{"collections":["handbook"],"top_k":3,"budget":500,"mode":"text","filter":{"lang":"en"},"model_filters":["product"]}`)
	f.Add(`{"classify":{"labels":["a","b"]},"reformulate":true,"retrieve":{"collections":["x"],"top_k":0}}`)
	f.Add(`{"classify":false}`)
	f.Fuzz(func(t *testing.T, raw string) {
		if cfg, err := agent.ParseRetrieveConfig([]byte(raw)); err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		} else {
			require.NoError(t, cfg.Validate("config"))
		}
		if p, err := agent.ParsePrepare([]byte(raw)); err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		} else {
			require.NoError(t, p.Validate())
		}
	})
}
