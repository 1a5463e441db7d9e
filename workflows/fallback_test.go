package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestFallbackModels: a call that fails for good with a type the agent
// falls back on is followed by a call of the next fallback model, for
// the same step, with its attempts numbered after the failed call's; the
// model that answered takes the next step; a type the agent does not
// name fails the turn without a fallback.
func TestFallbackModels(t *testing.T) {
	fail := func(typ string, retryable bool) error {
		if retryable {
			return temporal.NewApplicationError("model call failed: HTTP 500", typ)
		}
		return temporal.NewNonRetryableApplicationError("model call failed: HTTP 400", typ, nil)
	}
	byModel := func(errs map[string]error) func(contract.CallModelInput) error {
		return func(in contract.CallModelInput) error { return errs[in.Model] }
	}
	type call struct {
		model      string
		seq, based int
	}
	tests := []struct {
		name      string
		failModel func(contract.CallModelInput) error
		replies   []contract.CallModelResult
		want      []call
		wantType  string // of the turn's failure; "" for none
		wantModel string
	}{
		{
			name: "down the list, then the answering model keeps the turn",
			failModel: byModel(map[string]error{
				"":          fail(agent.ErrTypeModelFailed, true),
				"openai:b1": fail(agent.ErrTypeContextLength, false),
			}),
			replies: []contract.CallModelResult{
				{ToolCalls: []agent.ToolCall{calc("c", "1+1")}, Model: "openai:b2", Usage: agent.Usage{TotalTokens: 5}},
				{Content: "2", Model: "openai:b2", Usage: agent.Usage{TotalTokens: 5}},
			},
			want: []call{{"", 1, 0}, {"", 1, 0}, {"", 1, 0}, {"", 1, 0}, {"", 1, 0}, {"", 1, 0},
				{"openai:b1", 1, 6}, {"openai:b2", 1, 12}, {"openai:b2", 3, 0}},
			wantModel: "openai:b2",
		},
		{
			name:      "a type not named",
			failModel: byModel(map[string]error{"": fail(agent.ErrTypeModelRejected, false)}),
			want:      []call{{"", 1, 0}},
			wantType:  agent.ErrTypeModelRejected, wantModel: "openai:gpt-4o-mini",
		},
		{
			name: "the last model fails too",
			failModel: byModel(map[string]error{
				"":          fail(agent.ErrTypeContextLength, false),
				"openai:b1": fail(agent.ErrTypeUnavailable, false),
				"openai:b2": fail(agent.ErrTypeContextLength, false),
			}),
			want:     []call{{"", 1, 0}, {"openai:b1", 1, 6}, {"openai:b2", 1, 12}},
			wantType: agent.ErrTypeContextLength, wantModel: "openai:b2",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeTurn{agent: testAgent(), replies: tt.replies, failModel: tt.failModel,
				tools: map[string]func(contract.ExecuteToolInput) (contract.ExecuteToolResult, error){"calculator": okTool("2")}}
			f.agent.FallbackModels = []string{"openai:b1", "openai:b2"}
			f.agent.FallbackOn = agent.DefaultFallbackOn()
			env := newEnv(t, f)
			res, failure := runTurn(t, env, request())
			var got []call
			for _, in := range f.modelCalls {
				got = append(got, call{in.Model, in.Seq, in.AttemptBase})
			}
			require.Equal(t, tt.want, got)
			if tt.wantType != "" {
				require.NotNil(t, failure)
				require.Equal(t, tt.wantType, failure.Type())
				require.NoError(t, failure.Details(&res))
			} else {
				require.Nil(t, failure)
				require.Equal(t, "2", res.Output)
			}
			require.Equal(t, tt.wantModel, res.Metadata.LLMModel)
			require.Len(t, f.saved, 1)
			require.Equal(t, tt.wantModel, f.saved[0].Metadata.LLMModel)
		})
	}
}
