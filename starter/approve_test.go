package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"

	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// approveScript asks for the careful calculator twice, each time as
// call_0: "twice: 2 * 3 then 4 * 5".
const approveScript = `
rules:
  - name: twice-again
    when: {user: '^twice: (?P<a>[-0-9.+*/ ]+) then (?P<b>[-0-9.+*/ ]+)$', tool: '^6$'}
    reply: {tool_calls: [{name: careful_calculator, id: call_0, arguments: '{"expression": "${b}"}'}]}
  - name: twice
    when: {user: '^twice: (?P<a>[-0-9.+*/ ]+) then (?P<b>[-0-9.+*/ ]+)$'}
    reply: {tool_calls: [{name: careful_calculator, id: call_0, arguments: '{"expression": "${a}"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
`

const approveCatalog = `
tenant: demo
tools:
  - {name: careful_calculator, kind: calculator, approval: always}
agents:
  - id: careful
    model: openai:gpt-4o-mini
    tools: [careful_calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 300, approval_timeout_sec: 300}
`

// pendingLine is a line of `starter approve --stream S`: the call id and
// the approval id.
var pendingLine = regexp.MustCompile(`^(\S+)  careful_calculator (\{.*\})  \(approval (apr_[0-9a-f]+), until \d\d:\d\d:\d\d\)\n$`)

// TestApproveCommand: `starter approve` lists what waits with each
// call's approval id and decides a call by it; the same approval id
// sent again once the turn's next call waits with the same call id is
// refused; --call decides the call that waits now; --for session with
// --match remembers the approval, and `starter grants` lists the grant
// and revokes it.
func TestApproveCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := testserver.Start(t, testserver.Options{
		Script: approveScript, Catalogs: []string{approveCatalog},
		Tokens: map[string]string{"tok-ana": "demo:user+approver:ana"},
		Logger: zaptest.NewLogger(t, zaptest.Level(zap.ErrorLevel)),
	})
	addr, session := srv.GRPCAddr(), "s-"+newJobID()
	started, err := pb.NewAgentServiceClient(srv.Conn).Start(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok-ana"),
		&pb.StartRequest{Turn: &pb.TurnRequest{AgentId: "careful", SessionId: session, Prompt: "twice: 2 * 3 then 4 * 5"}})
	require.NoError(t, err)
	stream := started.GetStreamId()
	waiting := func(not string) []string {
		var m []string
		require.Eventually(t, func() bool {
			out, err := starter(ctx, addr, "tok-ana", "approve", "--stream", stream)
			m = pendingLine.FindStringSubmatch(out)
			return err == nil && m != nil && m[3] != not
		}, time.Minute, 100*time.Millisecond)
		return m
	}
	first := waiting("")
	require.Equal(t, "call_0", first[1])
	require.JSONEq(t, `{"expression": "2 * 3"}`, first[2])

	out, err := starter(ctx, addr, "tok-ana", "approve", "--stream", stream, "--approval", first[3])
	require.NoError(t, err)
	require.Equal(t, "call_0 approved\n", out)
	second := waiting(first[3])
	require.Equal(t, "call_0", second[1])
	require.JSONEq(t, `{"expression": "4 * 5"}`, second[2])

	// The first decision again: refused, by the client that finds no such
	// call waiting, and by the turn when the call id is given.
	_, err = starter(ctx, addr, "tok-ana", "approve", "--stream", stream, "--approval", first[3])
	require.ErrorContains(t, err, "no call waits for approval "+first[3])
	_, err = starter(ctx, addr, "tok-ana", "approve", "--stream", stream, "--call", "call_0", "--approval", first[3])
	require.ErrorContains(t, err, "was already decided")
	require.Equal(t, second, waiting(first[3]), "the call still waits")

	out, err = starter(ctx, addr, "tok-ana", "approve", "--stream", stream, "--call", "call_0", "--for", "session",
		"--match", "/expression=4 * 5", "--expires", "1h", "--reason", "fine today")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, out)
	require.Equal(t, "call_0 approved", lines[0])
	grant := "grant_" + strings.TrimPrefix(second[3], "apr_")
	require.Equal(t, "remembered for the session as "+grant+" (revoke: starter grants --revoke "+grant+")", lines[1])

	out, err = starter(ctx, addr, "tok-ana", "grants", "--session", session)
	require.NoError(t, err)
	require.Regexp(t, `^`+grant+`  careful_calculator of careful in session `+session+` where /expression="4 \* 5"  approved by ana, until \S+\n$`, out)
	out, err = starter(ctx, addr, "tok-ana", "grants", "--revoke", grant)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(out, grant+" revoked by ana at "), out)
	out, err = starter(ctx, addr, "tok-ana", "grants", "--session", session)
	require.NoError(t, err)
	require.Equal(t, "no grants\n", out)
	out, err = starter(ctx, addr, "tok-ana", "grants", "--session", session, "--all")
	require.NoError(t, err)
	require.Contains(t, out, "approved by ana, revoked by ana\n")

	_, err = starter(ctx, addr, "tok-ana", "approve", "--stream", stream, "--call", "call_0", "--match", "region")
	require.ErrorContains(t, err, "want PATH=VALUE")
}
