package structured_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
)

const tripSchema = `{
  "type": "object",
  "properties": {
    "city": {"type": "string", "minLength": 1},
    "nights": {"type": "integer", "minimum": 1},
    "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}}
  },
  "required": ["city", "nights"],
  "additionalProperties": false,
  "$defs": {"tag": {"type": "string", "enum": ["beach", "city"]}}
}`

func TestCompile(t *testing.T) {
	cases := []struct {
		name, schema, want string
	}{
		{"valid", tripSchema, ""},
		{"none", ``, ""},
		{"null", `null`, ""},
		{"not JSON", `{"type": "object",`, "output schema must be a JSON Schema object"},
		{"an array", `[1]`, "output schema must be a JSON Schema object"},
		{"not an object's", `{"type": "string"}`, `must describe a JSON object ("type": "object" at its root)`},
		{"no type", `{"properties": {}}`, `must describe a JSON object`},
		{"a bad keyword value", `{"type": "object", "properties": {"n": {"type": "integr"}}}`, "output schema does not compile"},
		{"a bad minimum", `{"type": "object", "properties": {"n": {"minimum": "one"}}}`, "output schema does not compile"},
		{"a dangling ref", `{"type": "object", "properties": {"n": {"$ref": "#/$defs/missing"}}}`, "output schema does not compile"},
		{"a remote ref", `{"type": "object", "properties": {"n": {"$ref": "https://example.com/s.json"}}}`, "may only refer within itself"},
		{"a file ref", `{"type": "object", "properties": {"n": {"$ref": "file:///etc/passwd"}}}`, "may only refer within itself"},
		{"too large", `{"type": "object", "description": "` + strings.Repeat("x", agent.MaxOutputSchemaBytes) + `"}`, "the limit is 65536"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := structured.Compile(json.RawMessage(c.schema))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "mem://", "the compiler's names stay inside")
		})
	}
}

func TestCheck(t *testing.T) {
	s, err := structured.Compile(json.RawMessage(tripSchema))
	require.NoError(t, err)
	cases := []struct {
		name, answer, want string
		problems           []string
	}{
		{name: "valid", answer: ` {"city": "Oslo", "nights": 2, "tags": ["city"]} `, want: `{"city":"Oslo","nights":2,"tags":["city"]}`},
		{name: "fenced", answer: "```json\n{\"city\": \"Oslo\", \"nights\": 2}\n```", want: `{"city":"Oslo","nights":2}`},
		{name: "fenced without a language", answer: "```\n{\"city\": \"Oslo\", \"nights\": 2}\n```", want: `{"city":"Oslo","nights":2}`},
		{name: "prose", answer: "Oslo, for two nights.", problems: []string{"the answer is not JSON"}},
		{name: "fenced in another language", answer: "```yaml\ncity: Oslo\n```", problems: []string{"the answer is not JSON"}},
		{name: "missing and wrong", answer: `{"nights": 0, "tags": ["mountain"], "extra": 1}`, problems: []string{
			"missing property 'city'", "/nights: minimum: got 0, want 1", "/tags/0: value must be one of", "additional properties 'extra' not allowed"}},
		{name: "not an object", answer: `["Oslo"]`, problems: []string{"got array, want object"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, problems := s.Check(c.answer)
			if c.problems == nil {
				require.Empty(t, problems)
				require.JSONEq(t, c.want, string(out))
				require.Equal(t, c.want, string(out), "compact")
				return
			}
			require.Nil(t, out)
			for _, p := range c.problems {
				require.Contains(t, problems.String(), p)
			}
		})
	}
}

func TestCheckBoundsProblems(t *testing.T) {
	s, err := structured.Compile(json.RawMessage(`{"type": "object", "additionalProperties": {"type": "integer"}}`))
	require.NoError(t, err)
	var b strings.Builder
	b.WriteString("{")
	for i := range 30 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `": "not a number"`)
	}
	b.WriteString("}")
	_, problems := s.Check(b.String())
	require.Len(t, problems, 21)
	require.Equal(t, "and 10 more problems", problems[20].Message)
}

func TestRepairPrompt(t *testing.T) {
	require.Equal(t, "Your answer does not match the required output schema: /nights: minimum: got 0, want 1. "+
		"Answer again with only a JSON value that matches the schema, and nothing else.", structured.RepairPrompt("/nights: minimum: got 0, want 1"))
}

// TestCompileInput: an input schema compiles by an output schema's rules,
// and its errors name it an input schema.
func TestCompileInput(t *testing.T) {
	cases := []struct {
		name, schema, want string
	}{
		{"valid", tripSchema, ""},
		{"no arguments", `{"type": "object"}`, ""},
		{"none", ``, ""},
		{"not JSON", `{"type": "object",`, "input schema must be a JSON Schema object"},
		{"not an object's", `{"type": "string"}`, `input schema must describe a JSON object ("type": "object" at its root): a tool's arguments are one`},
		{"a bad keyword value", `{"type": "object", "properties": {"n": {"type": "integr"}}}`, "input schema does not compile: /properties/n/type"},
		{"a file ref", `{"type": "object", "properties": {"n": {"$ref": "file:///etc/passwd"}}}`, "may only refer within itself"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := structured.CompileInput(json.RawMessage(c.schema))
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.Contains(t, err.Error(), c.want)
			require.NotContains(t, err.Error(), "output schema")
		})
	}
}

// TestCheckArguments: a call's arguments are checked against an input
// schema and kept as the client sent them, compact.
func TestCheckArguments(t *testing.T) {
	s, err := structured.CompileInput(json.RawMessage(tripSchema))
	require.NoError(t, err)
	cases := []struct {
		name, args, want string
		problems         []string
	}{
		{name: "valid", args: ` {"nights": 2, "city": "Oslo"} `, want: `{"nights":2,"city":"Oslo"}`},
		{name: "missing and wrong", args: `{"nights": 0, "extra": 1}`, problems: []string{"missing property 'city'", "/nights: minimum: got 0, want 1", "additional properties 'extra' not allowed"}},
		{name: "not JSON", args: `{"city": `, problems: []string{"the arguments are not JSON"}},
		{name: "two documents", args: `{"city": "Oslo", "nights": 2} {}`, problems: []string{"the arguments are not JSON"}},
		{name: "fenced is not JSON", args: "```json\n{\"city\": \"Oslo\", \"nights\": 2}\n```", problems: []string{"the arguments are not JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, problems := s.CheckArguments(json.RawMessage(c.args))
			if c.problems == nil {
				require.Empty(t, problems)
				require.Equal(t, c.want, string(out))
				return
			}
			require.Nil(t, out)
			for _, p := range c.problems {
				require.Contains(t, problems.String(), p)
			}
		})
	}
}
