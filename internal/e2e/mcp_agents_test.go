package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
)

// What MCP clients get of the conformance agents beyond what the
// conformance suite checks, with the MCP Go SDK's client at both
// versions: the arguments of an agent's input schema, a result's files,
// and the turn's log.

// TestMCPAgentArguments: an agent with an input schema is a tool that
// takes its arguments, checked against the schema: the tool lists the
// schema as the catalog has it, the turn's prompt is the arguments as
// compact JSON, a call without arguments is one with {}, and arguments
// that do not match are invalid params, which start nothing.
func TestMCPAgentArguments(t *testing.T) {
	e, front := newConformanceEnv(t)
	for _, version := range mcpConformanceVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			session := conformanceSession(ctx, t, front, version, nil)
			tools, err := session.ListTools(ctx, nil)
			require.NoError(t, err)
			schemas := map[string]string{}
			for _, tool := range tools.Tools {
				raw, err := json.Marshal(tool.InputSchema)
				require.NoError(t, err)
				schemas[tool.Name] = string(raw)
			}
			require.JSONEq(t, `{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`, schemas["greet"])
			require.Contains(t, schemas["json_schema_2020_12_tool"], `"if":{"properties":{"contactMethod":{"const":"phone"}},"required":["contactMethod"]}`)

			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: map[string]any{"name": "Ada"}})
			require.NoError(t, err)
			require.False(t, res.IsError, "%v", res.Content)
			require.Equal(t, "Hello, Ada!", res.Content[0].(*mcp.TextContent).Text)
			stream, _ := res.Meta["agentflow/stream_id"].(string)
			turn, err := e.Store().Turn(ctx, "demo", strings.TrimPrefix(stream, "turn/demo/"))
			require.NoError(t, err)
			require.Equal(t, `{"name":"Ada"}`, turn.Request.Prompt)

			res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "test_simple_text"})
			require.NoError(t, err)
			require.Equal(t, "This is a simple text response for testing.", res.Content[0].(*mcp.TextContent).Text)

			for args, want := range map[string]string{
				`{}`:            "arguments do not match the input schema of greet: missing property 'name'",
				`{"name": 3}`:   "/name: got number, want string",
				`{"prompt": 1}`: "missing property 'name'",
			} {
				_, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "greet", Arguments: json.RawMessage(args)})
				require.ErrorContains(t, err, want, args)
			}
		})
	}
}

// TestMCPAgentFiles: the files of a result go inline when small — an
// image as image content, a sound as audio, a text as an embedded
// resource under its ref — and as a link to a resource otherwise, which
// resources/read reads whole.
func TestMCPAgentFiles(t *testing.T) {
	_, front := newConformanceEnv(t)
	fixture := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", "conformance", "files", name))
		require.NoError(t, err)
		return data
	}
	for _, version := range mcpConformanceVersions {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			session := conformanceSession(ctx, t, front, version, nil)
			call := func(tool string) []mcp.Content {
				t.Helper()
				res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool})
				require.NoError(t, err)
				require.False(t, res.IsError, "%v", res.Content)
				return res.Content
			}
			content := call("test_image_content")
			image := content[0].(*mcp.ImageContent)
			require.Equal(t, "image/png", image.MIMEType)
			require.Equal(t, fixture("red.png"), image.Data)
			require.Regexp(t, `^cas://sha256:[0-9a-f]{64}$`, image.Meta["agentflow/ref"])
			require.Equal(t, "A red pixel.", content[1].(*mcp.TextContent).Text)

			audio := call("test_audio_content")[0].(*mcp.AudioContent)
			require.Equal(t, "audio/wav", audio.MIMEType)
			require.Equal(t, fixture("tone.wav"), audio.Data)

			doc := call("test_embedded_resource")[0].(*mcp.EmbeddedResource).Resource
			require.Equal(t, string(fixture("embedded.txt")), doc.Text)
			require.Equal(t, "text/plain", doc.MIMEType)
			require.Regexp(t, `^cas://sha256:[0-9a-f]{64}$`, doc.URI)

			link := call("test_large_file")[0].(*mcp.ResourceLink)
			require.Regexp(t, `^cas://sha256:[0-9a-f]{64}$`, link.URI)
			read, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: link.URI})
			require.NoError(t, err)
			require.Len(t, read.Contents[0].Blob, conformanceLarge)
		})
	}
}

// TestMCPAgentLog: a session's client that sets a log level is sent what
// each call's turn does — its start, its tool calls, its end — at the
// levels the turn's items have; a failed turn's end is an error.
func TestMCPAgentLog(t *testing.T) {
	_, front := newConformanceEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var logs []string
	session := conformanceSession(ctx, t, front, "2025-11-25", &mcp.ClientOptions{
		LoggingMessageHandler: func(_ context.Context, req *mcp.LoggingMessageRequest) {
			mu.Lock()
			defer mu.Unlock()
			logs = append(logs, string(req.Params.Level)+" "+req.Params.Logger+": "+req.Params.Data.(string))
		},
	})
	logged := func(want string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range logs {
			if strings.Contains(l, want) {
				return true
			}
		}
		return false
	}
	// The logs so far, read when a failure's message is written.
	seen := shownLater(func() any {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(logs)
	})
	_, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging"})
	require.NoError(t, err)
	require.False(t, logged("calling the tool"), "nothing is logged before the client sets a level")
	require.NoError(t, session.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}))

	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test_tool_with_logging"})
	require.NoError(t, err)
	stream, _ := res.Meta["agentflow/stream_id"].(string)
	for _, want := range []string{"info agentflow: the turn " + stream + " is running", "info agentflow: calling the tool calculator",
		"info agentflow: the tool calculator ended ok", "info agentflow: the turn " + stream + " ended completed"} {
		require.Eventually(t, func() bool { return logged(want) }, time.Minute, 50*time.Millisecond, "%s in %v", want, seen)
	}
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "test_error_handling"})
	require.NoError(t, err)
	require.True(t, res.IsError)
	stream, _ = res.Meta["agentflow/stream_id"].(string)
	require.Eventually(t, func() bool { return logged("error agentflow: the turn " + stream + " ended failed") }, time.Minute, 50*time.Millisecond, "%v", seen)
}

// conformanceSession connects an MCP Go SDK client to the conformance
// deployment's proxy at version: a session at 2025-11-25, stateless
// requests at 2026-07-28.
func conformanceSession(ctx context.Context, t *testing.T, front, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "agentflow-e2e", Version: "1"}, opts)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: front + mcpdoor.MCPPath, HTTPClient: http.DefaultClient},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	require.NoError(t, err)
	t.Cleanup(func() { _ = session.Close() })
	require.Equal(t, version, session.InitializeResult().ProtocolVersion)
	return session
}

// shownLater is a value a test's failure message shows as f gives it
// when the message is written, not when the assertion is made.
type shownLater func() any

func (f shownLater) String() string { return fmt.Sprint(f()) }
