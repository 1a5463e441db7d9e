package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestDeliveriesCommand: starter deliveries prints a turn's deliveries
// and their attempts, a receiver's 503 retried and then taken; the same
// turn asked for with another tenant's token is not found.
func TestDeliveriesCommand(t *testing.T) {
	t.Setenv("DELIVERIES_HOOK_KEY", "hook-key-1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	}))
	defer hook.Close()
	catalog := `tenant: demo
default_agent: a
egress: ["127.0.0.1"]
agents:
  - id: a
    model: openai:gpt-4o-mini
    deliver:
      - {name: hook, kind: webhook, url: '` + hook.URL + `', secret: 'env:DELIVERIES_HOOK_KEY', always: true}
`
	srv := testserver.Start(t, testserver.Options{
		Script: "rules:\n  - reply: {text: 'Done.'}\n", Catalogs: []string{catalog, "tenant: acme\ndefault_agent: a\nagents:\n  - {id: a, model: openai:gpt-4o-mini}\n"},
		Tokens: map[string]string{demoToken: "demo", acmeToken: "acme"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	started, err := pb.NewAgentServiceClient(srv.Conn).Start(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+demoToken),
		&pb.StartRequest{Turn: &pb.TurnRequest{Prompt: "hi"}})
	require.NoError(t, err)
	stream := started.GetStreamId()
	require.Eventually(t, func() bool {
		_, err := srv.Client().DescribeWorkflowExecution(ctx, contract.DeliveryWorkflowID(stream), "")
		return err == nil
	}, time.Minute, 100*time.Millisecond)
	require.NoError(t, srv.Client().GetWorkflow(ctx, contract.DeliveryWorkflowID(stream), "").Get(ctx, nil))

	out, err := starter(ctx, srv.GRPCAddr(), demoToken, "deliveries", stream)
	require.NoError(t, err, out)
	require.Regexp(t, regexp.MustCompile(`(?m)^hook +webhook +delivered +2 attempts *\n +#1 +retrying +503 +\S+ +answered 503: not yet\n +#2 +delivered +200 +\S+ *\n$`), out)

	_, err = starter(ctx, srv.GRPCAddr(), acmeToken, "deliveries", stream)
	require.Error(t, err)
	require.Contains(t, err.Error(), "not found")
	_, err = starter(ctx, srv.GRPCAddr(), demoToken, "deliveries")
	require.ErrorContains(t, err, "want one turn id")
}
