package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/turnclient"
)

// sendRefScript sends the file a prompt names by ref to the file
// server's upload endpoint, and answers what the other side received.
const sendRefScript = `
rules:
  - name: send
    when: {user: '^send (?P<ref>cas://sha256:[0-9a-f]{64})$'}
    reply:
      tool_calls:
        - name: execute_pipeline
          arguments: '{"session_id": "s", "pipeline": [{"step": "http_request", "url": "FILES/upload", "method": "POST", "body_ref": "${ref}"}]}'
  - name: sent
    when: {tool: '"bytes":(?P<n>[0-9]+),"sha256":"(?P<sum>[0-9a-f]{64})"'}
    reply: {text: 'Sent ${n} bytes; the other side has sha256 ${sum}.'}
  - name: tool-error
    when: {tool: '(?s)^error: (.+)$'}
    reply: {text: 'The tool said: $1'}
`

// TestObjectStoreDownInATurn: a tool call that reads a file kept on an
// object store that is down fails as unavailable, and Temporal runs the
// call again until the store is back; the turn then completes with every
// byte, and nothing short was ever sent.
func TestObjectStoreDownInATurn(t *testing.T) {
	files := startFileServer(t)
	cfg := devtest.ObjectStore(t)
	proxy := devtest.StartProxy(t, strings.TrimPrefix(cfg.Endpoint, "http://"))
	cfg.Endpoint = "http://" + proxy.Addr()
	srv := testserver.Start(t, testserver.Options{
		Script:            strings.ReplaceAll(sendRefScript, "FILES", files.URL),
		Catalogs:          []string{strings.ReplaceAll(binaryCatalog, "FILESHOST", strings.TrimPrefix(files.URL, "http://"))},
		ObjectStoreConfig: cfg,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data := make([]byte, 3<<20)
	_, _ = rand.NewChaCha8([32]byte{47}).Read(data)
	info, err := srv.Store().WriteTenantBlob(ctx, "demo", bytes.NewReader(data), "", 0)
	require.NoError(t, err)

	proxy.Down()
	turn, err := turnclient.Start(ctx, srv.Client(), srv.TaskQueue, agent.TurnRequest{Version: agent.ProtocolVersion, TenantID: "demo",
		JobID: "objstore-down-" + testserver.RandomID(), Prompt: "send " + info.Ref})
	require.NoError(t, err)
	// The call fails and is retried while the store is down.
	require.Eventually(t, func() bool {
		desc, err := srv.Client().DescribeWorkflowExecution(ctx, turn.GetID(), turn.GetRunID())
		require.NoError(t, err)
		for _, a := range desc.GetPendingActivities() {
			if a.GetActivityType().GetName() == "ExecuteTool" && a.GetAttempt() >= 2 && a.GetState() != enums.PENDING_ACTIVITY_STATE_STARTED {
				require.Contains(t, a.GetLastFailure().GetMessage(), "object store")
				return true
			}
		}
		return false
	}, time.Minute, 100*time.Millisecond, "the tool call is retried")
	require.Empty(t, files.received(), "nothing was sent while the store was down")

	proxy.Up(t)
	res, err := turnclient.Result(ctx, turn)
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.Status, "%+v", res.Error)
	sum := sha256.Sum256(data)
	require.Equal(t, fmt.Sprintf("Sent %d bytes; the other side has sha256 %s.", len(data), hex.EncodeToString(sum[:])), res.Output)
	require.Len(t, files.received(), 1)
}
