package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

const processSource = `tenant: demo
processes:
  - tag: main
    description: Watch flight prices.
    schema:
      properties:
        nodes:
          items:
            properties:
              type: {enum: [task, condition]}
    definition:
      nodes:
        - {id: fetch_flights, type: task, config: {action: http}}
        - id: process_data
          type: task
      edges:
        - {from: fetch_flights, to: process_data}
`

func TestParseProcesses(t *testing.T) {
	cat, err := Parse(testKinds(t), "t.yaml", []byte(processSource))
	require.NoError(t, err)
	require.Len(t, cat.Tenants, 1)
	require.Len(t, cat.Tenants[0].Processes, 1)
	p := cat.Tenants[0].Processes[0]
	require.Equal(t, agent.Process{Tag: "main", Description: "Watch flight prices.",
		Schema: p.Schema, Definition: p.Definition}, p)
	require.JSONEq(t, `{"nodes":[{"id":"fetch_flights","type":"task","config":{"action":"http"}},{"id":"process_data","type":"task"}],`+
		`"edges":[{"from":"fetch_flights","to":"process_data"}]}`, string(p.Definition))
	require.JSONEq(t, `{"properties":{"nodes":{"items":{"properties":{"type":{"enum":["task","condition"]}}}}}}`, string(p.Schema))

	tests := []struct {
		name string
		src  string
		want []string
	}{
		{
			name: "no definition",
			src:  "tenant: demo\nprocesses:\n  - tag: main\n",
			want: []string{"t.yaml:3: processes[0].definition: is required: a document {nodes: [{id, type, …}], edges: [{from, to, …}]}"},
		},
		{
			name: "no tag, bad tag",
			src: "tenant: demo\nprocesses:\n  - definition: {nodes: [], edges: []}\n" +
				"  - tag: a/b\n    definition: {nodes: [], edges: []}\n",
			want: []string{"t.yaml:3: processes[0].tag: is required", `t.yaml:4: processes[1].tag: tag "a/b" may not contain '/'`},
		},
		{
			name: "tag twice",
			src: "tenant: demo\nprocesses:\n  - tag: main\n    definition: {nodes: [], edges: []}\n" +
				"  - tag: main\n    definition: {nodes: [], edges: []}\n",
			want: []string{`t.yaml:5: processes[1].tag: process "main" is already defined at t.yaml:3`},
		},
		{
			name: "problems at their lines",
			src: `tenant: demo
processes:
  - tag: main
    definition:
      nodes:
        - id: a
          type: task
        - id: a
          type: task
        - id: b
      edges:
        - from: a
          to: c
`,
			want: []string{
				"t.yaml:10: processes[0].definition.nodes[2]: missing property 'type'",
			},
		},
		{
			name: "graph problems at their lines",
			src: `tenant: demo
processes:
  - tag: main
    definition:
      nodes:
        - id: a
          type: task
        - id: a
          type: task
      edges:
        - from: a
          to: c
`,
			want: []string{
				`t.yaml:8: processes[0].definition.nodes[1].id: node id "a" is already used by /nodes/0; ids must be unique`,
				`t.yaml:12: processes[0].definition.edges[0].to: no node has id "c" (nodes: a)`,
			},
		},
		{
			name: "the process's schema",
			src: `tenant: demo
processes:
  - tag: main
    schema: {properties: {nodes: {items: {properties: {type: {enum: [task]}}}}}}
    definition:
      nodes:
        - {id: a, type: lambda}
      edges: []
`,
			want: []string{`t.yaml:7: processes[0].definition.nodes[0].type: value must be 'task'`},
		},
		{
			name: "a schema that reads files",
			src:  "tenant: demo\nprocesses:\n  - tag: main\n    schema: {$ref: 'file:///etc/passwd'}\n    definition: {nodes: [], edges: []}\n",
			want: []string{"t.yaml:4: processes[0].schema: schema: " + `failing loading "file:///etc/passwd": refers to file:///etc/passwd: a process schema may only refer within itself`},
		},
		{
			name: "not an object",
			src:  "tenant: demo\nprocesses:\n  - tag: main\n    definition: [1, 2]\n",
			want: []string{"t.yaml:4: processes[0].definition: got array, want object"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, problems(t, tt.src))
		})
	}
}
