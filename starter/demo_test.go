package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/flights"
	"github.com/agentflow/agentflow/internal/testserver"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// TestDemo runs `starter demo` as `task demo` does under CI, against the
// test stack: the scripted model calls the calculator and the answer is
// printed.
func TestDemo(t *testing.T) {
	address, namespace := devtest.Temporal(t)
	t.Setenv("DATABASE_URL", devtest.Database(t))
	t.Setenv("TEMPORAL_ADDRESS", address)
	t.Setenv("TEMPORAL_NAMESPACE", namespace)
	t.Setenv("AGENTFLOW_TASK_QUEUE", "demo-test-"+testserver.RandomID())
	t.Setenv("AGENTFLOW_HTTP_ADDR", "off")
	t.Setenv("AGENTFLOW_GRPC_ADDR", "127.0.0.1:0")
	t.Setenv("AGENTFLOW_HTTP_API_ADDR", "127.0.0.1:0")
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST", "AGENTFLOW_SCRIPT", "AGENTFLOW_DEMO_MODEL"} {
		t.Setenv(k, "")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, []string{"demo", "-catalog", "../catalog", "-wait=false"}, &out)
	require.NoError(t, err, "demo output:\n%s", out.String())
	require.Contains(t, out.String(), "tool calculator")
	require.Contains(t, out.String(), "12.5 * 4 = 50")
	require.Contains(t, out.String(), "2.475")
	require.Contains(t, out.String(), "waiting for approval of checked_calculator")
	require.Contains(t, out.String(), "1200 * 1.07 = 1284")
	require.Contains(t, out.String(), "The demo session passed", "a newcomer under CI=true sees it succeed")
	require.Contains(t, out.String(), "Web UI:", "and where to look")
	require.Regexp(t, `Chat page: http://127\.0\.0\.1:\d+/chat \(signed in with dev-token\)`, out.String(), "and the chat page's link, signed in")
	require.Regexp(t, `Turns:     http://127\.0\.0\.1:\d+/turns `, out.String(), "and the turns page's")

	// The data agent: the flights fetched, sorted and kept by ref, then
	// filtered by ref in the session's next turn.
	best := cheapest("NYC", "LAX")
	require.Contains(t, out.String(), "tool execute_pipeline")
	require.Contains(t, out.String(), fmt.Sprintf("Found 3 flights. The first is %s at $%d", best[0].Airline, best[0].Price))
	require.Contains(t, out.String(), "a dataset of 3 rows")
	under := 0
	for _, f := range best[:3] {
		if f.Price < 230 {
			under++
		}
	}
	require.Contains(t, out.String(), fmt.Sprintf("Found %d flights.", under))
	require.Contains(t, out.String(), fmt.Sprintf("a dataset of %d rows", under))
	require.Less(t, under, 3, "the filter keeps some of the three, not all")

	// What a newcomer reads agrees with itself: the Try list filters as
	// the demo did (in single quotes, which keep the shell off "$230"),
	// one approval names one approver, and the model calls of a turn are
	// numbered 1, 2 (the turn's step numbers, which tool calls share, go
	// 1, 3).
	filters := regexp.MustCompile(`now filter those under \$(\d+)`).FindAllStringSubmatch(out.String(), -1)
	require.Len(t, filters, 2, "the demo's filter and the Try list's")
	require.Equal(t, filters[0][1], filters[1][1])
	require.Contains(t, out.String(), `'now filter those under $`+filters[0][1]+`'`)
	require.Equal(t, 1, strings.Count(out.String(), "approved by "), "one approver for one approval")
	require.Contains(t, out.String(), "  [model call 1: tool_calls, ")
	require.Contains(t, out.String(), "  [model call 2: stop, ")
	require.NotContains(t, out.String(), "[step ")
}

// cheapest is the sample API's flights by price.
func cheapest(origin, dest string) []flights.Flight {
	fs := flights.Search(origin, dest)
	slices.SortStableFunc(fs, func(a, b flights.Flight) int { return a.Price - b.Price })
	return fs
}

func TestRunRejectsBadInputBeforeStarting(t *testing.T) {
	var out bytes.Buffer
	err := run(context.Background(), []string{"run", "--tenant", "demo", "--address", "127.0.0.1:1"}, &out)
	require.ErrorContains(t, err, "prompt is required")
	// Ids agentflow's doors derive are not the CLI's to name.
	for flag, id := range map[string]string{"--job": "af:telegram:0123", "--session": "af:telegram:assistant:tg:1:1"} {
		err = run(context.Background(), []string{"run", "--tenant", "demo", "--address", "127.0.0.1:1", flag, id, "hi"}, &out)
		require.ErrorContains(t, err, flag+` "`+id+`" begins with "af:", which is reserved`)
	}
}

// TestDemoProduction runs `starter demo --production`: the same session on
// the real Temporal server with two worker processes and a gateway process.
func TestDemoProduction(t *testing.T) {
	state, err := os.MkdirTemp("", "demo-production-*")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(state) })
	t.Setenv("DATABASE_URL", "")
	t.Setenv("TEMPORAL_ADDRESS", "")
	t.Setenv("AGENTFLOW_GRPC_ADDR", "127.0.0.1:0")
	t.Setenv("AGENTFLOW_HTTP_API_ADDR", "127.0.0.1:0")
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST", "AGENTFLOW_SCRIPT", "AGENTFLOW_DEMO_MODEL", "AGENTFLOW_TOKENS"} {
		t.Setenv(k, "")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err = run(ctx, []string{"demo", "-catalog", "../catalog", "-wait=false", "-production", "-state", state, "-temporal-port", "0"}, &out)
	require.NoError(t, err, "demo output:\n%s", out.String())
	require.Contains(t, out.String(), "two workers and a gateway")
	require.Contains(t, out.String(), "12.5 * 4 = 50")
	require.Contains(t, out.String(), "1200 * 1.07 = 1284")
	require.Contains(t, out.String(), "a dataset of 3 rows")
	for _, name := range []string{"worker-1.log", "worker-2.log", "gateway-1.log", "temporal-server.log"} {
		require.FileExists(t, filepath.Join(state, name))
	}
}

// The dev server's storage is file or memory; anything else is refused
// before anything starts.
func TestUpRefusesUnknownTemporalDB(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"up", "--temporal-db", "disk"}, &out)
	require.ErrorContains(t, err, `--temporal-db "disk": want file or memory`)
	require.Empty(t, out.String(), "nothing started")
}
