package evals

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestParseSample: the sample dataset parses, and malformed ones are
// refused naming the case, its line and the field.
func TestParseSample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "evals", "assistant.yaml"))
	require.NoError(t, err)
	d, err := Parse(data)
	require.NoError(t, err)
	require.Equal(t, "assistant-basics", d.Name)
	require.Len(t, d.Cases, 4)
	for _, tt := range []struct{ name, src, want string }{
		{"no cases", "name: x\n", "at least one case is required"},
		{"unknown field", "name: x\ncases:\n  - id: a\n    prompt: hi\n    expected: {}\n", `cases[0] (line 3): json: unknown field "expected"`},
		{"nothing to check", "name: x\ncases:\n  - {id: a, prompt: hi, expect: {}}\n", "expect: nothing to check"},
		{"twice", "name: x\ncases:\n  - {id: a, prompt: hi, expect: {status: completed}}\n  - {id: a, prompt: ho, expect: {status: completed}}\n", `id "a" is used twice`},
		{"schema", "name: x\ncases:\n  - {id: a, prompt: hi, expect: {answer: {schema: {type: 3}}}}\n", "expect.answer.schema"},
		{"a comma in a flow mapping", "name: x\ncases:\n  - {id: a, prompt: hi, expect: {answer: {judge: {rubric: a, 4, b}}}}\n", "the key 4 is not a string"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			require.ErrorContains(t, err, tt.want)
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err))
		})
	}
}

// FuzzParse: any dataset file parses or is refused with CodeInvalid,
// never a panic; what parses validates, and scores any result without a
// panic.
func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "evals", "assistant.yaml"))
	require.NoError(f, err)
	f.Add(string(data))
	for _, s := range []string{"name: x\ncases: []\n", "name: x\ncases:\n  - {id: a, prompt: hi, expect: {answer: {regex: '('}}}\n",
		"{", "cases: {a: 1}", "name: x\ncases:\n  - {id: a, prompt: hi, expect: {tool_calls: [{tool: t, args: [1]}]}}\n",
		"name: x\ncases:\n  - {id: a, recording: {job_id: j, workflow_id: turn/demo/j, from_step: 0, to_step: 3}}\n",
		"name: x\ncases:\n  - {id: a, prompt: hi, recording: {job_id: j, to_step: -1}}\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		d, err := Parse([]byte(src))
		if err != nil {
			require.Equal(t, agent.CodeInvalid, agent.ErrorCode(err), "%v", err)
			return
		}
		require.NoError(t, d.Validate())
		for _, c := range d.Cases {
			Score(c, agent.TurnResult{Status: agent.StatusCompleted, Output: "x",
				Metadata: agent.ResultMetadata{ToolCalls: []agent.ToolCallRecord{{Tool: "t", Args: []byte(`{"a":1}`)}}}})
		}
	})
}
