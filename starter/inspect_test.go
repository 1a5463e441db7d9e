package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/timeline"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestInspectCommand: starter inspect prints a turn's page URL, its
// totals and a line per step — the model calls with their tokens, the
// calculator call with its arguments and result — and pages a long turn;
// --json prints the timeline's pages; another tenant's token finds no
// such turn; a malformed turn id is refused before any request.
func TestInspectCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	catalog := "tenant: demo\ndefault_agent: a\ntools:\n  - {name: calculator, kind: calculator}\n" +
		"agents:\n  - {id: a, model: openai:gpt-4o-mini, tools: [calculator]}\n"
	script := "rules:\n  - name: call\n    when: {user: 'add'}\n    reply: {tool_calls: [{name: calculator, arguments: '{\"expression\": \"2+3\"}'}]}\n" +
		"  - name: answer\n    when: {tool: '(.+)'}\n    reply: {text: 'It is $1.'}\n"
	srv := testserver.Start(t, testserver.Options{
		Script: script, Catalogs: []string{catalog, "tenant: acme\ndefault_agent: a\nagents:\n  - {id: a, model: openai:gpt-4o-mini}\n"},
		Tokens: map[string]string{demoToken: "demo", acmeToken: "acme"}, HTTPAPI: true,
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	res, err := pb.NewAgentServiceClient(srv.Conn).Invoke(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+demoToken),
		&pb.InvokeRequest{Turn: &pb.TurnRequest{Prompt: "add two and three"}})
	require.NoError(t, err)
	require.Equal(t, "It is 5.", res.GetOutput())
	stream := "turn/demo/" + res.GetJobId()
	api := "http://" + srv.HTTPAPIAddr()

	inspect := func(token string, args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append([]string{"inspect", "--http", api, "--token", token}, args...), &out)
		return out.String(), err
	}
	out, err := inspect(demoToken, stream)
	require.NoError(t, err)
	require.Contains(t, out, stream+"  completed  agent a@1")
	require.Contains(t, out, "page    "+api+"/turn/demo/"+res.GetJobId()+"\n")
	require.Contains(t, out, "totals  4 steps: 2 model calls (0 retries), 1 tool calls, 0 approvals;")
	require.Contains(t, out, "prompt  add two and three\n")
	lines := strings.Split(out, "\n")
	var steps []string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) > 1 && (f[1] == "prompt" || f[1] == "model_call" || f[1] == "tool_call") {
			steps = append(steps, f[0]+" "+f[1])
		}
	}
	require.Equal(t, []string{"0 prompt", "1 model_call", "2 tool_call", "3 model_call"}, steps, "%s", out)
	require.Regexp(t, `2\s+tool_call\s+\S+\s+calculator \{"expression": ?"2\+3"\} → 5`, out)
	require.Regexp(t, `3\s+model_call\s+\S+\s+\d+/\d+ tok\s+openai:gpt-4o-mini → It is 5\.`, out)

	out, err = inspect(demoToken, "--json", "--all", stream)
	require.NoError(t, err)
	var tl timeline.Timeline
	require.NoError(t, json.Unmarshal([]byte(out), &tl))
	require.Len(t, tl.Items, 4)

	_, err = inspect(acmeToken, stream)
	require.ErrorContains(t, err, "404")
	_, err = inspect(demoToken, "demo/"+res.GetJobId())
	require.ErrorContains(t, err, "is not a turn id: want turn/<tenant>/<job_id>")
}
