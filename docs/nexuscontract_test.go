package docs

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/nexusdoor"
)

// nexusContract is agentflow.v1.Agents as a nexus-rpc-gen definition,
// from this folder: what other SDKs generate their clients from.
const nexusContract = "../proto/agentflow/v1/agents.nexusrpc.yaml"

// nexusDefinition is the part of a nexus-rpc-gen file the tests read.
type nexusDefinition struct {
	NexusRPC string `yaml:"nexusrpc"`
	Services map[string]struct {
		Description string `yaml:"description"`
		Operations  map[string]struct {
			Description string     `yaml:"description"`
			Input       jsonSchema `yaml:"input"`
			Output      jsonSchema `yaml:"output"`
		} `yaml:"operations"`
	} `yaml:"services"`
	Types map[string]jsonSchema `yaml:"types"`
}

// jsonSchema is the part of a type's JSON Schema the tests read.
type jsonSchema struct {
	Ref                  string                `yaml:"$ref"`
	Description          string                `yaml:"description"`
	Type                 any                   `yaml:"type"`
	Required             []string              `yaml:"required"`
	AdditionalProperties any                   `yaml:"additionalProperties"`
	Properties           map[string]jsonSchema `yaml:"properties"`
}

// nexusOperations are the service's operations: each input type is the
// Go type the handler decodes strictly, and example a valid input.
var nexusOperations = []struct {
	op, input, output string
	goType            reflect.Type
	example           string
}{
	{"run_turn", "RunTurnInput", "TurnResult", reflect.TypeFor[nexusdoor.RunTurnInput](),
		`{"prompt": "What is 12.5 * 4?", "agent_id": "clerk", "agent_version": 3, "job_id": "billing-42", "session_id": "s-1",
		  "history": "load", "node_id": "check", "run_id": "run-7", "timeout_sec": 60, "output_schema": {"type": "object"},
		  "context": {"user_role": "clerk", "ui_page": "/invoices", "metadata": {"team": "billing"}, "workflow_state": {"current_step": 5},
		    "previous_results": [{"node_id": "fetch", "result_ref": "artifact://r1", "preview": {"count": 150}}]}}`},
	{"send_message", "SendMessageInput", "TurnResult", reflect.TypeFor[nexusdoor.SendMessageInput](),
		`{"session_id": "s-1", "prompt": "And in euros?", "job_id": "billing-43", "agent_id": "clerk", "on_busy": "steer",
		  "context": {"ui_page": "/invoices"}}`},
	{"decide", "DecideInput", "ApprovalAck", reflect.TypeFor[nexusdoor.DecideInput](),
		`{"job_id": "billing-42", "call_id": "call_1", "approval_id": "ap_1", "approved": true, "reason": "within budget"}`},
	{"answer", "AnswerInput", "AnswerAck", reflect.TypeFor[nexusdoor.AnswerInput](),
		`{"job_id": "billing-42", "call_id": "call_2", "answer": "EUR"}`},
	{"get_result", "GetResultInput", "TurnResult", reflect.TypeFor[nexusdoor.GetResultInput](),
		`{"job_id": "billing-42"}`},
}

// nexusTypes are the contract's other types: the objects inputs hold and
// the outputs, each the JSON of a Go type.
var nexusTypes = map[string]reflect.Type{
	"TurnContext":    reflect.TypeFor[agent.TurnContext](),
	"PreviousResult": reflect.TypeFor[agent.PreviousResult](),
	"TurnResult":     reflect.TypeFor[agent.TurnResult](),
	"ResultMetadata": reflect.TypeFor[agent.ResultMetadata](),
	"ToolCallRecord": reflect.TypeFor[agent.ToolCallRecord](),
	"TurnError":      reflect.TypeFor[agent.TurnError](),
	"Block":          reflect.TypeFor[agent.Block](),
	"Citation":       reflect.TypeFor[agent.Citation](),
	"ApprovalAck":    reflect.TypeFor[contract.ApprovalAck](),
	"AnswerAck":      reflect.TypeFor[contract.AnswerAck](),
}

// TestNexusContract: the nexus-rpc-gen file describes the service the
// handler serves: its name, exactly its operations, and for each an input
// whose properties are the JSON fields of the Go type the handler decodes
// (a field added to one and not the other fails here), closed to any
// other, so that a generated client cannot send what the handler refuses.
// A valid input passes both the schema and the handler's strict decoding;
// the same input naming a tenant or a caller fails both.
func TestNexusContract(t *testing.T) {
	def, schemas := loadNexusContract(t)
	require.Equal(t, "1.0.0", def.NexusRPC)
	require.Len(t, def.Services, 1)
	svc, ok := def.Services[nexusdoor.Service]
	require.True(t, ok, "the service is %s", nexusdoor.Service)
	require.NotEmpty(t, svc.Description)

	var ops []string
	for _, tc := range nexusOperations {
		ops = append(ops, tc.op)
	}
	require.ElementsMatch(t, ops, keysOf(svc.Operations), "the operations")

	for _, tc := range nexusOperations {
		t.Run(tc.op, func(t *testing.T) {
			op := svc.Operations[tc.op]
			require.NotEmpty(t, op.Description)
			require.Equal(t, "#/types/"+tc.input, op.Input.Ref)
			require.Equal(t, "#/types/"+tc.output, op.Output.Ref)

			in, ok := def.Types[tc.input]
			require.True(t, ok, "types has %s", tc.input)
			require.Equal(t, "object", in.Type)
			require.Equal(t, false, in.AdditionalProperties, "%s refuses what it does not name", tc.input)
			require.ElementsMatch(t, jsonFields(tc.goType), keysOf(in.Properties),
				"%s's properties are the JSON fields of %s", tc.input, tc.goType)
			requireDescribed(t, tc.input, in)

			require.NoError(t, decodeStrictly(tc.goType, tc.example), "the handler decodes the example")
			require.NoError(t, schemas(tc.input).Validate(instance(t, tc.example)), "the schema takes the example")
			for _, forged := range []string{`"tenant_id": "beta"`, `"caller": {"name": "root"}`} {
				in := strings.Replace(tc.example, "{", "{"+forged+", ", 1)
				require.Error(t, decodeStrictly(tc.goType, in), "the handler refuses %s", forged)
				require.Error(t, schemas(tc.input).Validate(instance(t, in)), "the schema refuses %s", forged)
			}
		})
	}
}

// TestNexusContractTypes: every other type is the JSON of its Go type,
// every type is one the tests know, and every $ref names a type.
func TestNexusContractTypes(t *testing.T) {
	def, _ := loadNexusContract(t)
	known := []string{}
	for _, tc := range nexusOperations {
		known = append(known, tc.input)
	}
	for name, goType := range nexusTypes {
		known = append(known, name)
		t.Run(name, func(t *testing.T) {
			s, ok := def.Types[name]
			require.True(t, ok, "types has %s", name)
			require.ElementsMatch(t, jsonFields(goType), keysOf(s.Properties), "%s's properties are the JSON fields of %s", name, goType)
			requireDescribed(t, name, s)
		})
	}
	require.ElementsMatch(t, known, keysOf(def.Types), "every type of the contract is checked against a Go type")

	data, err := os.ReadFile(nexusContract)
	require.NoError(t, err)
	var raw any
	require.NoError(t, yaml.Unmarshal(data, &raw))
	refs := 0
	walkRefs(raw, func(ref string) {
		refs++
		name, ok := strings.CutPrefix(ref, "#/types/")
		require.True(t, ok, "$ref %s is local", ref)
		require.Contains(t, def.Types, name, "$ref %s", ref)
	})
	require.Greater(t, refs, 10)
}

func TestJSONFields(t *testing.T) {
	type Inner struct {
		A string `json:"a"`
	}
	type inner struct {
		B string `json:"b,omitempty"`
	}
	type outer struct {
		Inner
		inner
		Named   Inner  `json:"named"`
		Plain   string // encoding/json's name: the field's
		Skipped string `json:"-"`
		Opt     int    `json:"opt,omitempty"`
		hidden  string
	}
	_ = outer{}.hidden
	require.Equal(t, []string{"a", "b", "named", "Plain", "opt"}, jsonFields(reflect.TypeFor[outer]()))
}

// loadNexusContract reads the contract, and compiles its types' schemas
// on demand.
func loadNexusContract(t *testing.T) (nexusDefinition, func(name string) *jsonschema.Schema) {
	t.Helper()
	data, err := os.ReadFile(nexusContract)
	require.NoError(t, err)
	var def nexusDefinition
	require.NoError(t, yaml.Unmarshal(data, &def))

	const url = "file:///agents.nexusrpc.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7) // nexus-rpc-gen's
	require.NoError(t, c.AddResource(url, instance(t, string(yamlToJSON(t, data)))))
	return def, func(name string) *jsonschema.Schema {
		s, err := c.Compile(url + "#/types/" + name)
		require.NoError(t, err, "compile %s", name)
		return s
	}
}

// jsonFields are the names encoding/json gives t's fields, the fields of
// embedded structs without a name of their own in their place.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	return out
}

// requireDescribed: a type and each of its properties say what they are
// (a property that is a $ref says it in the type it names).
func requireDescribed(t *testing.T, name string, s jsonSchema) {
	t.Helper()
	require.NotEmpty(t, s.Description, "%s has a description", name)
	for p, ps := range s.Properties {
		require.True(t, ps.Description != "" || ps.Ref != "", "%s.%s has a description", name, p)
	}
	for _, r := range s.Required {
		require.Contains(t, s.Properties, r, "%s requires %s, a property it has", name, r)
	}
}

// decodeStrictly decodes in into a new value of t as the handler does:
// a field t does not name is an error.
func decodeStrictly(t reflect.Type, in string) error {
	dec := json.NewDecoder(strings.NewReader(in))
	dec.DisallowUnknownFields()
	return dec.Decode(reflect.New(t).Interface())
}

func instance(t *testing.T, s string) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
	require.NoError(t, err)
	return v
}

func yamlToJSON(t *testing.T, data []byte) []byte {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(data, &v))
	var buf bytes.Buffer
	require.NoError(t, json.NewEncoder(&buf).Encode(v))
	return buf.Bytes()
}

// walkRefs calls f with every $ref in v.
func walkRefs(v any, f func(string)) {
	switch v := v.(type) {
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			f(ref)
		}
		for _, e := range v {
			walkRefs(e, f)
		}
	case []any:
		for _, e := range v {
			walkRefs(e, f)
		}
	}
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
