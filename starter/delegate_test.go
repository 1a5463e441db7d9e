package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/testserver"
)

// TestChatShowsDelegation: chat through the gateway shows a delegated
// turn's work indented under the delegation call, and the lead's answer
// as the answer.
func TestChatShowsDelegation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - when: {system: 'lead', tool: '(?s)answered:\n(.*?)\n\n'}
    reply: {text: 'The helper says: $1'}
  - when: {system: 'lead', user: '^ask helper: (.+)$'}
    reply: {tool_calls: [{name: delegate, arguments: '{"agent_id": "helper", "prompt": "$1"}'}]}
  - when: {system: 'helper', tool: '^(.+)$'}
    reply: {text: "It is $1.\nChecked twice."}
  - when: {system: 'helper', user: '(?i)what is ([-0-9.+*/() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
`,
		Catalogs: []string{`
tenant: demo
default_agent: lead
tools:
  - {name: calculator, kind: calculator}
  - {name: delegate, kind: delegate_to_agent, config: {agents: [helper]}}
agents:
  - {id: lead, model: "openai:gpt-4o-mini", system_prompt: You are the lead., tools: [delegate]}
  - {id: helper, model: "openai:gpt-4o-mini", system_prompt: You are the helper., tools: [calculator]}
`},
		Tokens: map[string]string{"tok": "demo"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})

	var out bytes.Buffer
	require.NoError(t, run(ctx, []string{"chat", "--addr", srv.GRPCAddr(), "--token", "tok", "ask helper: What is 6 * 7?"}, &out))
	got := out.String()
	require.Contains(t, got, "  tool delegate {\"agent_id\":\"helper\",\"prompt\":\"What is 6 * 7?\"}\n"+
		"    │ tool calculator {\"expression\":\"6 * 7\"}\n"+
		"    │ tool calculator → ok 42\n"+
		"    │ It is 42.\n"+
		"    │ Checked twice.\n"+
		"  tool delegate → ok agent \"helper\" answered: It is 42. Checked twice. result_ref: artifact://", got)
	require.Contains(t, got, "\nThe helper says: It is 42.\nChecked twice.", got)
}
