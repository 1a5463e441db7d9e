package contract_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
)

// TestFailureRoundTrip walks every domain code through Temporal: the
// application error carries the table's type and retryability, and reads
// back as the same code and message.
func TestFailureRoundTrip(t *testing.T) {
	for _, code := range agent.Codes() {
		t.Run(string(code), func(t *testing.T) {
			class := code.Class()
			err := contract.Failure(agent.Errorf(code, "what went wrong"))
			var app *temporal.ApplicationError
			require.True(t, errors.As(err, &app))
			require.Equal(t, class.Type, app.Type())
			require.Equal(t, !class.Retryable, app.NonRetryable())
			back := contract.ErrorOf(err)
			require.Equal(t, code, back.Code)
			require.Equal(t, "what went wrong", back.Message)
			te := agent.TurnErrorOf(back)
			require.Equal(t, class.Type, te.Type)
			require.Equal(t, class.Retryable, te.Retryable)
		})
	}
}

func TestFailure(t *testing.T) {
	t.Run("nil", func(t *testing.T) { require.NoError(t, contract.Failure(nil)) })
	t.Run("an error without a code is left to Temporal's retries", func(t *testing.T) {
		plain := errors.New("connection refused")
		require.Same(t, plain, contract.Failure(plain))
		require.Equal(t, agent.CodeInternal, contract.ErrorOf(plain).Code)
	})
	t.Run("a wrapped domain error keeps its context", func(t *testing.T) {
		err := contract.Failure(fmt.Errorf("load agent %q: %w", "x", agent.Errorf(agent.CodeAgentNotFound, "agent %q not found", "x")))
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app))
		require.Equal(t, agent.ErrTypeAgentNotFound, app.Type())
		require.Equal(t, `load agent "x": agent "x" not found`, app.Message())
	})
	t.Run("retry after", func(t *testing.T) {
		err := contract.Failure(&agent.Error{Code: agent.CodeModelFailed, Message: "429", RetryAfter: 3 * time.Second})
		var app *temporal.ApplicationError
		require.True(t, errors.As(err, &app))
		require.Equal(t, 3*time.Second, app.NextRetryDelay())
	})
	t.Run("cancellation and timeouts", func(t *testing.T) {
		require.Equal(t, agent.CodeCanceled, contract.ErrorOf(temporal.NewCanceledError()).Code)
		require.Equal(t, agent.CodeUnavailable, contract.ErrorOf(temporal.NewTimeoutError(0, nil)).Code)
	})
	t.Run("an unknown application error type", func(t *testing.T) {
		require.Equal(t, agent.CodeInternal, contract.ErrorOf(temporal.NewApplicationError("boom", "wrapError")).Code)
	})
}

func TestTurnFailureCarriesTheResult(t *testing.T) {
	res := agent.TurnResult{Version: "1.0", JobID: "j", Status: agent.StatusFailed,
		Error: &agent.TurnError{Type: agent.ErrTypeTokenBudget, Message: "over budget"}}
	err := contract.TurnFailure(res)
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app))
	require.Equal(t, agent.ErrTypeTokenBudget, app.Type())
	require.True(t, app.NonRetryable())
	got, ok := contract.FailedResult(err)
	require.True(t, ok)
	require.Equal(t, res, got)
	_, ok = contract.FailedResult(errors.New("not a turn"))
	require.False(t, ok)
}

// TestNamesDeclaredOnce: every name of the contract is written once in
// the code (outside tests), here; everything else refers to the constant.
func TestNamesDeclaredOnce(t *testing.T) {
	names := []string{
		contract.TaskQueue, contract.AgentTurn, contract.Conversation,
		contract.Route, contract.LoadAgent, contract.CallModel, contract.ExecuteTool, contract.SaveResult, contract.RecordApproval,
		contract.SignalTokens, contract.QueryEvents, contract.SignalApprove, contract.QueryPendingApprovals,
		contract.QueryPendingQuestions, contract.Evaluation, contract.BeginEval, contract.PrepareEvalCase, contract.PrepareReplay,
		contract.ScoreEvalCase, contract.FinishEval, contract.Delivery, contract.Deliver,
		contract.Retention, contract.SweepRetention, contract.MemoryExtract, contract.ExtractMemories,
		contract.Ingest, contract.IngestPage, contract.QueryIngestStatus, contract.Prepare,
		contract.SealStream, contract.Summarize, contract.AgentOnBusy, contract.InterruptModel, contract.SignalCancelTurn, contract.ObserveEvents,
		contract.SignalNotifyTokens, contract.UpdateSendMessage, contract.QueryTranscript,
		contract.UpdateStreamPoll, contract.QueryStreamOffset, contract.SignalStreamPublish,
		contract.SearchTenant.GetName(), contract.SearchAgent.GetName(), contract.SearchSession.GetName(),
		contract.SearchChannel.GetName(),
		contract.MetricTurns, contract.MetricAgentLatency, contract.MetricModelTokens, contract.MetricToolInvocations,
		contract.MetricApprovals, contract.MetricApprovalWait, contract.MetricRoutingMismatch,
		contract.MetricModelCalls, contract.MetricGuardrails,
	}
	seen := map[string][]string{}
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil // generated from the .proto: its words are the API's, not the contract's
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if field, ok := n.(*ast.Field); ok {
				// Struct tags are not names: walk the field without its tag.
				for _, x := range []ast.Node{field.Type} {
					ast.Inspect(x, func(m ast.Node) bool { record(fset, m, seen); return true })
				}
				return false
			}
			record(fset, n, seen)
			return true
		})
		return nil
	})
	require.NoError(t, err)
	// The starter's command and the WebSocket's command of the same name
	// are words of their own (a user's, not the workflow's).
	seen[contract.SignalApprove] = slices.DeleteFunc(seen[contract.SignalApprove], func(at string) bool {
		// The WebSocket's command and the words an A2A message decides with
		// are their protocols' words, not the signal's name.
		return strings.HasPrefix(at, filepath.Join(root, "starter")+string(filepath.Separator)) ||
			strings.HasPrefix(at, filepath.Join(root, "internal", "gateway", "ws")+string(filepath.Separator)) ||
			strings.HasPrefix(at, filepath.Join(root, "internal", "gateway", "a2a", "a2a_decide.go")+":")
	})
	// The name the gateway gives itself to other agents' clients is the
	// product's, not the task queue's.
	seen[contract.TaskQueue] = slices.DeleteFunc(seen[contract.TaskQueue], func(at string) bool {
		return strings.HasPrefix(at, filepath.Join(root, "internal", "gateway", "door.go")+":")
	})
	// The Nexus service's operations are its contract's words
	// (proto/agentflow/v1/agents.nexusrpc.yaml), not the workflows'.
	for name := range seen {
		seen[name] = slices.DeleteFunc(seen[name], func(at string) bool {
			return strings.HasPrefix(at, filepath.Join(root, "internal", "nexusdoor")+string(filepath.Separator))
		})
	}
	for _, name := range names {
		require.Len(t, seen[name], 1, "%q is written at %v; refer to the constant in internal/contract", name, seen[name])
		require.Contains(t, seen[name][0], filepath.Join("internal", "contract"), "%q", name)
	}
}

func record(fset *token.FileSet, n ast.Node, seen map[string][]string) {
	lit, ok := n.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return
	}
	if s, err := strconv.Unquote(lit.Value); err == nil {
		seen[s] = append(seen[s], fset.Position(lit.Pos()).String())
	}
}

// TestLinksNoAdapter: packages others build on link what they need and
// nothing heavier. The workflow package links the SDK, the domain, this
// contract and the event log: not the store, the model, CEL, the event
// log's Postgres live path, or the process's metrics
// and telemetry (Prometheus, the OpenTelemetry SDK and its OTLP exporter,
// zap), which a few names in the wrong home once pulled in. The catalog
// (internal/catalog) checks models against the domain's list of
// providers, not against the model clients (langchaingo).
func TestLinksNoAdapter(t *testing.T) {
	tests := []struct {
		pkg   string
		links string   // a package it does link: the list is not empty by mistake
		never []string // prefixes of packages it must not link
	}{
		{"../../workflows", "github.com/agentflow/agentflow/internal/contract", []string{
			"github.com/jackc/pgx", "github.com/tmc/langchaingo", "cel.dev/",
			"github.com/agentflow/agentflow/activities", "github.com/agentflow/agentflow/internal/store",
			"github.com/agentflow/agentflow/internal/metrics", "github.com/agentflow/agentflow/internal/telemetry",
			"github.com/prometheus/", "go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters/",
			"go.opentelemetry.io/proto/otlp", "go.uber.org/zap",
			"github.com/agentflow/agentflow/internal/eventlog/pglive",
		}},
		{"../catalog", "github.com/agentflow/agentflow/internal/agent", []string{"github.com/tmc/langchaingo", "github.com/agentflow/agentflow/internal/llm"}},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.pkg), func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", tt.pkg).CombinedOutput()
			require.NoError(t, err, string(out))
			deps := strings.Fields(string(out))
			require.Contains(t, deps, tt.links)
			for _, dep := range deps {
				for _, never := range tt.never {
					require.False(t, strings.HasPrefix(dep, never), "%s links %s", tt.pkg, dep)
				}
			}
		})
	}
}

func TestTurnDetails(t *testing.T) {
	long := strings.Repeat("x", 2010) // over the 2000 runes kept
	tests := []struct {
		name string
		req  agent.TurnRequest
		want string
	}{
		{"routed", agent.TurnRequest{TenantID: "t1", JobID: "j1", Prompt: "What is\n2 + 3?"},
			"tenant `t1` · agent `routed` · job `j1`\n\nWhat is\n2 + 3?"},
		{"session and process", agent.TurnRequest{TenantID: "t1", AgentID: "a", JobID: "j1", SessionID: "s1", RunID: "r1", NodeID: "n1", Prompt: "hi"},
			"tenant `t1` · agent `a` · job `j1` · session `s1` · process run `r1` node `n1`\n\nhi"},
		{"job envelope", agent.TurnRequest{TenantID: "t1", AgentID: "a", JobID: "j1", Model: "openai:gpt-4o", WorkflowOwner: "sdutt", UserID: "u7",
			RetryCount: 2, CreatedAt: "2024-10-12T10:30:00Z", Prompt: "hi",
			Context: agent.TurnContext{WorkflowState: json.RawMessage(`{ "current_step": 5, "total_steps": 10 }`)}},
			"tenant `t1` · agent `a` · job `j1` · model `openai:gpt-4o` · owner `sdutt` · user `u7` · retry 2 · created 2024-10-12T10:30:00Z · " +
				"workflow state `{\"current_step\":5,\"total_steps\":10}`\n\nhi"},
		{"long prompt", agent.TurnRequest{TenantID: "t1", AgentID: "a", Prompt: long},
			"tenant `t1` · agent `a`\n\n" + long[:2000-1] + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, contract.TurnDetails(tt.req))
		})
	}
}
