package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestEvalHarness: the sample dataset passes on the demo assistant; a
// broken version (one that lost its calculator) fails it, with a report
// that says which case and check failed and what the answer was, an exit
// status of 1, and a comparison that points at the change. A malformed
// dataset is refused before anything runs.
func TestEvalHarness(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	demo, err := os.ReadFile(filepath.Join("..", "catalog", "demo.yaml"))
	require.NoError(t, err)
	srv := testserver.Start(t, testserver.Options{
		Script: string(scripted.DemoYAML()), Catalogs: []string{string(demo)},
		Tokens: map[string]string{demoToken: "demo:user+admin:ci", acmeToken: "acme:user"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	addr := srv.GRPCAddr()
	dataset := filepath.Join("..", "examples", "evals", "assistant.yaml")
	eval := func(args ...string) (string, error) {
		return starter(ctx, addr, demoToken, append([]string{"eval"}, args...)...)
	}
	dir := t.TempDir()

	out, err := eval("run", "-f", dataset, "--id", "ci-good", "--report", filepath.Join(dir, "good.html"))
	require.NoError(t, err, out)
	require.Contains(t, out, "| v1 | 100% | 4/4 |")
	for _, c := range []string{"multiply", "divide", "greeting", "judged"} {
		require.Regexp(t, "\\| `"+c+"` \\| pass, \\d+ ms, \\d+ tokens \\|", out)
	}
	html, err := os.ReadFile(filepath.Join(dir, "good.html"))
	require.NoError(t, err)
	require.Contains(t, string(html), "<h1>Evaluation ci-good</h1>")
	judge, err := srv.Store().JobUsage(ctx, "demo", "eval:ci-good:judged:v1:judge")
	require.NoError(t, err)
	require.Len(t, judge, 1, "the judge's call is in the usage ledger")

	// Version 2 lost its calculator.
	srv.ApplyCatalog(t, strings.Replace(string(demo), "tools: [calculator, ask_user]", "tools: [ask_user]", 1))
	out, err = eval("run", "-f", dataset, "--version", "1", "--against", "2", "--id", "ci-broken", "--concurrency", "8")
	require.Equal(t, exitError(1), err, out)
	for _, want := range []string{
		"| v1 | 100% | 4/4 |",
		"| v2 | 25% | 1/4 |",
		"## Changed between the versions",
		"- `multiply`: passes on v1, fails on v2 (answer exact)",
		"- `judged`: passes on v1, fails on v2 (answer judge)",
		"- ✗ answer judge: the answer gives no number.",
		"### `multiply` on v2 (completed)",
		`- ✗ answer exact: answered "The tool said: error:`,
		`want "12.5 * 4 = 50"`,
		"- turn: `ci-broken-v2-multiply`",
		"| `greeting` | pass,",
	} {
		require.Contains(t, out, want)
	}
	shown, err := eval("show", "ci-broken")
	require.Equal(t, exitError(1), err)
	require.Equal(t, out, shown, "show prints the stored run's report")

	_, err = eval("run", "-f", dataset, "--version", "2", "--id", "ci-v2")
	require.Equal(t, exitError(1), err)
	cmp, err := eval("compare", "ci-good", "ci-v2")
	require.NoError(t, err)
	require.Contains(t, cmp, "| ci-good | assistant v1 | 100% | 4/4 |")
	require.Contains(t, cmp, "| `multiply` ⟵ changed | pass | FAIL: answer exact |")

	// Refused before anything runs: a malformed case, an unknown version,
	// a token without the admin role, another tenant's run.
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\nagent: assistant\ncases:\n  - id: one\n    prompt: hi\n    expect: {answer: {exact: hi}}\n  - id: two\n    prompt: hi\n    expect: {answer: {regex: '('}}\n"), 0o644))
	_, err = eval("run", "-f", bad, "--id", "ci-bad")
	require.ErrorContains(t, err, "cases[1] (id two): expect.answer.regex: error parsing regexp")
	_, err = eval("show", "ci-bad")
	require.ErrorContains(t, err, `evaluation "ci-bad" not found`)
	require.NoError(t, os.WriteFile(bad, []byte("name: bad\ncases:\n  - id: one\n    promt: hi\n"), 0o644))
	_, err = eval("run", "-f", bad, "--agent", "assistant")
	require.ErrorContains(t, err, `cases[0] (line 3): json: unknown field "promt"`)
	_, err = eval("run", "-f", dataset, "--version", "9")
	require.ErrorContains(t, err, "version 9")
	_, err = starter(ctx, addr, acmeToken, "eval", "show", "ci-good")
	require.ErrorContains(t, err, "needs the role admin")
}
