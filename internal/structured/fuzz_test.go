package structured_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
)

// FuzzCompile: a tenant's schema compiles, or is a CodeInvalid error that
// says what is wrong; never a panic.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{
		tripSchema, `{"type":"object"}`, `{"type":"object","properties":{"n":{"type":"integr"}}}`,
		`{"type":"object","$ref":"#/$defs/x"}`, `{"type":"object","$defs":{"x":{"$ref":"#/$defs/x"}},"$ref":"#/$defs/x"}`,
		`{"type":"object","pattern":"("}`, `{"type":"object","$schema":"http://json-schema.org/draft-04/schema#"}`,
		`{"type":"object","$id":"file:///etc/"}`, `[]`, `null`, ``, `{"type":"string"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := structured.Compile(json.RawMessage(raw))
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.NotEmpty(t, err.Error())
			return
		}
		if s == nil {
			require.False(t, agent.HasOutputSchema(raw))
		}
	})
}

// FuzzCheck: any answer of a model matches the schema, and is returned as
// compact JSON that matches it again, or is described by at least one
// problem; never a panic.
func FuzzCheck(f *testing.F) {
	s, err := structured.Compile(json.RawMessage(tripSchema))
	require.NoError(f, err)
	for _, a := range []string{
		`{"city":"Oslo","nights":2}`, "```json\n{\"city\":\"Oslo\",\"nights\":2}\n```", `{"nights":0}`, `Oslo`, ``, "```", "```\n```",
		`{"city":"Oslo","nights":2} {}`, `{"city":"Oslo","nights":1e400}`, `{"city":"\ud800","nights":2}`,
	} {
		f.Add(a)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		out, problems := s.Check(answer)
		if len(problems) > 0 {
			require.Nil(t, out)
			require.NotEmpty(t, problems.String())
			return
		}
		require.True(t, json.Valid(out), "%s", out)
		again, problems := s.Check(string(out))
		require.Empty(t, problems)
		require.Equal(t, string(out), string(again))
	})
}

// FuzzCheckArguments: any arguments a client sends match the input schema
// and come back as compact JSON that matches it again, or are described
// by at least one problem; never a panic.
func FuzzCheckArguments(f *testing.F) {
	s, err := structured.CompileInput(json.RawMessage(tripSchema))
	require.NoError(f, err)
	for _, a := range []string{`{"city":"Oslo","nights":2}`, `{}`, `[]`, ``, `null`, `{"city":"Oslo","nights":2} {}`, `{"city":"\ud800","nights":2}`, `{"nights":1e400,"city":"x"}`} {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		out, problems := s.CheckArguments(raw)
		if len(problems) > 0 {
			require.Nil(t, out)
			require.NotEmpty(t, problems.String())
			return
		}
		require.True(t, json.Valid(out), "%s", out)
		again, problems := s.CheckArguments(out)
		require.Empty(t, problems)
		require.Equal(t, string(out), string(again))
	})
}
