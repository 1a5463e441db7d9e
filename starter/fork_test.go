package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/catalog"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestForkSession: a session forked at a turn starts with the transcript
// up to there; an edit of that turn's prompt, sent to the fork and
// answered by another agent, reads the transcript before the turn and the
// edited prompt; the original is unchanged. Another tenant's session, a
// turn the session does not have, and an edit with regenerate are
// refused.
func TestForkSession(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{Script: `
rules:
  - when: {model: 'gpt-4o$', user: '(.+)'}
    reply: {text: 'Careful answer to: $1'}
  - when: {user: '(.+)'}
    reply: {text: 'Answer to: $1'}
`, Catalogs: []string{`
tenant: demo
default_agent: quick
agents:
  - id: quick
    model: openai:gpt-4o-mini
    system_prompt: Be quick.
  - id: careful
    model: openai:gpt-4o
    system_prompt: Be careful.
`, `
tenant: acme
default_agent: quick
agents:
  - id: quick
    model: openai:gpt-4o-mini
`},
		Tokens: map[string]string{demoToken: "demo:user", "acme-token": "acme:user"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	client := pb.NewAgentServiceClient(srv.Conn)
	as := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+demoToken)
	session := "s-" + newJobID()
	transcript := func(session string) []string {
		t.Helper()
		msgs, err := srv.Store().SessionMessages(ctx, "demo", session, 0)
		require.NoError(t, err)
		var out []string
		for _, m := range msgs {
			out = append(out, string(m.Role)+": "+m.Content)
		}
		return out
	}
	awaitTurns := func(session string, n int) {
		t.Helper()
		require.Eventually(t, func() bool { return len(transcript(session)) == 2*n }, time.Minute, 50*time.Millisecond)
	}
	for _, p := range []string{"first question", "second question"} {
		_, err := client.SendMessage(as, &pb.SendMessageRequest{SessionId: session, Prompt: p})
		require.NoError(t, err)
	}
	awaitTurns(session, 2)
	original := transcript(session)

	through, err := client.ForkSession(as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-1"})
	require.NoError(t, err)
	require.EqualValues(t, 2, through.GetMessages())
	require.Empty(t, through.GetStreamId(), "no message sent")
	require.Equal(t, []string{"user: first question", "assistant: Answer to: first question"}, transcript(through.GetSessionId()))

	edited, err := client.ForkSession(as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-2", NewSessionId: session + "-edit",
		EditPrompt: "second question, rephrased", AgentId: "careful"})
	require.NoError(t, err)
	require.Equal(t, session+"-edit", edited.GetSessionId())
	require.EqualValues(t, 2, edited.GetMessages(), "the fork ends before the edited turn")
	require.NotEmpty(t, edited.GetStreamId())
	awaitTurns(session+"-edit", 2)
	require.Equal(t, []string{
		"user: first question", "assistant: Answer to: first question",
		"user: second question, rephrased", "assistant: Careful answer to: second question, rephrased",
	}, transcript(session+"-edit"), "answered in the fork by the other agent")
	reqs := srv.Model.Requests()
	last := reqs[len(reqs)-1]
	require.Equal(t, "gpt-4o", last.Model)
	var sent []string
	for _, m := range last.Messages {
		sent = append(sent, m.Role+": "+m.Content)
	}
	require.Equal(t, []string{"system: Be careful.", "user: first question", "assistant: Answer to: first question",
		"user: second question, rephrased"}, sent)
	require.Equal(t, original, transcript(session), "the original is unchanged")

	// A fork runs on an earlier version of an agent when asked, the
	// active one otherwise.
	cat, err := catalog.Parse(nil, "v2.yaml", []byte(`
tenant: demo
default_agent: quick
agents:
  - id: quick
    model: openai:gpt-4o-mini
    system_prompt: Be quick.
  - id: careful
    model: openai:gpt-4o
    system_prompt: Be very careful.
`))
	require.NoError(t, err)
	_, err = srv.Store().ApplyCatalog(ctx, cat, false)
	require.NoError(t, err)
	systemOf := func(version int32) string {
		t.Helper()
		fork, err := client.ForkSession(as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-2", Regenerate: true,
			AgentId: "careful", AgentVersion: version})
		require.NoError(t, err)
		awaitTurns(fork.GetSessionId(), 2)
		reqs := srv.Model.Requests()
		return reqs[len(reqs)-1].Messages[0].Content
	}
	require.Equal(t, "Be careful.", systemOf(1))
	require.Equal(t, "Be very careful.", systemOf(0))
	_, err = client.ForkSession(as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-2", Regenerate: true, AgentId: "careful", AgentVersion: 7})
	require.Equal(t, codes.NotFound, status.Code(err), "error: %v", err)

	for _, tc := range []struct {
		name  string
		as    context.Context
		in    *pb.ForkSessionRequest
		code  codes.Code
		error string
	}{
		{"another tenant's session", metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer acme-token"),
			&pb.ForkSessionRequest{SessionId: session, JobId: session + "-1"}, codes.NotFound, "has no turn"},
		{"a turn the session does not have", as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-9"}, codes.NotFound, "has no turn"},
		{"into an existing session", as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-1", NewSessionId: session + "-edit"},
			codes.FailedPrecondition, "exists"},
		{"an edit and regenerate", as, &pb.ForkSessionRequest{SessionId: session, JobId: session + "-1", EditPrompt: "x", Regenerate: true},
			codes.InvalidArgument, "send one"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.ForkSession(tc.as, tc.in)
			require.Equal(t, tc.code, status.Code(err), "error: %v", err)
			require.ErrorContains(t, err, tc.error)
		})
	}
}
