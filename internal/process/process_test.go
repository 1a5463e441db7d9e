package process

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// mainDef is the process of seed 004 §5.2 before the Test 2 patch.
const mainDef = `{"nodes":[{"id":"fetch_flights","type":"task","config":{"action":"http"}},{"id":"process_data","type":"task"}],` +
	`"edges":[{"from":"fetch_flights","to":"process_data"}]}`

// test2Ops are the operations of seed 004 §10.1 Test 2.
const test2Ops = `[
  {"op": "add", "path": "/nodes/-", "value": {"id": "price_check", "type": "condition", "expr": "price < 500"}},
  {"op": "add", "path": "/nodes/-", "value": {"id": "send_email", "type": "task", "config": {"action": "email", "subject": "Price drop!"}}},
  {"op": "add", "path": "/edges/-", "value": {"from": "fetch_flights", "to": "price_check"}},
  {"op": "add", "path": "/edges/-", "value": {"from": "price_check", "to": "send_email", "condition": "true"}}
]`

func TestCheck(t *testing.T) {
	emailOnly, err := Compile(json.RawMessage(`{"properties":{"nodes":{"items":{"properties":{"type":{"enum":["task","condition"]}}}}}}`))
	require.NoError(t, err)
	tests := []struct {
		name   string
		schema *Schema
		def    string
		want   []string // problems, as strings; none: valid
	}{
		{name: "seed process", def: mainDef},
		{name: "empty graph", def: `{"nodes":[],"edges":[]}`},
		{name: "not an object", def: `[1]`, want: []string{"got array, want object"}},
		{name: "no edges", def: `{"nodes":[]}`, want: []string{"missing property 'edges'"}},
		{name: "node without type", def: `{"nodes":[{"id":"a"}],"edges":[]}`, want: []string{"/nodes/0: missing property 'type'"}},
		{name: "empty id", def: `{"nodes":[{"id":"","type":"task"}],"edges":[]}`, want: []string{"/nodes/0/id: minLength: got 0, want 1"}},
		{
			name: "duplicate id", def: `{"nodes":[{"id":"a","type":"t"},{"id":"a","type":"t"}],"edges":[]}`,
			want: []string{`/nodes/1/id: node id "a" is already used by /nodes/0; ids must be unique`},
		},
		{
			name: "dangling edges", def: `{"nodes":[{"id":"a","type":"t"}],"edges":[{"from":"a","to":"b"},{"from":"c","to":"a"}]}`,
			want: []string{`/edges/0/to: no node has id "b" (nodes: a)`, `/edges/1/from: no node has id "c" (nodes: a)`},
		},
		{
			name: "tenant schema", schema: emailOnly, def: `{"nodes":[{"id":"a","type":"lambda"}],"edges":[]}`,
			want: []string{`/nodes/0/type: value must be one of 'task', 'condition'`},
		},
		{name: "tenant schema holds", schema: emailOnly, def: mainDef},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.schema
			if s == nil {
				s = &Schema{}
			}
			var got []string
			for _, p := range s.Check(json.RawMessage(tt.def)) {
				got = append(got, p.String())
			}
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCompile(t *testing.T) {
	for _, tt := range []struct{ name, schema, want string }{
		{"not JSON", `{"type":`, "schema: not JSON"},
		{"bad keyword value", `{"type":"objekt"}`, "schema:"},
		{"a file", `{"$ref":"file:///etc/passwd"}`, "may only refer within itself"},
		{"the network", `{"$ref":"https://example.com/s.json"}`, "may only refer within itself"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}
	// A reference within the schema is fine.
	s, err := Compile(json.RawMessage(`{"$defs":{"t":{"enum":["task"]}},"properties":{"nodes":{"items":{"properties":{"type":{"$ref":"#/$defs/t"}}}}}}`))
	require.NoError(t, err)
	require.Len(t, s.Check(json.RawMessage(`{"nodes":[{"id":"a","type":"x"}],"edges":[]}`)), 1)
}

// args makes patch_workflow arguments around operations.
func args(ops string) string {
	return `{"workflow_tag":"main","patch_spec":{"operations":` + ops + `,"description":"Add price drop email notification"}}`
}

func TestDecodePatch(t *testing.T) {
	p, err := DecodePatch([]byte(args(test2Ops)))
	require.NoError(t, err)
	require.Equal(t, "main", p.Tag)
	require.Equal(t, "Add price drop email notification", p.Description)
	require.Len(t, p.Operations, 4)
	require.Equal(t, Op{Op: "add", Path: "/edges/-", Value: json.RawMessage(`{"from":"fetch_flights","to":"price_check"}`)}, p.Operations[2])
	// The operations as recorded decode to themselves.
	again, err := DecodeOperations(p.OperationsJSON())
	require.NoError(t, err)
	require.Equal(t, p.Operations, again)

	for _, tt := range []struct{ name, args, want string }{
		{"not an object", `[]`, "the arguments must be a JSON object, not an array"},
		{"no tag", `{"patch_spec":{"operations":[],"description":"x"}}`, "workflow_tag is required"},
		{"tag with a slash", `{"workflow_tag":"a/b","patch_spec":{}}`, `workflow_tag "a/b" may not contain '/'`},
		{"owner", `{"workflow_tag":"main","workflow_owner":"sdutt","patch_spec":{}}`, `unknown field "workflow_owner"; the fields are workflow_tag, patch_spec`},
		{"tag twice", `{"workflow_tag":"main","workflow_tag":"other","patch_spec":{}}`, `has "workflow_tag" twice`},
		{"no spec", `{"workflow_tag":"main"}`, "patch_spec is required"},
		{"spec not an object", `{"workflow_tag":"main","patch_spec":[]}`, "patch_spec must be a JSON object"},
		{"no description", `{"workflow_tag":"main","patch_spec":{"operations":[{"op":"remove","path":"/nodes/0"}]}}`, "patch_spec.description is required"},
		{"blank description", `{"workflow_tag":"main","patch_spec":{"operations":[],"description":"  "}}`, "patch_spec.description is required"},
		{"no operations", `{"workflow_tag":"main","patch_spec":{"description":"x"}}`, "patch_spec.operations is required"},
		{"operations not an array", args(`{"op":"add"}`), "patch_spec.operations must be an array of operations, not an object"},
		{"no operation", args(`[]`), "patch_spec.operations is empty"},
		{"too many", args("[" + strings.Repeat(`{"op":"remove","path":"/nodes/0"},`, MaxOperations) + `{"op":"remove","path":"/nodes/0"}]`), "has 101 operations; the limit is 100"},
		{"unknown op", args(`[{"op":"append","path":"/nodes/-"}]`), `operations[0].op "append": want one of add, remove, replace, move, copy, test`},
		{"op not a string", args(`[{"op":1,"path":"/nodes/-"}]`), "operations[0].op must be a string, not the number 1"},
		{"add without value", args(`[{"op":"add","path":"/nodes/-"}]`), "operations[0]: add needs value"},
		{"typo", args(`[{"op":"add","path":"/nodes/-","vale":{}}]`), `unknown field operations[0]."vale"; the fields are op, path, value (add takes path, value)`},
		{"remove with value", args(`[{"op":"remove","path":"/nodes/0","value":1}]`), `unknown field operations[0]."value"`},
		{"move without from", args(`[{"op":"move","path":"/nodes/0"}]`), "operations[0]: move needs from"},
		{"move into itself", args(`[{"op":"move","from":"/nodes","path":"/nodes/0"}]`), "cannot move /nodes into itself"},
		{"relative pointer", args(`[{"op":"remove","path":"nodes/0"}]`), `operations[0].path "nodes/0" is not a JSON Pointer: it starts with / and writes ~ as ~0 and / as ~1 (did you mean /nodes/0?)`},
		{"bad escape", args(`[{"op":"remove","path":"/a~2b"}]`), `operations[0].path "/a~2b" is not a JSON Pointer`},
		{"whole document", args(`[{"op":"replace","path":"","value":{}}]`), "operations[0].path is empty, which means the whole definition"},
		{"second op bad", args(`[{"op":"test","path":"/nodes/0/id","value":"a"},{"op":"copy","from":"x","path":"/nodes/-"}]`), `operations[1].from "x" is not a JSON Pointer`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodePatch([]byte(tt.args))
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestApply(t *testing.T) {
	ops, err := DecodeOperations([]byte(test2Ops))
	require.NoError(t, err)
	out, err := Apply(json.RawMessage(mainDef), ops)
	require.NoError(t, err)
	require.JSONEq(t, `{"nodes":[{"id":"fetch_flights","type":"task","config":{"action":"http"}},{"id":"process_data","type":"task"},`+
		`{"id":"price_check","type":"condition","expr":"price < 500"},{"id":"send_email","type":"task","config":{"action":"email","subject":"Price drop!"}}],`+
		`"edges":[{"from":"fetch_flights","to":"process_data"},{"from":"fetch_flights","to":"price_check"},{"from":"price_check","to":"send_email","condition":"true"}]}`,
		string(out))
	require.Empty(t, (&Schema{}).Check(out))
	require.Equal(t, "nodes added: price_check, send_email; edges added: fetch_flights → price_check, price_check → send_email (if \"true\")",
		Summary(json.RawMessage(mainDef), out))

	for _, tt := range []struct{ name, ops, want string }{
		{"missing key", `[{"op":"add","path":"/edgez/-","value":{}}]`, "operations[0] (add /edgez/-): /edgez does not exist; the definition has edges, nodes"},
		{"index past the end", `[{"op":"replace","path":"/nodes/7/type","value":"x"}]`, "operations[0] (replace /nodes/7/type): /nodes/7 does not exist: /nodes has 2 items (0 to 1); add at the end with /nodes/-"},
		{"add past the end", `[{"op":"add","path":"/nodes/3","value":{}}]`, "/nodes/3 does not exist: /nodes has 2 items (0 to 1)"},
		{"negative index", `[{"op":"remove","path":"/nodes/-1"}]`, "/nodes/-1: /nodes is an array: index it with a number from 0, or - to add at the end"},
		{"remove the end", `[{"op":"remove","path":"/nodes/-"}]`, `"-" (after the last item) names no item`},
		{"missing field", `[{"op":"remove","path":"/nodes/1/config"}]`, "/nodes/1/config does not exist; /nodes/1 has id, type"},
		{"into a string", `[{"op":"add","path":"/nodes/0/id/x","value":1}]`, `/nodes/0/id/x does not exist: /nodes/0/id is "fetch_flights", which has no members`},
		{"failed test", `[{"op":"test","path":"/nodes/0/type","value":"condition"},{"op":"remove","path":"/nodes/0"}]`, `operations[0] (test /nodes/0/type): test failed: the value at /nodes/0/type is "task", not "condition"`},
		{"move from nowhere", `[{"op":"move","from":"/nodes/5","path":"/nodes/-"}]`, "operations[0] (move /nodes/5 → /nodes/-): from: /nodes/5 does not exist"},
		{"later op", `[{"op":"add","path":"/nodes/-","value":{"id":"x","type":"t"}},{"op":"remove","path":"/nodes/9"}]`, "operations[1] (remove /nodes/9): /nodes/9 does not exist: /nodes has 3 items (0 to 2)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := DecodeOperations([]byte(tt.ops))
			require.NoError(t, err)
			_, err = Apply(json.RawMessage(mainDef), ops)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}

	// Operations that apply but leave the definition invalid: Check says so.
	ops, err = DecodeOperations([]byte(`[{"op":"add","path":"/edges/-","value":{"from":"process_data","to":"send_mail"}},{"op":"copy","from":"/nodes/0","path":"/nodes/-"}]`))
	require.NoError(t, err)
	out, err = Apply(json.RawMessage(mainDef), ops)
	require.NoError(t, err)
	require.Equal(t, `/nodes/2/id: node id "fetch_flights" is already used by /nodes/0; ids must be unique; `+
		`/edges/1/to: no node has id "send_mail" (nodes: fetch_flights, process_data)`, (&Schema{}).Check(out).Error())
}

func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		p    string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"/", []string{""}, true},
		{"/a~1b/c~0d/~01", []string{"a/b", "c~d", "~1"}, true},
		{"a", nil, false},
		{"/a~", nil, false},
	} {
		got, ok := Tokens(tt.p)
		require.Equal(t, tt.ok, ok, tt.p)
		require.Equal(t, tt.want, got, tt.p)
		if ok {
			require.Equal(t, tt.p, Pointer(got))
		}
	}
}

// FuzzDecodePatch: whatever the model sends, decoding and applying never
// panic; what decodes is bounded and re-encodes to itself; what applies is
// JSON, and its errors are ones the model can act on.
func FuzzDecodePatch(f *testing.F) {
	f.Add(args(test2Ops))
	f.Add(args(`[{"op":"test","path":"/nodes/0/id","value":"fetch_flights"},{"op":"move","from":"/nodes/0","path":"/nodes/1"}]`))
	f.Add(args(`[{"op":"copy","from":"/nodes","path":"/edges/0/x"},{"op":"replace","path":"/edges/0/~1","value":null}]`))
	f.Add(args(`[{"op":"remove","path":"/nodes/01"}]`))
	f.Add(`{"workflow_tag":"main","patch_spec":{"operations":[{"op":"add","path":"/nodes/-","value":{"id":"x"}}],"description":"d","x":1}}`)
	f.Add(`{"workflow_tag":"\u0000","patch_spec":null}`)
	f.Fuzz(func(t *testing.T, in string) {
		p, err := DecodePatch([]byte(in))
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.NotEmpty(t, p.Tag)
		require.NotEmpty(t, p.Description)
		require.NotEmpty(t, p.Operations)
		require.LessOrEqual(t, len(p.Operations), MaxOperations)
		again, err := DecodeOperations(p.OperationsJSON())
		require.NoError(t, err)
		require.Equal(t, p.Operations, again)

		out, err := Apply(json.RawMessage(mainDef), p.Operations)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.True(t, json.Valid(out), "%s", out)
		_ = (&Schema{}).Check(out)
		_ = Summary(json.RawMessage(mainDef), out)
	})
}
