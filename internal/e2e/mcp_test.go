package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.uber.org/zap"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/tools/mcptest"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// mcpScript drives an agent granted an issue tracker's tools (an MCP
// server over HTTP) and a file reader's (an MCP server over stdio).
const mcpScript = `
pacing: {chunk_words: 4, delay_ms: 2}
rules:
  - name: triage
    when: {user: '(?i)^triage the (?P<word>\w+) issues'}
    reply:
      tool_calls:
        - {name: gh_search, arguments: '{"query": "${word}"}'}
        - {name: gh_get_issue, arguments: '{"number": 1}'}
  - name: runbook
    when: {tool: '^#1 (?P<title>.+)\nstate: (?P<state>\w+)'}
    reply:
      tool_calls:
        - {name: files_read_file, arguments: '{"path": "runbook.txt"}'}
  - name: answer
    when: {tool: '^RUNBOOK: (.+)$'}
    reply: {text: 'Issue #1 is open; the runbook says: $1'}
  - name: slow
    when: {user: '(?i)^work for (?P<ms>\d+) ms'}
    reply:
      tool_calls:
        - {name: gh_slow, arguments: '{"ms": ${ms}}'}
  - name: worked
    when: {tool: '^worked for (\d+) ms$'}
    reply: {text: 'Done: worked for $1 ms.'}
  - name: lookup
    when: {user: '(?i)^look up issue (?P<n>\d+)'}
    reply:
      tool_calls:
        - {name: gh_get_issue, arguments: '{"number": ${n}}'}
  - name: read
    when: {user: '(?i)^read the file (?P<path>\S+)'}
    reply:
      tool_calls:
        - {name: files_read_file, arguments: '{"path": "${path}"}'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
  - name: fallback
    reply: {text: "I don't know."}
`

// mcpCatalog grants the agent both servers' tools. @URL, @HOST and @EXE
// stand for the issue tracker's endpoint and host:port and the stdio
// server's executable; @ROOT for the folder it reads.
const mcpCatalog = `
tenant: demo
default_agent: triage
egress: ["@HOST"]
tools:
  - name: gh
    kind: mcp
    approval: never
    config:
      url: "@URL"
      tools: [search, get_issue, slow]
      headers: [{name: Authorization, prefix: "Bearer ", secret: "env:TEST_MCP_TOKEN"}]
      timeout_sec: 30
  - name: files
    kind: mcp
    approval: never
    config:
      command: ["@EXE", --root, "@ROOT"]
      tools: [read_file]
      env: [{name: FILES_TOKEN, secret: "env:TEST_MCP_TOKEN"}]
agents:
  - id: triage
    model: openai:gpt-4o-mini
    tools: [gh, files]
    limits: {max_iterations: 4, turn_timeout_sec: 90}
`

// mcpEnv is a worker whose agent uses two real MCP servers.
type mcpEnv struct {
	*dataEnv
	issues  *mcptest.HTTPServer
	started chan string // the tools whose calls the issue tracker started
	catalog string
}

func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	token := "mcp-token-" + testserver.RandomID() + testserver.RandomID()
	t.Setenv("TEST_MCP_TOKEN", token)
	started := make(chan string, 16)
	issues := mcptest.StartHTTP(t, mcptest.Options{Token: token, OnCall: func(tool string) {
		select {
		case started <- tool:
		default:
		}
	}})
	files := mcptest.BuildStdio(t)
	root := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(root, "runbook.txt"), []byte("RUNBOOK: restart the SSO proxy, then clear the sessions."), 0o644))
	catalog := strings.NewReplacer("@URL", issues.URL, "@HOST", issues.Addr, "@EXE", files, "@ROOT", root).Replace(mcpCatalog)

	logger, log := keptLog(t, zap.ErrorLevel)
	srv := testserver.Start(t, testserver.Options{
		Script:      mcpScript,
		Catalogs:    []string{catalog},
		Logger:      logger,
		MCPCommands: []string{files},
	})
	return &mcpEnv{dataEnv: &dataEnv{env: &env{Server: srv, t: t}, key: token, log: log}, issues: issues, started: started, catalog: catalog}
}

// TestMCPTurn: a turn of an agent granted two MCP servers' tools calls two
// of the HTTP server's tools at once and then one of the stdio server's,
// and answers from what they returned. The server's token is in no
// history, table or log.
func TestMCPTurn(t *testing.T) {
	e := newMCPEnv(t)

	// The catalog resolved the entries into the servers' tools.
	ag, err := e.Store().ActiveAgent(context.Background(), "demo", "triage")
	require.NoError(t, err)
	var names []string
	for _, tool := range ag.Tools {
		names = append(names, tool.Name+"<"+tool.Entry())
	}
	require.Equal(t, []string{"gh_search<gh", "gh_get_issue<gh", "gh_slow<gh", "files_read_file<files"}, names)

	res, id := e.run(agent.TurnRequest{JobID: "triage-" + testserver.RandomID(), Prompt: "triage the SSO issues"})
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "Issue #1 is open; the runbook says: restart the SSO proxy, then clear the sessions.", res.Output)
	var calls []string
	for _, c := range res.Metadata.ToolCalls {
		require.Equal(t, agent.ToolOK, c.Status, c.Tool)
		calls = append(calls, c.Tool)
	}
	require.Equal(t, []string{"gh_search", "gh_get_issue", "files_read_file"}, calls)
	require.Equal(t, 1, e.issues.Calls("search"))
	require.Equal(t, 1, e.issues.Calls("get_issue"))

	// The search's structured content is kept as data; the model read its
	// text.
	steps, err := e.Store().Steps(context.Background(), "demo", res.JobID)
	require.NoError(t, err)
	var search string
	for _, s := range steps {
		if s.Role == agent.RoleTool && s.Name == "gh_search" {
			search = s.Content
		}
	}
	require.Contains(t, search, "2 issues match \"SSO\":\n#1 Login fails with SSO (open)\n#3 SSO logout leaves a session (open)")

	// tool_start names the entry the tool comes from.
	page, err := turnclient.Events(context.Background(), e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	sources := map[string]string{}
	for _, ev := range page.Events {
		if ev.Kind == agent.EventToolStart {
			sources[ev.Tool.Name] = ev.Tool.Source
		}
	}
	require.Equal(t, map[string]string{"gh_search": "gh", "gh_get_issue": "gh", "files_read_file": "files"}, sources)

	e.requireNoSecret(e.key)
}

// TestMCPServerKilledMidCall: the server dies while a tool works; the
// ExecuteTool attempt fails as Unavailable and is retried, since the
// server annotates the tool idempotent (TestMCPWritesOnce has one that is
// not: it is not sent again); the server is back on the same port by
// then, and the turn completes with one result.
func TestMCPServerKilledMidCall(t *testing.T) {
	e := newMCPEnv(t)
	job := "slow-" + testserver.RandomID()
	done := make(chan struct{})
	var res agent.TurnResult
	var id string
	go func() {
		defer close(done)
		res, id = e.run(agent.TurnRequest{JobID: job, Prompt: "work for 1500 ms"})
	}()
	select {
	case tool := <-e.started:
		require.Equal(t, "slow", tool)
	case <-time.After(time.Minute):
		t.Fatal("the tool was not called")
	}
	e.issues.Kill()
	require.NoError(t, e.issues.Restart())
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the turn did not end")
	}

	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	require.Equal(t, "Done: worked for 1500 ms.", res.Output)
	require.Equal(t, 2, e.issues.Calls("slow"), "the killed call, then the retried one")
	require.Len(t, res.Metadata.ToolCalls, 1)
	require.Equal(t, agent.ToolOK, res.Metadata.ToolCalls[0].Status)
	count, status, _, _ := e.resultRows(job)
	require.Equal(t, 1, count, "one result")
	require.Equal(t, string(agent.StatusCompleted), status)

	// The history shows the retry: ExecuteTool started a second attempt.
	attempts := 0
	for _, ev := range e.history(id) {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED {
			attempts = max(attempts, int(ev.GetActivityTaskStartedEventAttributes().GetAttempt()))
		}
	}
	require.Equal(t, 2, attempts)

	// The server's progress notifications reached the turn's events.
	page, err := turnclient.Events(context.Background(), e.Client(), id, agent.EventsQuery{})
	require.NoError(t, err)
	var progress []string
	for _, ev := range page.Events {
		if ev.Kind == agent.EventToolProgress && ev.Tool.Name == "gh_slow" {
			progress = append(progress, ev.Tool.Message)
		}
	}
	require.NotEmpty(t, progress)
	require.Contains(t, strings.Join(progress, "\n"), " of 4 (")
	e.requireNoSecret(e.key)
}

// TestMCPToolError: a result the server marks isError, over HTTP and
// over stdio, reaches the model as the tool's error, and the turn goes
// on; the activity is not retried for it.
func TestMCPToolError(t *testing.T) {
	e := newMCPEnv(t)
	for _, tc := range []struct {
		prompt, tool, said string
	}{
		{"look up issue 9", "gh_get_issue", "The tool said: gh_get_issue: there is no issue #9"},
		{"read the file missing.txt", "files_read_file", `The tool said: files_read_file: no file "missing.txt"`},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			res, id := e.run(agent.TurnRequest{JobID: "err-" + testserver.RandomID(), Prompt: tc.prompt})
			require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
			require.Equal(t, tc.said, res.Output)
			require.Len(t, res.Metadata.ToolCalls, 1)
			require.Equal(t, tc.tool, res.Metadata.ToolCalls[0].Tool)
			require.Equal(t, agent.ToolError, res.Metadata.ToolCalls[0].Status)
			for _, ev := range e.history(id) {
				if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED {
					require.Equal(t, int32(1), ev.GetActivityTaskStartedEventAttributes().GetAttempt())
				}
			}
		})
	}
	require.Equal(t, 1, e.issues.Calls("get_issue"))
}

// TestMCPCatalogRefusals: an MCP server outside the tenant's egress
// allowlist, and a stdio command the worker does not allow, fail the
// apply, saying why; nothing is applied.
func TestMCPCatalogRefusals(t *testing.T) {
	e := newMCPEnv(t)
	ctx := context.Background()
	before, err := e.Store().TenantSettings(ctx, "demo")
	require.NoError(t, err)

	outside := strings.Replace(e.catalog, `egress: ["`+e.issues.Addr+`"]`, `egress: ["api.example.com"]`, 1)
	err = testserver.ApplyCatalogs(ctx, e.Store(), e.Tools(), outside)
	require.Error(t, err)
	require.Contains(t, err.Error(), fmt.Sprintf(`tool "gh" (kind mcp): %s: list its tools:`, e.issues.URL))
	require.Contains(t, err.Error(), "is not in tenant demo's egress allowlist")

	notAllowed := strings.Replace(e.catalog, `command: ["`, `command: ["/usr/bin/env", "`, 1)
	err = testserver.ApplyCatalogs(ctx, e.Store(), e.Tools(), notAllowed)
	require.Error(t, err)
	require.Contains(t, err.Error(), `"/usr/bin/env" may not run: this worker allows `)
	require.Contains(t, err.Error(), "(AGENTFLOW_MCP_COMMANDS)")

	after, err := e.Store().TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, before.Version, after.Version, "nothing was applied")
}
