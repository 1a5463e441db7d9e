package ownmodel_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/examples/ownmodel"
	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// unused is the scripted model's script: the test's agent never calls it.
const unused = "rules:\n  - name: any\n    reply: {text: 'the scripted model'}\n"

// TestOwnModel runs a turn of an agent whose model is the example's
// provider: its answer streams as events, its usage is counted, and the
// scripted model is never called.
func TestOwnModel(t *testing.T) {
	catalog, err := os.ReadFile("catalog.yaml")
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{Script: unused, Catalogs: []string{string(catalog)}, Models: ownmodel.Options().Models})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req := agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo", Prompt: "How long does a refund take?", JobID: "faq-" + testserver.RandomID()}
	run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, req)
	require.NoError(t, err)
	res, err := turnclient.Result(ctx, run)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "Refunds take 5 to 7 working days.", res.Output)
	require.Equal(t, 13, res.Metadata.TokensUsed, "the provider's count: six words asked, seven answered")
	require.Equal(t, "faq:v1", res.Metadata.LLMModel)
	require.Empty(t, srv.Model.Requests(), "the scripted model was not called")

	page, err := turnclient.Events(ctx, srv.Client(), run.GetID(), agent.EventsQuery{})
	require.NoError(t, err)
	var text strings.Builder
	tokens := 0
	for _, ev := range page.Events {
		if ev.Kind == agent.EventToken {
			tokens++
			text.WriteString(ev.Text)
		}
	}
	require.Equal(t, res.Output, text.String(), "the answer streamed")
	require.Positive(t, tokens)
}
