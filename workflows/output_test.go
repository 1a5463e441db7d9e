package workflows

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

func invalidReply(content, problems string) contract.CallModelResult {
	r := textReply(content)
	r.OutputProblems = problems
	return r
}

func validReply(content, out string) contract.CallModelResult {
	r := textReply(content)
	r.OutputJSON = json.RawMessage(out)
	return r
}

// TestStructuredOutputRepair: an answer that does not match the output
// schema is repaired by one more model call, beyond max_iterations, which
// is handed what was wrong and stores it as the step before its reply; a
// repair that does not match either fails the turn InvalidOutput.
func TestStructuredOutputRepair(t *testing.T) {
	schema := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name    string
		replies []contract.CallModelResult
		check   func(t *testing.T, f *fakeTurn, res agent.TurnResult, failed bool)
	}{
		{
			name:    "valid at once",
			replies: []contract.CallModelResult{validReply(`{"a": 1}`, `{"a":1}`)},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult, failed bool) {
				require.False(t, failed)
				require.Equal(t, `{"a":1}`, string(res.OutputJSON))
				require.Equal(t, `{"a": 1}`, res.Output)
				require.JSONEq(t, `{"type":"json","chars":7,"text":"{\"a\":1}"}`, string(res.ResultPreview))
				require.Len(t, f.modelCalls, 1)
				require.JSONEq(t, string(schema), string(f.modelCalls[0].OutputSchema))
				require.Empty(t, f.modelCalls[0].Repair)
			},
		},
		{
			name:    "repaired",
			replies: []contract.CallModelResult{invalidReply(`{}`, "missing property 'a'"), validReply(`{"a": 2}`, `{"a":2}`)},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult, failed bool) {
				require.False(t, failed)
				require.Equal(t, `{"a":2}`, string(res.OutputJSON))
				require.Equal(t, 14, res.Metadata.TokensUsed)
				require.Len(t, f.modelCalls, 2)
				require.Equal(t, "missing property 'a'", f.modelCalls[1].Repair)
				require.Equal(t, 1, f.modelCalls[0].Seq)
				require.Equal(t, 3, f.modelCalls[1].Seq, "step 2 is what was wrong")
				require.JSONEq(t, string(schema), string(f.modelCalls[1].OutputSchema))
			},
		},
		{
			name:    "still invalid",
			replies: []contract.CallModelResult{invalidReply(`{}`, "missing property 'a'"), invalidReply(`{"a": "x"}`, "/a: got string, want integer")},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult, failed bool) {
				require.True(t, failed)
				require.Len(t, f.modelCalls, 2)
				require.Len(t, f.saved, 1)
				saved := f.saved[0]
				require.Equal(t, agent.StatusFailed, saved.Status)
				require.Equal(t, agent.ErrTypeInvalidOutput, saved.Error.Type)
				require.Equal(t, "the model's answer does not match the output schema, also after a repair: /a: got string, want integer", saved.Error.Message)
				require.Empty(t, saved.OutputJSON)
			},
		},
		{
			name: "a repair that calls a tool first",
			replies: []contract.CallModelResult{invalidReply(`{}`, "missing property 'a'"), toolReply(calc("c1", "1+1")),
				invalidReply(`{"a": "x"}`, "/a: got string, want integer")},
			check: func(t *testing.T, f *fakeTurn, res agent.TurnResult, failed bool) {
				require.True(t, failed, "one repair a turn: the answer after the tool is not repaired again")
				require.Len(t, f.modelCalls, 3)
				require.Empty(t, f.modelCalls[2].Repair)
				require.Equal(t, agent.ErrTypeInvalidOutput, f.saved[0].Error.Type)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := testAgent()
			a.Limits.MaxIterations = 1
			if tt.name == "a repair that calls a tool first" {
				a.Limits.MaxIterations = 2
			}
			f := &fakeTurn{agent: a, replies: tt.replies,
				tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")}}
			env := newEnv(t, f)
			req := request()
			req.OutputSchema = schema
			res, app := runTurn(t, env, req)
			if app != nil {
				require.Equal(t, agent.ErrTypeInvalidOutput, app.Type())
			}
			tt.check(t, f, res, app != nil)
		})
	}
}
