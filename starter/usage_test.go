package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// usageScript answers "add A and B" with a calculator call and then the
// result, reporting usage with cached and reasoning tokens; "flaky"
// fails once before answering.
const usageScript = `
rules:
  - name: flaky
    when: {user: '^flaky'}
    fault: {status: 500, times: 1}
    reply: {text: 'Recovered.', usage: {prompt_tokens: 50, completion_tokens: 10}}
  - name: add
    when: {user: 'add (\d+) and (\d+)'}
    reply:
      tool_calls: [{name: calculator, arguments: '{"expression": "$1 + $2"}'}]
      usage: {prompt_tokens: 1000, completion_tokens: 100, cached_tokens: 600, reasoning_tokens: 40}
  - name: sum
    when: {tool: '(.+)'}
    reply: {text: 'The sum is $1.', usage: {prompt_tokens: 1200, completion_tokens: 20, cached_tokens: 1000}}
`

const usageCatalog = `
tenant: TENANT
default_agent: a
tools:
  - {name: calculator, kind: calculator}
agents:
  - {id: a, model: 'openai:gpt-4o-mini', tools: [calculator]}
prices:
  - {model: 'openai:gpt-4o-mini', input: 0.15, cached_input: 0.075, output: 0.6}
budgets:
  day: {tokens: LIMIT}
`

// TestUsageLedger: turns of two tenants with a tool call; the ledger has
// one row per model call with the provider's cached and reasoning tokens
// and the price table's cost; a call retried after a failed attempt is
// counted once; a tenant over its daily budget is refused before the
// model is called; GetUsage and starter usage show each tenant its own.
func TestUsageLedger(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	catalog := func(tenant, limit string) string {
		return strings.NewReplacer("TENANT", tenant, "LIMIT", limit).Replace(usageCatalog)
	}
	srv := testserver.Start(t, testserver.Options{
		Script:   usageScript,
		Catalogs: []string{catalog("demo", "1000000"), catalog("acme", "6000")},
		Tokens:   map[string]string{demoToken: "demo:user+admin", acmeToken: "acme:user+admin"},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	client := pb.NewAgentServiceClient(srv.Conn)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	invoke := func(token, job, prompt string) (*pb.TurnResult, error) {
		return client.Invoke(as(token), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: prompt}})
	}

	job := "add-" + newJobID()
	res, err := invoke(demoToken, job, "add 2 and 3")
	require.NoError(t, err)
	require.Equal(t, "The sum is 5.", res.GetOutput())
	require.True(t, res.GetMetadata().GetCacheHit(), "the provider read part of the prompt from its cache")
	require.Equal(t, int64(1600), res.GetMetadata().GetCachedTokens())
	require.Equal(t, int64(2320), res.GetMetadata().GetTokensUsed())

	calls, err := srv.Store().JobUsage(ctx, "demo", job)
	require.NoError(t, err)
	require.Len(t, calls, 2, "one row per model call")
	want := []agent.Usage{
		{PromptTokens: 1000, CompletionTokens: 100, TotalTokens: 1100, CachedTokens: 600, ReasoningTokens: 40},
		{PromptTokens: 1200, CompletionTokens: 20, TotalTokens: 1220, CachedTokens: 1000},
	}
	costs := []float64{(400*0.15 + 600*0.075 + 100*0.6) / 1e6, (200*0.15 + 1000*0.075 + 20*0.6) / 1e6}
	for i, c := range calls {
		require.Equal(t, want[i], c.Usage, "call %d", i)
		require.Equal(t, []any{"a", "openai:gpt-4o-mini", 1}, []any{c.AgentID, c.Model, c.Attempt})
		require.NotNil(t, c.Cost)
		require.InDelta(t, costs[i], *c.Cost, 1e-12)
	}
	require.Equal(t, 1, calls[0].Step, "step 0 is the prompt")
	require.Equal(t, 3, calls[1].Step, "step 2 is the tool result")

	// acme: a call whose first attempt fails is counted once, by the
	// attempt the model answered.
	flaky := "flaky-" + newJobID()
	res, err = invoke(acmeToken, flaky, "flaky question")
	require.NoError(t, err)
	require.Equal(t, "Recovered.", res.GetOutput())
	calls, err = srv.Store().JobUsage(ctx, "acme", flaky)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	require.Equal(t, 2, calls[0].Attempt)

	// acme's turn of 2320 tokens leaves too little of its 6000 a day for
	// a call's worst case (its prompt and 4096 output tokens); its next
	// turn fails BudgetExceeded and the model is not asked.
	_, err = invoke(acmeToken, "add-"+newJobID(), "add 4 and 5")
	require.NoError(t, err)
	served := len(srv.Model.Requests())
	over := "over-" + newJobID()
	res, err = invoke(acmeToken, over, "add 6 and 7")
	require.NoError(t, err)
	// The refusal is not retried: CallModel ran once, and failed. The call
	// is a local activity (the default): its marker records the attempt it
	// ended on, which a retry in the workflow task would raise, and a retry
	// after a longer backoff would record a second marker.
	var ran, failed int
	for _, ev := range testserver.History(ctx, t, srv.Client(), contract.TurnWorkflowID("acme", over), "") {
		m := ev.GetMarkerRecordedEventAttributes()
		if m.GetMarkerName() != "LocalActivity" {
			continue
		}
		var data struct {
			ActivityType string
			Attempt      int32
		}
		require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(m.GetDetails()["data"], &data))
		if data.ActivityType != contract.CallModel {
			continue
		}
		ran++
		require.Equal(t, int32(1), data.Attempt)
		if m.GetFailure() != nil {
			failed++
		}
	}
	require.Equal(t, []int{1, 1}, []int{ran, failed}, "CallModel ran and failed once")
	// As a turn over its token_budget does, the turn fails with the
	// error's type; the type's gRPC code is ResourceExhausted.
	require.Equal(t, agent.StatusFailed, res.GetStatus())
	require.Equal(t, agent.ErrTypeBudget, res.GetError().GetType())
	require.False(t, res.GetError().GetRetryable())
	require.Contains(t, res.GetError().GetMessage(), `tenant "acme" has used 2380 tokens this day (UTC); its day budget is 6000 tokens`)
	require.Equal(t, uint32(codes.ResourceExhausted), agent.CodeBudget.Class().GRPC)
	require.Equal(t, served, len(srv.Model.Requests()), "no model call for a tenant over its budget")
	// demo is not held back by acme's budget.
	_, err = invoke(demoToken, "add-"+newJobID(), "add 1 and 1")
	require.NoError(t, err)

	// GetUsage: each tenant sees its own calls.
	cat := pb.NewCatalogServiceClient(srv.Conn)
	usage, err := cat.GetUsage(as(demoToken), &pb.GetUsageRequest{SinceDuration: "1h", GroupBy: "model"})
	require.NoError(t, err)
	require.Len(t, usage.GetRows(), 1)
	total := usage.GetTotal()
	require.Equal(t, []int64{4, 4400, 240, 3200, 80}, []int64{total.GetCalls(), total.GetInputTokens(), total.GetOutputTokens(),
		total.GetCachedTokens(), total.GetReasoningTokens()})
	require.InDelta(t, 2*(costs[0]+costs[1]), total.GetCostUsd(), 1e-9)
	require.Equal(t, "day", usage.GetBudgets()[0].GetPeriod())
	require.Equal(t, int64(4640), usage.GetBudgets()[0].GetTokensUsed())

	usage, err = cat.GetUsage(as(acmeToken), &pb.GetUsageRequest{SinceDuration: "1h", GroupBy: "agent"})
	require.NoError(t, err)
	require.Equal(t, int64(3), usage.GetTotal().GetCalls())
	require.Equal(t, int64(2380), usage.GetBudgets()[0].GetTokensUsed())
	require.Equal(t, int64(6000), usage.GetBudgets()[0].GetTokenLimit())

	for name, req := range map[string]*pb.GetUsageRequest{
		"another tenant":   {Tenant: "acme", SinceDuration: "1h"},
		"no since":         {},
		"bad duration":     {SinceDuration: "yesterday"},
		"bad group":        {SinceDuration: "1h", GroupBy: "week"},
		"until before":     {Since: timestamppb.Now(), Until: timestamppb.New(time.Now().Add(-time.Hour))},
		"too long":         {SinceDuration: "400d"},
		"negative":         {SinceDuration: "-1h"},
		"since and period": {SinceDuration: "1h", Since: usage.GetSince()},
	} {
		_, err := cat.GetUsage(as(demoToken), req)
		require.Error(t, err, name)
		require.Contains(t, []codes.Code{codes.InvalidArgument, codes.PermissionDenied}, status.Code(err), "%s: %v", name, err)
	}
	_, err = cat.GetUsage(as(demoToken), &pb.GetUsageRequest{Tenant: "acme", SinceDuration: "1h"})
	require.Equal(t, codes.PermissionDenied, status.Code(err))

	// starter usage prints the table, and --json the response.
	out, err := starter(ctx, srv.GRPCAddr(), demoToken, "usage", "--tenant", "demo", "--since", "24h", "--by", "model")
	require.NoError(t, err)
	require.Contains(t, out, "usage of tenant demo from ")
	require.Regexp(t, `openai:gpt-4o-mini\s+4\s+4400\s+3200\s+240\s+80\s+0\.0005\d+`, out)
	require.Regexp(t, `total\s+4\s+4400\s+3200\s+240\s+80\s+`, out)
	require.Contains(t, out, "budget day (since ")
	require.Contains(t, out, "4640 of 1000000 tokens")

	out, err = starter(ctx, srv.GRPCAddr(), acmeToken, "usage", "--since", "24h", "--json")
	require.NoError(t, err)
	var doc struct {
		Tenant string
		Total  struct{ Calls string }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.Equal(t, "acme", doc.Tenant)
	require.Equal(t, "3", doc.Total.Calls)

	_, err = starter(ctx, srv.GRPCAddr(), demoToken, "usage", "--since", "24h", "--by", "week")
	require.ErrorContains(t, err, `group_by "week": want agent, model, day, session, channel or kind`)
}
