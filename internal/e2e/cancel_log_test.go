package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/server"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestCancelLogsOneLine: a person's cancel of a turn whose model is
// streaming, with the model call an activity or a local activity, is
// logged by the process as one line at info ("turn cancelled"), without a
// stack trace, and nothing about it at warn or above — neither the model
// call it stopped nor the SDK's "Activity error.": a cancel is what the
// user asked for, not a failure. The logger is the worker's own (server.NewLogger,
// as `task up` and the demo build it), its output observed.
func TestCancelLogsOneLine(t *testing.T) {
	for _, tc := range []struct{ name, catalog string }{
		{"activity", testCatalog},
		{"local activity", localCatalog},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logger, err := server.NewLogger("console", "debug")
			require.NoError(t, err)
			core, logs := observer.New(zapcore.InfoLevel)
			logger = logger.WithOptions(zap.WrapCore(func(zapcore.Core) zapcore.Core { return core }))
			e := &env{Server: testserver.Start(t, testserver.Options{Script: testScript, Catalogs: []string{tc.catalog}, Logger: logger,
				Tokens: map[string]string{"tok-demo": "demo:user:ana"}}), t: t}
			require.Eventually(t, e.Hub().Connected, time.Minute, 10*time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			started := logs.Len()
			req := agent.TurnRequest{TenantID: "demo", JobID: "job-" + testserver.RandomID(), Prompt: "tell a story"}
			req.Normalize()
			id := contract.TurnWorkflowID(req.TenantID, req.JobID)
			var events []agent.Event
			sent := false
			// Cancelled as a person does, through the gateway, while the
			// model streams.
			err = followNew(ctx, e.Follower(), e.Client(), turnclient.StartOptions(e.TaskQueue, req), req, func(ev agent.Event) error {
				events = append(events, ev)
				if !sent && countTokens(events) == 2 {
					sent = true
					_, err := pb.NewAgentServiceClient(e.Conn).Cancel(grpcAs(ctx, "tok-demo"), &pb.CancelRequest{StreamId: id, Reason: "enough"})
					return err
				}
				return nil
			})
			require.NoError(t, err)
			require.Equal(t, agent.StreamCanceled, events[len(events)-1].Status)
			// The worker is done with the turn once its workflow is closed.
			_, err = turnclient.Result(ctx, e.Client().GetWorkflow(ctx, id, ""))
			require.NoError(t, err)

			// What says the turn was cancelled, by message: the workflow's
			// one line. (When the call's end and the cancel reach the
			// server together, it can refuse the workflow task that logged
			// it — UnhandledCommand — and the task runs, and logs, again.)
			cancels := map[string]bool{}
			for _, entry := range logs.All()[started:] {
				line := entry.Message
				for k, v := range entry.ContextMap() {
					line += " " + k + "=" + strings.ReplaceAll(fmt.Sprint(v), "\n", `\n`)
				}
				t.Logf("%s %s", entry.Level, line)
				require.Empty(t, entry.Stack, "no stack trace: %s", line)
				require.Less(t, entry.Level, zapcore.WarnLevel, "the cancel is no warning: %s", line)
				if strings.Contains(strings.ToLower(line), "cancel") {
					cancels[entry.Message] = true
				}
			}
			require.Equal(t, map[string]bool{"turn cancelled": true}, cancels, "one line says the turn was cancelled")
		})
	}
}
