package activities

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestRegisterClassifiesErrors runs failing activities by name, as the
// workflows call them, so that what is checked is the failure Temporal
// sees: the type, whether it is retried, and when.
func TestRegisterClassifiesErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	tests := []struct {
		name   string
		prompt string // the turn's prompt; LoadAgent runs first when set
		// activity and its input, given the job and its pinned agent
		activity string
		input    func(job string, ag agent.Agent) any

		wantType      string // empty: no type of agent's table
		wantRetryable bool
		wantDelay     time.Duration
		wantMsg       string
		wantRule      string // the model script's rule, served exactly once
	}{
		{
			name:     "unknown agent version",
			prompt:   "hello",
			activity: contract.CallModel,
			input: func(job string, ag agent.Agent) any {
				in := callModelInput(job, ag)
				in.AgentVersion = 99
				return in
			},
			wantType: agent.ErrTypeAgentNotFound,
			wantMsg:  `"assistant"`,
		},
		{
			name:     "unknown agent",
			activity: contract.LoadAgent,
			input: func(job string, _ agent.Agent) any {
				in := loadAgentInput(job, "hello")
				in.AgentID = "nobody"
				return in
			},
			wantType: agent.ErrTypeAgentNotFound,
			wantMsg:  `"nobody"`,
		},
		{
			name:     "tenant without routing rules",
			activity: contract.Route,
			input: func(string, agent.Agent) any {
				return contract.RouteInput{TenantID: "ghost", Prompt: "hello"}
			},
			wantType: agent.ErrTypeAgentNotFound,
			wantMsg:  `"ghost"`,
		},
		{
			name:     "result with a bad status",
			activity: contract.SaveResult,
			input: func(job string, _ agent.Agent) any {
				in := saveResultInput(job, "x")
				in.Result.Status = "MAYBE"
				return in
			},
			wantType: agent.ErrTypeInvalidRequest,
			wantMsg:  `"MAYBE"`,
		},
		{
			name:     "model rejects the request",
			prompt:   "rejected please",
			activity: contract.CallModel,
			input:    func(job string, ag agent.Agent) any { return callModelInput(job, ag) },
			wantType: agent.ErrTypeModelRejected,
			wantMsg:  "unsupported parameter: temperature",
			wantRule: "rejected",
		},
		{
			name:          "model throttles with Retry-After",
			prompt:        "throttled please",
			activity:      contract.CallModel,
			input:         func(job string, ag agent.Agent) any { return callModelInput(job, ag) },
			wantType:      agent.ErrTypeModelFailed,
			wantRetryable: true,
			wantDelay:     7 * time.Second,
			wantRule:      "throttled",
		},
		{
			name:          "model unavailable",
			prompt:        "overloaded please",
			activity:      contract.CallModel,
			input:         func(job string, ag agent.Agent) any { return callModelInput(job, ag) },
			wantType:      agent.ErrTypeModelFailed,
			wantRetryable: true,
			wantRule:      "overloaded",
		},
		{
			// Steps 1 to 4 were never stored: not a domain error, so
			// Temporal retries it as it is.
			name:          "error without a code",
			prompt:        "hello",
			activity:      contract.CallModel,
			input:         func(job string, ag agent.Agent) any { in := callModelInput(job, ag); in.Seq = 5; return in },
			wantRetryable: true,
			wantMsg:       "has 1 of its steps 0 to 4 stored, want every one before calling the model",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := randomJob()
			var ag agent.Agent
			if tt.prompt != "" {
				ag = h.loadAgent(t, job, tt.prompt)
			}
			_, err := h.env.ExecuteActivity(tt.activity, tt.input(job, ag))

			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app), "want an application error, got %v", err)
			if tt.wantType != "" {
				require.Equal(t, tt.wantType, app.Type())
			} else {
				_, known := agent.CodeOfType(app.Type())
				require.False(t, known, "type %q", app.Type())
			}
			require.Equal(t, tt.wantRetryable, !app.NonRetryable())
			require.Equal(t, tt.wantDelay, app.NextRetryDelay())
			require.Contains(t, app.Error(), tt.wantMsg)
			if tt.wantRule != "" {
				// Temporal owns retries: the provider client does not retry.
				require.Equal(t, 1, h.model.Served(tt.wantRule))
			}
		})
	}
}
