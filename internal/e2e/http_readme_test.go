package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/docs"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
)

// readmeProcess is the process of docs/guides/processes.md, which the
// recipes read.
const readmeProcess = `
processes:
  - tag: main
    description: Watch flight prices.
    definition:
      nodes:
        - {id: fetch_flights, type: task}
      edges: []
`

// docSection names a section of a docs page: the heading title of the
// page at page ("guides/http.md").
type docSection struct{ page, title string }

// httpSections are the sections whose recipes TestHTTPReadmeRecipes runs,
// in order: the HTTP API's reference, then each door's guide.
var httpSections = []docSection{
	{"reference/http-api.md", "HTTP and the browser"},
	{"concepts/turns.md", "One turn, one id, on every door"},
	{"guides/http.md", "Server-Sent Events"},
	{"guides/http.md", "WebSocket"},
	{"guides/openai.md", "OpenAI-compatible endpoints"},
	{"guides/ai-sdk.md", "The Vercel AI SDK (`useChat`)"},
	{"guides/http.md", "Files"},
	{"guides/mcp-server.md", "Agents as tools for others: MCP"},
	{"guides/ag-ui.md", "AG-UI: agents for front ends (CopilotKit, `@ag-ui/client`)"},
	{"guides/a2a.md", "A2A: agents for other agents"},
	{"guides/chat-page.md", "The chat page"},
}

// readmeRecipes returns the shell blocks of the HTTP API's page and the
// doors' guides, without those that only export settings (the test sets
// its own).
func readmeRecipes(t *testing.T) []string {
	t.Helper()
	return docRecipes(t, func(string) bool { return true }, httpSections...)
}

// docRecipes returns the shell blocks of the sections that keep says to,
// in order, without those that only export settings.
func docRecipes(t *testing.T, keep func(block string) bool, sections ...docSection) []string {
	t.Helper()
	var blocks []string
	for _, s := range sections {
		section, err := docs.Section(s.page, s.title)
		require.NoError(t, err)
		for _, block := range docs.Blocks(section, "sh") {
			settings := true
			for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
				settings = settings && strings.HasPrefix(line, "export ")
			}
			if !settings && keep(block) {
				blocks = append(blocks, block)
			}
		}
	}
	return blocks
}

// TestHumanInTheLoopReadmeRecipes runs the curl recipes of
// docs/guides/approvals.md's "Human in the loop", in order and as written,
// against a server with the sample catalog and the demo model, and checks what
// they print: an approval remembered for the session decides the session's
// next call of the tool, the grant is listed, and revoked.
func TestHumanInTheLoopReadmeRecipes(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the recipes need %s", tool)
	}
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	blocks := docRecipes(t, func(b string) bool { return strings.Contains(b, "$API") }, docSection{"guides/approvals.md", "Human in the loop"})
	require.Len(t, blocks, 1)
	demo, err := os.ReadFile(filepath.Join(root, "catalog", "demo.yaml"))
	require.NoError(t, err)
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: string(scripted.DemoYAML()), Catalogs: []string{string(demo)},
		Tokens: map[string]string{token: "demo:user+approver+admin:dev"}, HTTPAPI: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+strings.Join(blocks, "\n"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "API=http://"+srv.HTTPAPIAddr(), "TOKEN="+token, "SESSION=s-"+testserver.RandomID())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	t.Logf("the recipes print:\n%s", out)
	require.Equal(t, "approved by dev via grant\nsession checked_calculator /expression=6 * 7 by dev\ndev\n", string(out))
}

// TestHTTPReadmeRecipes runs the curl recipes of docs/reference/http-api.md
// and the doors' guides (httpSections), in order and as written, against a
// server with the sample catalog and the demo model, and checks what each
// prints.
func TestHTTPReadmeRecipes(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "jq"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the recipes need %s", tool)
	}
	root, err := devstack.RepoRoot()
	require.NoError(t, err)
	blocks := readmeRecipes(t)
	all := strings.Join(blocks, "\n")
	for _, route := range []string{"/v1/agents", "/v1/turns:invoke", "/test/chat", `/v1/turns"`, "/events", "/approvals\"",
		"/approvals/$CALL", "/questions\"", "/questions/$(", "/v1/evals\"", "/v1/evals/$EVAL", "/cancel", "/v1/results", "/v1/conversations/", "/transcript", "/v1/catalog", "/v1/rules", "/v1/routing/dry-run",
		"/v1/processes\"", "/v1/processes/main\"", "/versions", "/v1/usage", "/openapi.json",
		"/v1/turns:stream", "/events:stream", "/messages:stream", "/v1/models", "/v1/chat/completions", "/v1/responses", "/v1/ui/chat", "/v1/files", "/mcp", "/ag-ui/", "/a2a/"} {
		require.Contains(t, all, route, "a recipe for each route")
	}

	demo, err := os.ReadFile(filepath.Join(root, "catalog", "demo.yaml"))
	require.NoError(t, err)
	token := "secret-" + testserver.RandomID()
	srv := testserver.Start(t, testserver.Options{Script: string(scripted.DemoYAML()), Catalogs: []string{string(demo) + readmeProcess},
		Tokens: map[string]string{token: "demo:user+approver+admin:dev"}, HTTPAPI: true, CORSOrigins: []string{"http://localhost:3000"}})
	job, session := "readme-"+testserver.RandomID(), "s-"+testserver.RandomID()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+all)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "API=http://"+srv.HTTPAPIAddr(), "TOKEN="+token, "JOB="+job, "SESSION="+session)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	got := string(out)
	t.Logf("the recipes print:\n%s", got)
	for _, want := range []string{
		"assistant\ndata\nops\n",                                  // the agents
		"12.5 * 4 = 50\ncompleted\n",                              // invoked, and by /test/chat
		"turn/demo/" + job + "\n",                                 // a turn's stream id
		"12.5 * 4 = 50\n",                                         // its stored result
		"approved\n6 * 7 = 42\n{}\n",                              // a decision, its call's answer, a cancel
		"conv/demo/" + session + "\nWhat is 2 + 2? → 2 + 2 = 4\n", // a message, its transcript
		"{}\nFor how many people? 2/4/6\nanswered\nA table for 4 is booked.\n", // a question, its answer, the turn's answer
		"v1 4/4 passed\n",                                                   // an evaluation
		"unchanged agent assistant\n",                                       // a dry run
		"10 ops-console → ops\n",                                            // the rules
		`{"agent_id":"data","rule":"data-page"}` + "\nmain\n",               // a dry run of routing, the processes
		`{"edges": [], "nodes": [{"id": "fetch_flights", "type": "task"}]}`, // a process
		"v1 catalog\n",                                                      // its versions
		`{"type":"urn:agentflow:error:AgentNotFound","title":"AgentNotFound","status":404,"detail":"agent \"nope\" of tenant \"demo\" not found","retryable":false}`,
		"/v1/{stream_id}/events\n",                               // the OpenAPI document's paths
		"204 http://localhost:3000\n",                            // the preflight
		"COMPLETED\nid: 4\n2 + 3 = 5\n",                          // SSE: a turn's last status, a resumed follow, a message's text
		"assistant\ndata\nops\n12.5 * 4 = 50\n2 + 3 = 5\ntrue\n", // OpenAI: models, a completion, a streamed one and its usage
		"3 + 4 = 7\ncompleted\nmcp_call message\n",               // a response's stream resumed, and the response
		"start start-step tool-input-start tool-input-delta tool-input-available tool-output-available finish-step " +
			"start-step text-start text-delta text-end finish-step finish\n12.5 * 4 = 50\ndata: [DONE]\n", // the AI SDK's stream
		"demo.yaml application/yaml true\nhello, file\n304\nfile\n",   // files, and a range of one
		"A picture of a chat, as far as a scripted model can tell.\n", // a picture with a question
		"assistant\n12.5 * 4 = 50\n12.5 * 4 = 50\ncompleted\n",        // MCP: the exposed agents, a call, one as a task
		"RUN_STARTED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END TOOL_CALL_RESULT STEP_FINISHED STEP_STARTED " +
			"TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED 12.5 * 4 = 50\n", // AG-UI
		"assistant\n1.0 0.3\n0.3.0\nTASK_STATE_COMPLETED\n12.5 * 4 = 50\ncompleted\n12.5 * 4 = 50\n", // A2A: a card, a task over 1.0 and 0.3
	} {
		require.Contains(t, got, want)
	}
	require.Regexp(t, `\nassistant \d+ calls\nops \d+ calls\n`, got, "usage by agent")
}
