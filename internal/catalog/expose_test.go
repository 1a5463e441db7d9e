package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExpose: an agent is exposed through the protocols its catalog
// names, known ones only, each once; nothing is exposed by default.
func TestExpose(t *testing.T) {
	const head = "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"
	tests := []struct {
		name string
		src  string
		want []string // problems; nil for a valid catalog
		exp  []string
	}{
		{name: "none", src: head},
		{name: "all three", src: head + "    expose: [mcp, a2a, ag_ui]\n", exp: []string{"mcp", "a2a", "ag_ui"}},
		{name: "unknown protocol", src: head + "    expose: [mcp, grpc]\n",
			want: []string{`t.yaml:5: agents[0].expose[1]: "grpc" is not a protocol an agent can be exposed through; want one of mcp, a2a, ag_ui`}},
		{name: "twice", src: head + "    expose: [mcp, mcp]\n",
			want: []string{`t.yaml:5: agents[0].expose[1]: "mcp" is listed twice`}},
		{name: "not a list", src: head + "    expose: mcp\n",
			want: []string{`t.yaml:5: agents[0].expose: want a list, not "mcp"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != nil {
				require.Equal(t, tt.want, problems(t, tt.src))
				return
			}
			cat, err := Parse(nil, "t.yaml", []byte(tt.src))
			require.NoError(t, err)
			require.Equal(t, tt.exp, cat.Tenants[0].Agents[0].Expose)
		})
	}
}
