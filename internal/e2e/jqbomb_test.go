package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// peakRSS is this process's VmHWM: the in-process worker's peak.
func peakRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// TestJQBombs is finding 8 of issue 24 on the real stack: four turns at
// once run a jq_transform that doubles a string 29 times (512 MiB); each
// ends with the tool's error naming the budget, and the worker's peak RSS
// grows by no more than four plain turns make it grow (measured: about
// 65 MiB under -race, bombs or not; before the budget a single bomb took
// the worker to 2.4 GB).
func TestJQBombs(t *testing.T) {
	key := "flights-key-" + testserver.RandomID()
	t.Setenv("TEST_FLIGHTS_KEY", key)
	api := startFlights(t, key)
	bomb := `  - name: bomb
    when: {user: '(?i)^jq bomb (?P<n>[0-9])'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "b${n}", "pipeline": [{"step": "http_request", "url": "API/search", "params": {"origin": "NYC", "dest": "LAX"}}, {"step": "jq_transform", "query": "reduce range(29) as $$i (\"a${n}\"; . + .)"}]}'
`
	srv := testserver.Start(t, testserver.Options{
		Script:   strings.ReplaceAll(strings.Replace(dataScript, "rules:\n", "rules:\n"+bomb, 1), "API", api.URL),
		Catalogs: []string{strings.ReplaceAll(dataCatalog, "API", strings.TrimPrefix(api.URL, "http://"))},
		Logger:   zap.NewNop(),
	})
	before := peakRSS(t)
	outs := make([]string, 4)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo",
				JobID: "bomb-" + testserver.RandomID(), Prompt: "jq bomb " + strconv.Itoa(i)})
			require.NoError(t, err)
			res, err := turnclient.Result(ctx, run)
			require.NoError(t, err)
			outs[i] = res.Output
		})
	}
	wg.Wait()
	for i, out := range outs {
		require.Equal(t, `The tool said: execute_pipeline: step 1 (jq_transform): query "reduce range(29) as $i (\"a`+strconv.Itoa(i)+
			`\"; . + .)" used more than 256 MiB of memory (the per-call budget); make it build less: no repeated doubling, deep recursion or large ranges`, out)
	}
	require.Less(t, peakRSS(t)-before, int64(256<<20), "the budget plus a margin: the bombs' memory was the jq children's")
}
