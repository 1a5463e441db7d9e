package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentflow/agentflow/internal/nodeclient"
)

// The doors whose clients are JavaScript: the AI SDK's chat transport and
// AG-UI's HttpAgent, each run by Node.js from testdata/<name> (its
// package.json, the package-lock.json that pins every package, and the
// script that drives the client). Each script reads its call as JSON on
// stdin and writes what it read as JSON on stdout.

// nodeClient is a folder with testdata/<name> installed (nodeclient).
func nodeClient(ctx context.Context, name, module string) (string, error) {
	if !nodeclient.Installed() {
		return "", fmt.Errorf("node and npm are needed to run %s's own client: install Node.js 18 or later", name)
	}
	return nodeclient.Install(ctx, filepath.Join("testdata", name), "agentflow-chaos", module)
}

// runNode runs testdata/<name>/<script> with in as its stdin and decodes
// its stdout into out. A script that exits non-zero fails with its
// stderr.
func runNode(ctx context.Context, name, module, script string, in, out any) error {
	dir, err := nodeClient(ctx, name, module)
	if err != nil {
		return err
	}
	input, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = dir, bytes.NewReader(input), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node %s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("node %s wrote %q: %w", script, stdout.String(), err)
	}
	return nil
}

// nodeRead is what a Node client writes: the turn's id as its protocol
// names it, the answer the client built, the text deltas of the stream
// it built it from, the ids ("<kind> <id>") its streams started, the
// times it resumed and the errors that made it.
type nodeRead struct {
	ID      string   `json:"id"`
	Text    string   `json:"text"`
	Deltas  string   `json:"deltas"`
	IDs     []string `json:"ids"`
	Resumed int      `json:"resumed"`
	Errors  []string `json:"errors"`
	Failure string   `json:"failure"`
}

// doorRead is the read as the run checks it: the deltas must be the
// answer, once, and every stream the client read must have gone on with
// the same message (and run): a client shows a second one beside the
// first.
func (n nodeRead) doorRead(session string) (doorRead, error) {
	if n.Failure != "" {
		return doorRead{}, fmt.Errorf("%s (after %s)", n.Failure, strings.Join(n.Errors, "; "))
	}
	r := doorRead{job: n.ID, session: session, text: n.Text, resumed: n.Resumed}
	if n.Deltas != n.Text {
		r.flaws = append(r.flaws, fmt.Sprintf("text deltas %q for the answer %q", n.Deltas, n.Text))
	}
	kinds := map[string]int{}
	for _, id := range n.IDs {
		kind, _, _ := strings.Cut(id, " ")
		if kinds[kind]++; kinds[kind] == 2 {
			r.flaws = append(r.flaws, fmt.Sprintf("the streams started more than one %s: %s", kind, strings.Join(n.IDs, ", ")))
		}
	}
	if len(n.IDs) == 0 {
		r.flaws = append(r.flaws, "no stream named its message")
	}
	return r, nil
}

// aiSDKClient sends the prompt with the AI SDK's DefaultChatTransport as
// useChat does (a chat is a session) and, when the stream breaks,
// resumes it with the transport's reconnectToStream (GET
// {api}/{chatId}/stream, what useChat's resumeStream calls), which
// streams the message again from its start; the SDK's
// readUIMessageStream builds the message (testdata/aisdk/stream.mjs).
func aiSDKClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	var n nodeRead
	err := runNode(ctx, "aisdk", "ai", "stream.mjs", map[string]any{
		"api": c.base + "/v1/ui/chat", "token": token, "chat": c.job, "agent": "calc", "prompt": c.prompt, "maxResumes": maxResumes,
	}, &n)
	if err != nil {
		return doorRead{}, err
	}
	return n.doorRead(c.job)
}

// aguiClient runs the agent with AG-UI's HttpAgent (runAgent) under a
// runId of its own and, when the stream breaks, runs it again with the
// same runId and the same messages, which AG-UI's door answers with the
// same run from its start (testdata/agui/run.mjs). Its thread is a
// session.
func aguiClient(ctx context.Context, _ *env, c doorCall) (doorRead, error) {
	var n nodeRead
	err := runNode(ctx, "agui", "@ag-ui/client", "run.mjs", map[string]any{
		"url": c.base + "/ag-ui/calc", "token": token, "runId": c.job, "threadId": c.job, "prompt": c.prompt, "maxResumes": maxResumes,
	}, &n)
	if err != nil {
		return doorRead{}, err
	}
	if n.ID != "" && n.ID != c.job {
		return doorRead{}, errors.New("the run sent again streamed run " + n.ID + ", not " + c.job)
	}
	return n.doorRead(c.job)
}
