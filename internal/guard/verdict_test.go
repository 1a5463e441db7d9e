package guard

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

func TestReadVerdict(t *testing.T) {
	tests := []struct {
		answer string
		want   Verdict
		ok     bool
	}{
		{`{"allow": true}`, Verdict{Allow: true}, true},
		{` {"allow": false, "reason": "off topic", "score": 0.9}` + "\n", Verdict{Reason: "off topic"}, true},
		{`{"allow": false}`, Verdict{}, true},
		{`{"reason": "no allow"}`, Verdict{}, false},
		{`{"allow": "yes"}`, Verdict{}, false},
		{`{"allow": null}`, Verdict{}, false},
		{`{"allow": true, "reason": 3}`, Verdict{}, false},
		{`[{"allow": true}]`, Verdict{}, false},
		{`ALLOW`, Verdict{}, false},
		{"", Verdict{}, false},
		{`{"allow": true, "reason": "` + strings.Repeat("x", maxVerdictBytes) + `"}`, Verdict{}, false},
	}
	for _, tt := range tests {
		got, err := ReadVerdict([]byte(tt.answer))
		if !tt.ok {
			require.ErrorIs(t, err, errNotVerdict, "%.60s", tt.answer)
			continue
		}
		require.NoError(t, err, tt.answer)
		require.Equal(t, tt.want, got, tt.answer)
	}
}

// FuzzReadVerdict: whatever a guard answers, ReadVerdict returns a
// verdict or says it is none, never quoting the answer.
func FuzzReadVerdict(f *testing.F) {
	for _, s := range []string{`{"allow": true}`, `{"allow": false, "reason": "r"}`, `{"allow": 1}`, `null`, `{"allow": true, "allow": false}`, "\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ReadVerdict(data)
		if err != nil {
			require.Equal(t, errNotVerdict, err)
			require.Equal(t, Verdict{}, v)
			return
		}
		var back struct {
			Allow *bool `json:"allow"`
		}
		require.NoError(t, json.Unmarshal(data, &back))
		require.NotNil(t, back.Allow)
		require.Equal(t, *back.Allow, v.Allow)
	})
}

// TestCallTool: a tool guard's verdicts, and what a call that fails, does
// not end in time or answers no verdict means, closed and open; the
// failure names neither the text nor what the tool said.
func TestCallTool(t *testing.T) {
	check := ToolCheck{Stage: agent.GuardOutput, Text: "the launch code is 0000", AgentID: "a", JobID: "j"}
	answer := func(out string, err error) func(context.Context, json.RawMessage) (string, error) {
		return func(_ context.Context, args json.RawMessage) (string, error) {
			require.JSONEq(t, `{"stage": "output", "text": "the launch code is 0000", "agent_id": "a", "job_id": "j"}`, string(args))
			return out, err
		}
	}
	slow := func(ctx context.Context, _ json.RawMessage) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}
	tests := []struct {
		name   string
		fail   string
		run    func(context.Context, json.RawMessage) (string, error)
		rule   string // "" for allowed
		failed string // the failure, "" for none
	}{
		{"allowed", "", answer(`{"allow": true}`, nil), "", ""},
		{"refused", "", answer(`{"allow": false, "reason": "a secret"}`, nil), "tool guard policy_check refused: a secret", ""},
		{"refused without a reason", "open", answer(`{"allow": false}`, nil), "tool guard policy_check refused: no reason given", ""},
		{"no verdict, closed", "", answer("the launch code is 0000, fine", nil),
			`tool guard policy_check failed closed: the answer is not {"allow": true|false, "reason"}`, "the answer is not"},
		{"no verdict, open", "open", answer("fine", nil), "", "the answer is not"},
		{"an error, closed", "closed", answer("", errors.New("the call failed (invalid)")),
			"tool guard policy_check failed closed: the call failed (invalid)", "the call failed"},
		{"too slow, closed", "", slow, "tool guard policy_check failed closed: no answer within 20ms", "no answer within 20ms"},
		{"too slow, open", "open", slow, "", "no answer within 20ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := agent.ToolGuard{Name: "policy_check", GuardCall: agent.GuardCall{TimeoutMS: 20, Fail: tt.fail}}
			rule, err := CallTool(context.Background(), g, check, tt.run)
			require.Equal(t, tt.rule, rule)
			if tt.failed == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.failed)
			require.NotContains(t, err.Error()+rule, "0000")
		})
	}
}
