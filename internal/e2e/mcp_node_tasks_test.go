package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	mcpdoor "github.com/agentflow/agentflow/internal/gateway/mcp"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// TestMCPTypeScriptTasks: the TypeScript SDK's own task client
// (@modelcontextprotocol/sdk 1.32's client.experimental.tasks, MCP
// 2025-11-25's tasks) against two gateways of one deployment: a session
// declares tasks; a task-augmented tools/call creates a task, the turn,
// that tasks/get reads working, then completed, and tasks/result answers;
// an approval inside a task is asked of the client through tasks/result
// and round-trips; tasks/cancel cancels the turn's workflow; tasks/list
// lists the caller's tasks only, a page at a time, and a cursor is its
// caller's; another caller's or tenant's task is not found. It needs Node.js (with npm): without it the
// test skips, except under CI.
func TestMCPTypeScriptTasks(t *testing.T) {
	dir := nodeClient(t, "mcp", "@modelcontextprotocol/sdk")
	e := newTasksEnv(t)
	ts := startTSTasks(t, dir)
	here, there := e.api+mcpdoor.MCPPath, e.other+mcpdoor.MCPPath
	var session struct {
		Protocol string
		Server   struct{ Name, Version string }
		Tasks    json.RawMessage
		Tools    []struct {
			Name      string
			Execution json.RawMessage
		}
	}
	ts.do(t, "connect", map[string]any{"client": "uma", "url": here, "token": e.user}).result(&session)
	// al may approve, and its client answers every question with an approval.
	al := ts.do(t, "connect", map[string]any{"client": "al", "url": there, "token": e.all,
		"elicit": map[string]any{"approved": true, "reason": "fine"}})
	al.result(nil)
	ts.do(t, "connect", map[string]any{"client": "uma-there", "url": there, "token": e.user}).result(nil)
	ts.do(t, "connect", map[string]any{"client": "riv", "url": here, "token": e.rival}).result(nil)

	t.Run("the session declares tasks", func(t *testing.T) {
		require.Equal(t, "2025-11-25", session.Protocol)
		require.JSONEq(t, `{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`, string(session.Tasks))
		require.Len(t, session.Tools, 3)
		for _, tool := range session.Tools {
			require.JSONEq(t, `{"taskSupport":"optional"}`, string(tool.Execution), tool.Name)
		}
		require.Equal(t, "agentflow", session.Server.Name)
		require.NotEmpty(t, session.Server.Version, "serverInfo.version")
	})

	var umas []string // the tasks uma created
	t.Run("working, then completed", func(t *testing.T) {
		s := ts.do(t, "stream", map[string]any{"client": "uma", "name": "careful", "prompt": "carefully, what is 2 * 3?", "ttl": 60000})
		created := s.msg()
		require.Equal(t, "taskCreated", created.Type)
		require.Equal(t, "working", created.Task.Status)
		require.True(t, strings.HasPrefix(created.Task.TaskID, "turn/demo/"), "the task id is the turn's stream id: %s", created.Task.TaskID)
		require.NotEmpty(t, created.Task.CreatedAt)
		id := created.Task.TaskID
		umas = append(umas, id)
		// uma may not approve: tasks/get reads the task working, waiting
		// for a person, until an approver decides over the API.
		for waits := false; !waits; {
			working := s.msg()
			require.Equal(t, "taskStatus", working.Type, "%+v", working.Error)
			require.Equal(t, "working", working.Task.Status)
			waits = strings.Contains(working.Task.StatusMessage, "waiting for a person to approve the call")
		}
		p := e.waitPending(id)
		var ack pb.ApproveResponse
		e.ok("POST", "/v1/"+id+"/approvals/"+p.GetCallId(), e.approver, `{"approval_id": "`+p.GetApprovalId()+`", "approved": true}`, &ack)
		last := s.msg()
		for ; last.Type == "taskStatus" && last.Task.Status == "working"; last = s.msg() {
		}
		require.Equal(t, "taskStatus", last.Type)
		require.Equal(t, "completed", last.Task.Status)
		require.Nil(t, last.Task.PollInterval, "nothing more to poll for")
		res := s.msg()
		require.Equal(t, "result", res.Type, "%+v", res.Error)
		require.Equal(t, "The result is 6.", res.Result.text())
		require.Equal(t, id, res.Result.Meta.Related.TaskID)
		s.result(nil)

		// The same task on the other gateway, and the same turn on
		// another door.
		var got tsTask
		ts.do(t, "get", map[string]any{"client": "uma-there", "taskId": id}).result(&got)
		require.Equal(t, "completed", got.Status)
		require.Equal(t, created.Task.CreatedAt, got.CreatedAt)
		require.Nil(t, got.TTL, "kept as long as its turn")
		var again tsResult
		ts.do(t, "result", map[string]any{"client": "uma-there", "taskId": id}).result(&again)
		require.Equal(t, "The result is 6.", again.text())
		require.Equal(t, id, again.Meta.Related.TaskID)
		require.Equal(t, "The result is 6.", e.turnResult(id).Output)
	})

	var als []string // the tasks al created
	t.Run("an approval inside a task", func(t *testing.T) {
		s := ts.do(t, "stream", map[string]any{"client": "al", "name": "careful", "prompt": "carefully, what is 4 * 4?", "ttl": 60000})
		created := s.msg()
		require.Equal(t, "taskCreated", created.Type)
		id := created.Task.TaskID
		als = append(als, id)
		// al may approve and its client can be asked: the task is
		// input_required, and the client, as the SDK does, calls
		// tasks/result, which asks it.
		statuses := []string{}
		m := s.msg()
		for ; m.Type == "taskStatus"; m = s.msg() {
			statuses = append(statuses, m.Task.Status)
		}
		require.Contains(t, statuses, "input_required")
		require.Equal(t, "result", m.Type, "%+v", m.Error)
		require.False(t, m.Result.IsError)
		require.Equal(t, "The result is 16.", m.Result.text())
		require.Equal(t, id, m.Result.Meta.Related.TaskID)
		s.result(nil)

		var asked struct {
			Elicit struct {
				Message string
				Meta    tsMeta
			}
		}
		require.NoError(t, json.Unmarshal(al.by(t).message(), &asked))
		require.Contains(t, asked.Elicit.Message, "careful_calculator")
		require.Equal(t, id, asked.Elicit.Meta.Related.TaskID, "the question names its task")
		recs, err := e.Store().Approvals(context.Background(), "demo", strings.TrimPrefix(id, "turn/demo/"))
		require.NoError(t, err)
		require.Len(t, recs, 1)
		require.Equal(t, "al", recs[0].Approver, "the token's holder decided")
		require.Equal(t, "approved", recs[0].Outcome)
		require.Equal(t, "fine", recs[0].Reason)
	})

	t.Run("tasks/cancel cancels the turn", func(t *testing.T) {
		var task tsTask
		ts.do(t, "create", map[string]any{"client": "uma", "name": "careful", "prompt": "carefully, what is 5 * 5?", "ttl": 60000}).result(&task)
		umas = append(umas, task.TaskID)
		e.waitPending(task.TaskID) // it runs, and waits for an approver
		var cancelled tsTask
		ts.do(t, "cancel", map[string]any{"client": "uma-there", "taskId": task.TaskID}).result(&cancelled)
		require.Equal(t, "cancelled", cancelled.Status)
		require.Contains(t, cancelled.StatusMessage, "the MCP client cancelled the task")

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var canceledErr *temporal.CanceledError
		require.ErrorAs(t, e.Client().GetWorkflow(ctx, task.TaskID, "").Get(ctx, nil), &canceledErr, "the turn's workflow is cancelled")
		var got tsTask
		ts.do(t, "get", map[string]any{"client": "uma", "taskId": task.TaskID}).result(&got)
		require.Equal(t, "cancelled", got.Status)
		var res tsResult
		ts.do(t, "result", map[string]any{"client": "uma", "taskId": task.TaskID}).result(&res)
		require.True(t, res.IsError, "what the call would have answered")
		require.Contains(t, res.text(), "canceled")
		again := ts.do(t, "cancel", map[string]any{"client": "uma", "taskId": task.TaskID}).failure()
		require.Equal(t, -32602, again.Code, again.Message)
		require.Contains(t, again.Message, "already in terminal status 'cancelled'")
	})

	t.Run("tasks are their creator's", func(t *testing.T) {
		listed := func(client string) []string {
			var page struct {
				Tasks      []tsTask
				NextCursor string
			}
			ts.do(t, "list", map[string]any{"client": client}).result(&page)
			require.Empty(t, page.NextCursor)
			var ids []string
			for _, task := range page.Tasks {
				ids = append(ids, task.TaskID)
			}
			return ids
		}
		require.Eventually(t, func() bool { return len(listed("uma")) == len(umas) }, time.Minute, 200*time.Millisecond)
		require.ElementsMatch(t, umas, listed("uma"))
		require.ElementsMatch(t, umas, listed("uma-there"), "the same caller on another gateway")
		require.Eventually(t, func() bool { return len(listed("al")) == len(als) }, time.Minute, 200*time.Millisecond)
		require.ElementsMatch(t, als, listed("al"))
		require.Empty(t, listed("riv"))
		for _, tc := range []struct{ client, taskID, op string }{
			{"al", umas[0], "get"}, {"al", umas[0], "result"}, {"al", umas[0], "cancel"},
			{"riv", umas[0], "get"}, {"uma", als[0], "get"}, {"uma", "turn/demo/no-such-job", "get"},
		} {
			err := ts.do(t, tc.op, map[string]any{"client": tc.client, "taskId": tc.taskID}).failure()
			require.Equal(t, -32602, err.Code, "%s %s of %s: %s", tc.client, tc.op, tc.taskID, err.Message)
			require.Contains(t, err.Message, "not found")
		}
		bad := ts.do(t, "list", map[string]any{"client": "uma", "cursor": "not-a-cursor"}).failure()
		require.Equal(t, -32602, bad.Code, bad.Message)
	})

	t.Run("tasks/list pages", func(t *testing.T) {
		// al's, one already, and 20 more: a page holds 20.
		var cmds []*tsCmd
		for i := range 20 {
			cmds = append(cmds, ts.do(t, "create", map[string]any{"client": "al", "name": "assistant", "prompt": fmt.Sprintf("hello %d", i)}))
		}
		for _, c := range cmds {
			var task tsTask
			c.result(&task)
			als = append(als, task.TaskID)
		}
		for _, id := range als {
			e.turnResult(id) // ended: the listing's order holds still
		}
		var pages [][]string
		require.Eventually(t, func() bool {
			pages = nil
			cursor := ""
			for {
				var page struct {
					Tasks      []tsTask
					NextCursor string
				}
				ts.do(t, "list", map[string]any{"client": "al", "cursor": cursor}).result(&page)
				var ids []string
				for _, task := range page.Tasks {
					ids = append(ids, task.TaskID)
				}
				pages = append(pages, ids)
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			return len(pages) == 2 && len(pages[0])+len(pages[1]) == len(als)
		}, time.Minute, 200*time.Millisecond, "pages: %v", pages)
		require.Len(t, pages[0], 20)
		require.ElementsMatch(t, als, append(pages[0], pages[1]...))
		// A cursor is its caller's: uma cannot read al's next page.
		var first struct{ NextCursor string }
		ts.do(t, "list", map[string]any{"client": "al"}).result(&first)
		require.NotEmpty(t, first.NextCursor)
		bad := ts.do(t, "list", map[string]any{"client": "uma", "cursor": first.NextCursor}).failure()
		require.Equal(t, -32602, bad.Code, bad.Message)
	})
}

// tsTask is a task as the TypeScript SDK's task client returns it.
type tsTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  *int64 `json:"pollInterval"`
}

// tsMeta is a message's _meta: the task it is of.
type tsMeta struct {
	Related struct {
		TaskID string `json:"taskId"`
	} `json:"io.modelcontextprotocol/related-task"`
}

// tsResult is a CallToolResult.
type tsResult struct {
	Content []struct{ Type, Text string }
	IsError bool
	Meta    tsMeta `json:"_meta"`
}

// text is the result's text.
func (r tsResult) text() string {
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// tsMessage is a message of callToolStream.
type tsMessage struct {
	Type   string
	Task   tsTask
	Result tsResult
	Error  *tsError
}

// tsError is an error a command ended with: an McpError's code and
// message.
type tsError struct {
	Code    int
	Message string
}

// tsTasks is tasks.mjs running: the TypeScript SDK's task client, a
// command at a time.
type tsTasks struct {
	in     io.WriteCloser
	stderr *lockedBuffer

	mu    sync.Mutex
	next  int
	lines map[int]chan tsLine
}

// tsLine is a line tasks.mjs writes: an event of a command, or its end.
type tsLine struct {
	ID    int             `json:"id"`
	Event json.RawMessage `json:"event"`
	Done  json.RawMessage `json:"done"`
	Error *tsError        `json:"error"`
}

// startTSTasks runs tasks.mjs of the Node.js client's directory dir until
// the test ends.
func startTSTasks(t *testing.T, dir string) *tsTasks {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "node", "tasks.mjs")
	cmd.Dir = dir
	d := &tsTasks{stderr: &lockedBuffer{}, lines: map[int]chan tsLine{}}
	cmd.Stderr = d.stderr
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	d.in = in
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var l tsLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				continue // not the driver's: a line the SDK logged
			}
			d.chanOf(l.ID) <- l
		}
	}()
	t.Cleanup(func() {
		_ = in.Close() // the script closes its clients and ends
		select {
		case <-read:
		case <-time.After(30 * time.Second):
		}
		cancel()
		_ = cmd.Wait()
	})
	return d
}

// chanOf is the channel of command id's lines.
func (d *tsTasks) chanOf(id int) chan tsLine {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.lines[id]
	if !ok {
		ch = make(chan tsLine, 1024)
		d.lines[id] = ch
	}
	return ch
}

// do sends a command: op with args, for test t.
func (d *tsTasks) do(t *testing.T, op string, args map[string]any) *tsCmd {
	t.Helper()
	d.mu.Lock()
	d.next++
	id := d.next
	d.mu.Unlock()
	msg := map[string]any{"id": id, "op": op}
	for k, v := range args {
		msg[k] = v
	}
	data, err := json.Marshal(msg)
	require.NoError(t, err)
	_, err = d.in.Write(append(data, '\n'))
	require.NoError(t, err)
	return &tsCmd{t: t, d: d, id: id, op: op, ch: d.chanOf(id)}
}

// tsCmd is a command sent.
type tsCmd struct {
	t  *testing.T
	d  *tsTasks
	id int
	op string
	ch chan tsLine
}

// by is the command read by test t.
func (c tsCmd) by(t *testing.T) *tsCmd {
	c.t = t
	return &c
}

// line is the command's next line.
func (c *tsCmd) line() tsLine {
	c.t.Helper()
	select {
	case l := <-c.ch:
		return l
	case <-time.After(2 * time.Minute):
		c.t.Fatalf("%s: no answer from tasks.mjs; its stderr: %s", c.op, c.d.stderr.Bytes())
	}
	return tsLine{}
}

// message is the command's next event, which must be one.
func (c *tsCmd) message() json.RawMessage {
	c.t.Helper()
	l := c.line()
	require.NotNil(c.t, l.Event, "%s ended: %s %+v", c.op, l.Done, l.Error)
	return l.Event
}

// msg is the command's next event, which must be a message of
// callToolStream.
func (c *tsCmd) msg() tsMessage {
	c.t.Helper()
	var m tsMessage
	raw := c.message()
	require.NoError(c.t, json.Unmarshal(raw, &m), "%s", raw)
	return m
}

// result waits for the command's end, which must be a success, and
// decodes its result into out (nil: not at all).
func (c *tsCmd) result(out any) {
	c.t.Helper()
	l := c.line()
	for l.Event != nil {
		l = c.line()
	}
	require.Nil(c.t, l.Error, "%s: %+v", c.op, l.Error)
	if out != nil {
		require.NoError(c.t, json.Unmarshal(l.Done, out), "%s", l.Done)
	}
}

// failure waits for the command's end, which must be an error.
func (c *tsCmd) failure() tsError {
	c.t.Helper()
	l := c.line()
	for l.Event != nil {
		l = c.line()
	}
	require.NotNil(c.t, l.Error, "%s succeeded: %s", c.op, l.Done)
	return *l.Error
}
