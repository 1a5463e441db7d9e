package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestSessionHistory: a turn of a session that loads its history (the
// default for a session) sends the model the session's earlier
// exchanges, in order, between the system prompt and the new prompt; a
// fresh turn of the same session sends none of them, and a turn without
// a session has none to send.
func TestSessionHistory(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: `
rules:
  - when: {user: '^My name is'}
    reply: {text: 'Noted, Ada.'}
  - when: {user: '^I like'}
    reply: {text: 'Noted, teal.'}
  - when: {user: 'my name'}
    reply: {text: 'I do not know.'}
`, Catalogs: []string{`
tenant: demo
default_agent: assistant
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: Be brief.
`}})
	session := "history-" + testserver.RandomID()
	turn := func(args ...string) []scripted.Message {
		t.Helper()
		before := len(ts.Model.Requests())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var out bytes.Buffer
		err := run(ctx, append([]string{"run", "--tenant", "demo", "--address", ts.Address, "--namespace", ts.Namespace,
			"--task-queue", ts.TaskQueue}, args...), &out)
		require.NoError(t, err, out.String())
		reqs := ts.Model.Requests()
		require.Len(t, reqs, before+1, "one model call")
		return reqs[len(reqs)-1].Messages
	}
	type msg struct{ Role, Content string }
	sent := func(msgs []scripted.Message) []msg {
		out := make([]msg, 0, len(msgs))
		for _, m := range msgs {
			out = append(out, msg{m.Role, m.Content})
		}
		return out
	}

	require.Equal(t, []msg{{"system", "Be brief."}, {"user", "My name is Ada."}},
		sent(turn("--session", session, "My name is Ada.")), "a session's first turn has no history")
	turn("--session", session, "I like teal.")

	for _, tc := range []struct {
		name string
		args []string
		want []msg
	}{
		{name: "load, by default", args: []string{"--session", session}, want: []msg{
			{"system", "Be brief."},
			{"user", "My name is Ada."}, {"assistant", "Noted, Ada."},
			{"user", "I like teal."}, {"assistant", "Noted, teal."},
			{"user", "What is my name?"},
		}},
		{name: "fresh", args: []string{"--session", session, "--history", "fresh"}, want: []msg{
			{"system", "Be brief."}, {"user", "What is my name?"},
		}},
		{name: "no session", args: []string{"--history", "load"}, want: []msg{
			{"system", "Be brief."}, {"user", "What is my name?"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, sent(turn(append(tc.args, "What is my name?")...)))
		})
	}
}
