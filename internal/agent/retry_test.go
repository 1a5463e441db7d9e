package agent_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestRetryReplay: a retry (ChannelRetry) may replay a recorded turn as
// an evaluation does, with results a person edited, within bounds; any
// other door may not.
func TestRetryReplay(t *testing.T) {
	many := make([]agent.ReplayResult, agent.MaxReplayResults+1)
	for i := range many {
		many[i] = agent.ReplayResult{CallID: fmt.Sprintf("c%d", i), Result: "r"}
	}
	tests := []struct {
		name    string
		channel string
		replay  agent.Replay
		want    string // "": valid
	}{
		{name: "retry", channel: agent.ChannelRetry, replay: agent.Replay{JobID: "r", Seq: 3}},
		{name: "retry with edits", channel: agent.ChannelRetry,
			replay: agent.Replay{JobID: "r", Results: []agent.ReplayResult{{CallID: "a", Result: "x"}, {CallID: "b", Result: ""}}}},
		{name: "evaluation with edits", channel: agent.ChannelEval, replay: agent.Replay{JobID: "r", Results: []agent.ReplayResult{{CallID: "a"}}}},
		{name: "other door", channel: agent.ChannelHTTP, replay: agent.Replay{JobID: "r"}, want: "only an evaluation replays"},
		{name: "no recording", channel: agent.ChannelRetry, replay: agent.Replay{}, want: "only an evaluation replays"},
		{name: "negative step", channel: agent.ChannelRetry, replay: agent.Replay{JobID: "r", Seq: -1}, want: "seq is -1"},
		{name: "too many", channel: agent.ChannelRetry, replay: agent.Replay{JobID: "r", Results: many}, want: "want at most 100"},
		{name: "no call id", channel: agent.ChannelRetry, replay: agent.Replay{JobID: "r", Results: []agent.ReplayResult{{Result: "x"}}},
			want: "results[0].call_id is required"},
		{name: "call twice", channel: agent.ChannelRetry,
			replay: agent.Replay{JobID: "r", Results: []agent.ReplayResult{{CallID: "a"}, {CallID: "a"}}}, want: `results[1].call_id "a" is given twice`},
		{name: "result too long", channel: agent.ChannelRetry,
			replay: agent.Replay{JobID: "r", Results: []agent.ReplayResult{{CallID: "a", Result: strings.Repeat("x", agent.MaxReplayResultBytes+1)}}},
			want:   "results[0].result is 65537 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", JobID: "j", Prompt: "p", Channel: tt.channel, Replay: &tt.replay}
			err := req.Validate()
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.want)
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		})
	}
	require.True(t, agent.KnownChannel(agent.ChannelRetry))
	rep := agent.Replay{JobID: "r", Results: []agent.ReplayResult{{CallID: "a", Result: "x"}}}
	got, ok := rep.Edited("a")
	require.True(t, ok)
	require.Equal(t, "x", got)
	_, ok = rep.Edited("b")
	require.False(t, ok)
}
