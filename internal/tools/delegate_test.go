package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestDelegateConfig(t *testing.T) {
	r := newTestRegistry(t)
	k, ok := r.Kind(agent.KindDelegate)
	require.True(t, ok, "delegate_to_agent is built in")
	for _, tt := range []struct {
		name, config, wantErr string
	}{
		{name: "none"},
		{name: "agents and depth", config: `{"agents":["researcher"],"max_depth":3}`},
		{name: "too deep", config: `{"max_depth":9}`, wantErr: "max_depth is 9; want 1 to 5"},
		{name: "unknown setting", config: `{"image":"x"}`, wantErr: `unknown field "image"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			spec := agent.Tool{Name: "delegate", Kind: agent.KindDelegate}
			if tt.config != "" {
				spec.Config = json.RawMessage(tt.config)
			}
			_, err := k.Build(spec, Deps{})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.True(t, agent.IsCode(err, agent.CodeInvalid))
		})
	}
}

// A delegate_to_agent call that reaches the tool runtime is refused with
// an error the model reads: nothing is started from inside an activity.
func TestDelegateRunRefuses(t *testing.T) {
	r := newTestRegistry(t)
	spec := agent.Tool{Name: "delegate", Kind: agent.KindDelegate}
	_, err := r.Execute(context.Background(), spec, Call{Args: json.RawMessage(`{"agent_id":"b","prompt":"p"}`)})
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, "delegate: delegate_to_agent calls run as child turns")
}
