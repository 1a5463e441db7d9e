package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkworker "go.temporal.io/sdk/worker"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/examples/process"
	"github.com/agentflow/agentflow/internal/flights"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestDataRecipes runs the data recipes of docs/concepts/tools-and-data.md
// (data by reference) and docs/guides/tools.md (composites) with the sample
// catalog, the demo model and the sample flights API where the catalog
// expects it.
func TestDataRecipes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	api, err := flights.Start(flightsAddr)
	require.NoError(t, err)
	defer api.Close()
	files, err := filepath.Glob(filepath.Join("..", "catalog", "*.yaml"))
	require.NoError(t, err)
	var catalogs []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		catalogs = append(catalogs, string(b))
	}
	srv := testserver.Start(t, testserver.Options{
		Script:   string(scripted.DemoYAML()),
		Catalogs: catalogs,
		Tokens:   map[string]string{"tok": "demo"},
		Logger:   zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	best := cheapest("NYC", "LAX")

	// go run ./starter chat --agent data --session trip "…", twice.
	session := "trip-" + newJobID()
	chat := func(prompt string) string {
		var out strings.Builder
		require.NoError(t, run(ctx, []string{"chat", "--addr", srv.GRPCAddr(), "--token", "tok", "--agent", "data", "--session", session, prompt}, &out))
		return out.String()
	}
	out := chat("fetch flights from NYC to LAX, sort by price, show top 3")
	require.Contains(t, out, `"step":"top_k","k":3`)
	require.Contains(t, out, "a dataset of 3 rows")
	require.Contains(t, out, fmt.Sprintf("Found 3 flights. The first is %s at $%d", best[0].Airline, best[0].Price))
	m := regexp.MustCompile(`data (cas://sha256:[0-9a-f]{64}): a dataset`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	ref := m[1]

	out = chat("now filter those under $230")
	require.Contains(t, out, `"input_ref":"`+ref+`"`)
	require.Contains(t, out, `"step":"table_filter"`)
	under := 0
	for _, f := range best[:3] {
		if f.Price < 230 {
			under++
		}
	}
	require.Contains(t, out, fmt.Sprintf("Found %d flights.", under))

	// A pipeline run again becomes a tool; search_tools finds it.
	out = chat("fetch flights from SFO to SEA, sort by price, show top 3")
	require.Contains(t, out, "saved as the tool search_sorted_top")
	out = chat("find a tool for cheap flights sorted by price")
	require.Contains(t, out, "search_sorted_top (composite_pipeline; you can call it): A saved pipeline: GET http://127.0.0.1:8089/search with dest, origin")

	// temporal workflow execute --type AgentProcessExample … with a data question.
	queue := "examples-" + newJobID()
	w := sdkworker.New(srv.Client(), queue, sdkworker.Options{})
	process.Register(w)
	require.NoError(t, w.Start())
	defer w.Stop()
	res, err := srv.Temporal("workflow", "execute", "--type", "AgentProcessExample", "--task-queue", queue,
		"--workflow-id", "process-"+newJobID(),
		"--input", `{"tenant_id":"demo","question":"fetch flights from NYC to LAX, sort by price, show top 3","task_queue":"`+srv.TaskQueue+`"}`)
	require.NoError(t, err, res)
	require.Contains(t, res, fmt.Sprintf("Found 1 flights. The first is %s at $%d", best[0].Airline, best[0].Price), "the check read the answer's data by ref")
}
