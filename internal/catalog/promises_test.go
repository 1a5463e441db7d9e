package catalog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestParseEmptyAnswerAndModelTimeout: an agent's empty_answer and
// limits.model_timeout_sec are kept in the version a turn pins; a blank
// placeholder, or a model timeout over the turn's or MaxModelTimeoutSec,
// is refused where it is written.
func TestParseEmptyAnswerAndModelTimeout(t *testing.T) {
	src := "tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n    empty_answer: Nothing to add.\n    limits: {turn_timeout_sec: 120, model_timeout_sec: 30}\n"
	cat, err := Parse(testKinds(t), "t.yaml", []byte(src))
	require.NoError(t, err)
	ag := cat.Tenants[0].Agents[0].ForTurn()
	require.Equal(t, "Nothing to add.", ag.EmptyAnswerText())
	require.Equal(t, 30, ag.Limits.ModelTimeoutSec)

	cat, err = Parse(testKinds(t), "t.yaml", []byte("tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"))
	require.NoError(t, err)
	require.Equal(t, agent.DefaultEmptyAnswer, cat.Tenants[0].Agents[0].EmptyAnswerText())

	for _, tt := range []struct{ line, want string }{
		{"    empty_answer: '  '\n", `t.yaml:5: agents[0].empty_answer: is blank: leave empty_answer out for the default, "No output from agent."`},
		{"    limits: {turn_timeout_sec: 60, model_timeout_sec: 61}\n", `t.yaml:5: agents[0].limits.model_timeout_sec: 61 is out of range: a model call's timeout is at most the turn's (60 s) and 3600 s, or 0 for the turn's`},
		{"    limits: {model_timeout_sec: 301}\n", `agents[0].limits.model_timeout_sec: 301 is out of range: a model call's timeout is at most the turn's (300 s)`},
	} {
		_, err := Parse(testKinds(t), "t.yaml", []byte("tenant: demo\nagents:\n  - id: a\n    model: openai:gpt-4o-mini\n"+tt.line))
		require.ErrorContains(t, err, tt.want)
	}
}
