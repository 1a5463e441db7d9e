package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/turnclient"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// directTurn is the floor: the same turn — model, calculator, model — run
// in-process with langchaingo, no durability.
func directTurn(ctx context.Context, model llm.Model, reg *tools.Registry, calc agent.Tool, id string) (string, error) {
	msgs := []agent.Message{{Role: agent.RoleSystem, Content: "You are benchmarked."}, {Role: agent.RoleUser, Content: "calc " + id}}
	for range 3 {
		resp, err := model.Generate(ctx, llm.Request{Model: "openai:gpt-4o-mini", Messages: msgs, Tools: []agent.Tool{calc}})
		if err != nil {
			return "", err
		}
		if len(resp.Message.ToolCalls) == 0 {
			return resp.Message.Content, nil
		}
		msgs = append(msgs, resp.Message)
		for _, tc := range resp.Message.ToolCalls {
			out, err := reg.Execute(ctx, calc, tools.Call{Args: json.RawMessage(tc.Arguments)})
			if err != nil {
				return "", err
			}
			msgs = append(msgs, agent.Message{Role: agent.RoleTool, ToolCallID: tc.ID, Name: tc.Name, Content: out.Text})
		}
	}
	return "", fmt.Errorf("no answer")
}

// BenchmarkTurnOverhead runs one agent turn with one tool call directly,
// as an AgentTurn started from Go, and through the gateway's Invoke, and
// reports each path's p50/p99 and what durability adds.
func BenchmarkTurnOverhead(b *testing.B) {
	st := newStack(b)
	ctx := context.Background()
	model, err := llm.New(llm.Config{OpenAIBaseURL: st.Model.URL(), OpenAIAPIKey: "bench"})
	must(b, err)
	reg, err := tools.NewRegistry(tools.Deps{Logger: zap.NewNop()}, tools.Builtin()...)
	must(b, err)
	ag, err := st.Store().ActiveAgent(ctx, "demo", "assistant")
	must(b, err)
	calc := ag.Tools[0]
	api := pb.NewAgentServiceClient(st.Conn)
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer bench-token")
	noStream := false

	paths := []struct {
		name string
		run  func(id string) (string, error)
	}{
		{"direct", func(id string) (string, error) { return directTurn(ctx, model, reg, calc, id) }},
		{"agentturn", func(id string) (string, error) {
			req := agent.TurnRequest{TenantID: "demo", JobID: "ovh-" + id, Prompt: "calc " + id, Stream: &noStream}
			req.Normalize()
			run, err := st.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(st.TaskQueue, req), contract.AgentTurn, req)
			if err != nil {
				return "", err
			}
			var res agent.TurnResult
			err = run.Get(ctx, &res)
			return res.Output, err
		}},
		{"invoke", func(id string) (string, error) {
			res, err := api.Invoke(actx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: "inv-" + id, Prompt: "calc " + id, Stream: &noStream}})
			return res.GetOutput(), err
		}},
	}
	medians := map[string]time.Duration{}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			for range b.N {
				// Warm up connections and caches first.
				for range 3 {
					if _, err := p.run(testserver.RandomID()); err != nil {
						b.Fatal(err)
					}
				}
				var d []time.Duration
				for range samples {
					start := time.Now()
					out, err := p.run(testserver.RandomID())
					if err != nil {
						b.Fatal(err)
					}
					if out != "result 50" {
						b.Fatalf("%s answered %q", p.name, out)
					}
					d = append(d, time.Since(start))
				}
				medians[p.name] = percentile(d, 0.5)
				b.ReportMetric(ms(percentile(d, 0.5)), "p50-ms")
				b.ReportMetric(ms(percentile(d, 0.99)), "p99-ms")
				if base, ok := medians["direct"]; ok && p.name != "direct" {
					b.ReportMetric(ms(percentile(d, 0.5)-base), "added-p50-ms")
					b.ReportMetric(float64(percentile(d, 0.5))/float64(base), "ratio-p50")
				}
			}
		})
	}
}

// BenchmarkTurnHistory reports the events and bytes one turn with one
// tool call writes to its history, with and without streaming.
func BenchmarkTurnHistory(b *testing.B) {
	st := newStack(b)
	ctx := context.Background()
	for _, streamed := range []bool{false, true} {
		b.Run(map[bool]string{false: "unstreamed", true: "streamed"}[streamed], func(b *testing.B) {
			for range b.N {
				id := testserver.RandomID()
				s := streamed
				req := agent.TurnRequest{TenantID: "demo", JobID: "hist-" + id, Prompt: "calc " + id, Stream: &s}
				req.Normalize()
				run, err := st.Client().ExecuteWorkflow(ctx, turnclient.StartOptions(st.TaskQueue, req), contract.AgentTurn, req)
				must(b, err)
				must(b, run.Get(ctx, nil))
				events, size := testserver.History(ctx, b, st.Client(), run.GetID(), ""), 0
				for _, ev := range events {
					size += proto.Size(ev)
				}
				b.ReportMetric(float64(len(events)), "events")
				b.ReportMetric(float64(size), "bytes")
			}
		})
	}
}
