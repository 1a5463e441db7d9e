package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// resendCatalog: api needs a person's approval, and delivers at most
// once (the default); each attempt runs for at most 2 s.
const resendCatalog = `
tenant: demo
default_agent: booker
egress: ["HOST"]
tools:
  - {name: api, kind: openapi_action, approval: always, timeout_sec: 2, config: {spec_url: URL/openapi.json}}
agents:
  - id: booker
    model: "openai:gpt-4o-mini"
    system_prompt: You book.
    tools: [api]
    limits: {turn_timeout_sec: 300, approval_timeout_sec: 120}
`

// TestUnknownAsksApproverAgain: an approved POST the API cannot
// deduplicate, whose first attempt is lost in flight, ends unknown; its
// tool asks a person, so the turn asks them again, whether to send it
// again, before the model is told. Approved, it is sent a second time
// (the API sees two deliveries, the ledger a second intent under the
// decision) and the model reads its answer; rejected with a reason, it is
// not, and the model reads the unknown outcome with the reason.
func TestUnknownAsksApproverAgain(t *testing.T) {
	api := startWritesAPI(t, map[string]string{"/bookings": "hang", "/charges": "hang"})
	catalog := strings.NewReplacer("URL", api.URL, "HOST", strings.TrimPrefix(api.URL, "http://")).Replace(resendCatalog)
	srv := testserver.Start(t, testserver.Options{Script: writesScript, Catalogs: []string{catalog},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel))})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	tests := []struct {
		name     string
		prompt   string
		path     string
		decision agent.ApprovalDecision
		sent     int
		status   string
		output   string // in what the model said of the tool's result
		history  string
	}{
		{
			name: "approved: sent again", prompt: "call api createBooking", path: "/bookings",
			decision: agent.ApprovalDecision{Approved: true, Approver: "ana"},
			sent:     2, status: agent.ToolOK, output: `The tool said: createBooking answered 201`,
			history: "turn_approval_resend",
		},
		{
			name: "rejected with a reason: not sent again", prompt: "call api createCharge", path: "/charges",
			decision: agent.ApprovalDecision{Reason: "it went through: the charge is in the ledger", Approver: "bob"},
			sent:     1, status: agent.ToolUnknown,
			output: `"decision":"bob was asked whether to send it again and decided not to: it went through: the charge is in the ledger"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := "resend-" + testserver.RandomID()
			run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion,
				TenantID: "demo", JobID: job, Prompt: tt.prompt})
			require.NoError(t, err)
			id := run.GetID()
			waiting := func(resend bool) agent.PendingApproval {
				t.Helper()
				var got agent.PendingApproval
				require.Eventually(t, func() bool {
					ps, err := turnclient.PendingApprovals(ctx, srv.Client(), id)
					if err != nil || len(ps) != 1 || ps[0].Resend != resend {
						return false
					}
					got = ps[0]
					return true
				}, time.Minute, 100*time.Millisecond)
				return got
			}

			first := waiting(false)
			_, err = turnclient.Approve(ctx, srv.Client(), id, agent.ApprovalDecision{CallID: first.CallID, ApprovalID: first.ApprovalID,
				Approved: true, Approver: "ana"})
			require.NoError(t, err)

			// The first attempt hangs past its timeout; the retry finds its
			// intent, and the person is asked again.
			again := waiting(true)
			require.Equal(t, first.CallID, again.CallID)
			require.NotEqual(t, first.ApprovalID, again.ApprovalID)
			require.Contains(t, string(again.Args), tt.prompt[len("call api "):])
			n, _ := api.counted(tt.path)
			require.Equal(t, 1, n, "nothing is sent again before the person decides")
			page, err := turnclient.Events(ctx, srv.Client(), id, agent.EventsQuery{})
			require.NoError(t, err)
			var asked *agent.ToolEvent
			for _, e := range page.Events {
				if e.Kind == agent.EventApprovalRequired && e.Tool.Resend {
					asked = e.Tool
				}
			}
			require.NotNil(t, asked)
			require.Equal(t, again.ApprovalID, asked.ApprovalID)
			require.Contains(t, asked.Reason, "send it again? Its outcome is unknown: an earlier attempt of this call was sending POST "+api.URL+tt.path)

			d := tt.decision
			d.CallID, d.ApprovalID = again.CallID, again.ApprovalID
			_, err = turnclient.Approve(ctx, srv.Client(), id, d)
			require.NoError(t, err)
			res, err := turnclient.Result(ctx, run)
			require.NoError(t, err)
			require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)

			n, _ = api.counted(tt.path)
			require.Equal(t, tt.sent, n, "deliveries %s saw", tt.path)
			require.Len(t, res.Metadata.ToolCalls, 1)
			require.Equal(t, tt.status, res.Metadata.ToolCalls[0].Status)
			require.Contains(t, res.Output, tt.output)

			recs, err := srv.Store().Approvals(ctx, "demo", job)
			require.NoError(t, err)
			require.Len(t, recs, 2)
			require.False(t, recs[0].Resend)
			require.True(t, recs[1].Resend)
			require.Equal(t, again.ApprovalID, recs[1].ApprovalID)
			require.Equal(t, tt.decision.Approver, recs[1].Approver)

			// The ledger: the first delivery's intent, and the second's
			// under the decision that allowed it.
			rows, err := srv.Store().Pool().Query(ctx, `SELECT resend FROM tool_effects WHERE tenant_id = 'demo' AND job_id = $1 ORDER BY resend`, job)
			require.NoError(t, err)
			var deliveries []string
			for rows.Next() {
				var r string
				require.NoError(t, rows.Scan(&r))
				deliveries = append(deliveries, r)
			}
			require.NoError(t, rows.Err())
			want := []string{""}
			if tt.decision.Approved {
				want = append(want, again.ApprovalID)
			}
			require.Equal(t, want, deliveries)

			if tt.history != "" {
				(&env{Server: srv, t: t}).replay(id, tt.history)
			}
		})
	}
}
