package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/metadata"

	pb "github.com/agentflow/agentflow/proto/agentflow/v1"

	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/devstack"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/testserver"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// EnvScreenshots names a folder for the pages' screenshots; default: the
// test's temporary folder. `AGENTFLOW_UI_SCREENSHOTS=docs` (from the
// package folder: ../../docs) refreshes the pictures
// docs/reference/observability.md shows.
const EnvScreenshots = "AGENTFLOW_UI_SCREENSHOTS"

// script: "what is X?" is a calculator call (guarded_calculator for the
// careful agent), its result the answer.
const script = `
pacing: {chunk_words: 1, delay_ms: 5}
rules:
  - name: careful-calc
    when: {system: 'careful', user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: guarded_calculator, arguments: '{"expression": "$1"}'}]}
  - name: calc
    when: {user: '(?i)what is ([-0-9.+*/^() ]+)\?'}
    reply: {tool_calls: [{name: calculator, arguments: '{"expression": "$1"}'}]}
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: 'The result is $1.'}
  - name: fallback
    reply: {text: 'Nothing to add.'}
`

// catalog is a tenant's: its assistant calculates freely, its careful
// agent only with a person's approval.
func catalog(tenant string) string {
	return `
tenant: ` + tenant + `
default_agent: assistant
tools:
  - name: calculator
    kind: calculator
  - name: guarded_calculator
    kind: calculator
    approval: always
agents:
  - id: assistant
    model: openai:gpt-4o-mini
    system_prompt: Use the calculator for arithmetic.
    tools: [calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 120}
  - id: careful
    model: openai:gpt-4o-mini
    system_prompt: You are careful.
    tools: [guarded_calculator]
    limits: {max_iterations: 4, turn_timeout_sec: 600, approval_timeout_sec: 600}
`
}

// TestWebUI runs turns of two tenants through the gateway and reads what
// the dev server's Web UI (v2.42, shipped with the temporal CLI v1.5.1)
// renders of them in headless Chromium.
func TestWebUI(t *testing.T) {
	chromium := testserver.Chromium(t, "the Web UI test")
	stack := startStack(t)
	ts := testserver.Start(t, testserver.Options{
		Script:          script,
		Catalogs:        []string{catalog("t1"), catalog("t2")},
		Tokens:          map[string]string{"tok-t1": "t1:user+approver", "tok-t2": "t2:user"},
		TemporalAddress: stack.TemporalAddress,
		Namespace:       stack.Namespace,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	agents := pb.NewAgentServiceClient(ts.Conn)
	as := func(token string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}

	// Two finished turns, one of each tenant.
	job1, job2 := "webui-"+testserver.RandomID(), "webui-"+testserver.RandomID()
	res, err := agents.Invoke(as("tok-t1"), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job1, AgentId: "assistant", Prompt: "What is 12.5 * 4?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 50.", res.GetOutput())
	res, err = agents.Invoke(as("tok-t2"), &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job2, AgentId: "assistant", Prompt: "What is 7 * 6?"}})
	require.NoError(t, err)
	require.Equal(t, "The result is 42.", res.GetOutput())

	// A turn of t1 that waits for a person's approval.
	job3 := "webui-" + testserver.RandomID()
	stream, err := agents.Stream(as("tok-t1"), &pb.StreamRequest{Turn: &pb.TurnRequest{JobId: job3, AgentId: "careful", Prompt: "What is 6 * 7?"}})
	require.NoError(t, err)
	var pending *pb.ToolEvent
	for pending == nil {
		ev, err := stream.Recv()
		require.NoError(t, err, "the careful turn's stream ended before it asked for approval")
		pending = ev.GetApprovalRequired()
	}

	id1, id2, id3 := contract.TurnWorkflowID("t1", job1), contract.TurnWorkflowID("t2", job2), contract.TurnWorkflowID("t1", job3)
	b := newBrowser(t, chromium, stack.UIURL, stack.Namespace)

	// The list, as a person filters it by tenant: t1's turns, not t2's.
	// The dev server is the test's own: t1 has these two turns only, one
	// running and one completed.
	list := b.see(t, "webui-list", "/workflows?query="+url.QueryEscape(`AgentflowTenant="t1"`),
		"1 Running", "1 Completed", id1, id3)
	require.NotContains(t, list.text, id2, "the list filtered by t1 shows a turn of t2 (%s)", list)
	require.NotContains(t, list.text, "turn/t2/", "the list filtered by t1 shows a turn of t2 (%s)", list)

	// A finished turn: its summary, details and current details ...
	b.see(t, "webui-turn", workflowPath(t, ts, id1)+"/user-metadata",
		"assistant: What is 12.5 * 4?",            // StaticSummary: contract.TurnSummary
		"tenant t1 · agent assistant · job "+job1, // StaticDetails: contract.TurnDetails
		"completed", // workflow.SetCurrentDetails at the end
	)
	// ... its result, and the calls' summaries in its event history: the
	// model call's and the tool call's. Both are local activities (a model
	// call's by default), each an event "Local Activity" with its type and
	// summary; the timeline names the model call by its type alone.
	history := b.see(t, "webui-history", workflowPath(t, ts, id1)+"/history",
		"The result is 50.",
		`calculator {"expression": "12.5 * 4"}`,
		"openai:gpt-4o-mini · iteration 1",
	)
	require.Regexp(t, `Local Activity\s+Activity Type\s+CallModel\s+Summary\s+openai:gpt-4o-mini · iteration 1\s`, history.text,
		"the model call's event, with its summary (%s)", history)

	// The turn waiting for approval says so, naming the tool.
	b.see(t, "webui-approval", workflowPath(t, ts, id3)+"/user-metadata",
		"careful: What is 6 * 7?",
		"waiting for approval: guarded_calculator (call "+pending.GetCallId()+")",
	)

	// The waiting turn ends once approved, as the page above showed it must.
	_, err = agents.Approve(as("tok-t1"), &pb.ApproveRequest{StreamId: id3, CallId: pending.GetCallId(), ApprovalId: pending.GetApprovalId(), Approved: ptr(true)})
	require.NoError(t, err)
	for {
		ev, err := stream.Recv()
		require.NoError(t, err)
		if ev.GetStatus().GetStatus() == pb.Status_STATUS_COMPLETED {
			break
		}
	}
}

// startStack starts a dev server of the test's own, with its Web UI on a
// free port (the shared one of devtest runs headless).
func startStack(t *testing.T) *devstack.Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stack *devstack.Stack
	var err error
	// The port is free when picked, but another process may take it
	// before the UI binds it: then pick another.
	for range 3 {
		stack, err = devstack.Start(ctx, devstack.Options{
			Dir:          t.TempDir(),
			SkipPostgres: true,
			TemporalPort: -1,
			UIPort:       freePort(t),
			InMemory:     true,
			Logger:       zaptest.NewLogger(t),
		})
		if err == nil || !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, stack.Stop()) })
	require.NotEmpty(t, stack.UIURL)
	// The UI server starts beside the frontend; the stack waits for the
	// frontend only.
	require.Eventually(t, func() bool {
		resp, err := http.Get(stack.UIURL)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, time.Minute, 100*time.Millisecond, "the Web UI at %s did not answer", stack.UIURL)
	return stack
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// workflowPath is the page of a workflow's latest run below the
// namespace. The id has slashes, escaped as the UI's own links escape them.
func workflowPath(t *testing.T, ts *testserver.Server, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	desc, err := ts.Client().DescribeWorkflowExecution(ctx, id, "")
	require.NoError(t, err)
	return "/workflows/" + url.PathEscape(id) + "/" + desc.GetWorkflowExecutionInfo().GetExecution().GetRunId()
}

// browser is a headless Chromium tab on the Web UI of one namespace.
type browser struct {
	ctx  context.Context
	base string // the namespace's pages
	dir  string // screenshots
}

func newBrowser(t *testing.T, path, uiURL, namespace string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first run starts the browser, for as long as ctx lives.
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")), "start chromium at %s", path)

	dir := os.Getenv(EnvScreenshots)
	if dir == "" {
		dir = t.TempDir()
	} else {
		require.NoError(t, os.MkdirAll(dir, 0o755))
	}
	return &browser{ctx: ctx, base: uiURL + "/namespaces/" + url.PathEscape(namespace), dir: dir}
}

// pageText is the text a person reads on the page, including that of
// its frames: the UI renders summaries and details (Markdown) in frames.
const pageText = `(() => {
	if (!document.body) return "";
	let text = document.body.innerText;
	for (const f of document.querySelectorAll("iframe")) {
		try { text += "\n" + f.contentDocument.body.innerText; } catch (e) { text += "\n[a frame not readable: " + e + "]"; }
	}
	return text;
})()`

// scrollTo scrolls the first element whose own text holds a string (%s,
// a JSON string) to the middle of the view.
const scrollTo = `((want) => {
	const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
	for (let n = walk.nextNode(); n; n = walk.nextNode()) {
		if (n.textContent.includes(want) && n.parentElement) {
			n.parentElement.scrollIntoView({block: "center"});
			return true;
		}
	}
	return false;
})(%s)`

// page is what a person saw of one page.
type page struct {
	url, text, screenshot string
}

// String shows the page for a failure: where, its text (shortened) and
// its screenshot.
func (p page) String() string {
	text := p.text
	if r := []rune(text); len(r) > 3000 {
		text = string(r[:3000]) + "\n[… " + fmt.Sprint(len(r)-3000) + " more characters]"
	}
	return fmt.Sprintf("page %s\nscreenshot %s\ntext seen:\n%s", p.url, p.screenshot, text)
}

// see opens a page of the namespace, waits until its rendered text holds
// every one of want, and takes its screenshot (name.png). It fails the
// test with what it saw when the text does not come.
func (b *browser) see(t *testing.T, name, path string, want ...string) page {
	t.Helper()
	p := page{url: b.base + path}
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	err := chromedp.Do(ctx, chromedp.Navigate(p.url))
	// The UI renders on the client, and may redirect within the page
	// while it loads (a script's context then goes away): read the text
	// until it holds what is wanted, rather than wait for a time.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for err == nil && !holdsAll(p.text, want) {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
			if text, rerr := chromedp.Run(ctx, chromedp.Evaluate[string](pageText)); rerr == nil {
				p.text = text
			}
		}
	}
	sctx, scancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer scancel()
	if err == nil && len(want) > 0 {
		// The picture shows the last thing looked for (further down the
		// page, such as the history's timeline).
		last, _ := json.Marshal(want[len(want)-1])
		_, _ = chromedp.Run(sctx, chromedp.Evaluate[bool](fmt.Sprintf(scrollTo, last)))
	}
	if png, serr := chromedp.Run(sctx, chromedp.FullScreenshot(100)); serr == nil {
		p.screenshot = filepath.Join(b.dir, name+".png")
		if werr := os.WriteFile(p.screenshot, png, 0o644); werr != nil {
			t.Errorf("write screenshot: %v", werr)
		}
	} else {
		t.Logf("screenshot of %s: %v", p.url, serr)
	}
	if err != nil {
		var missing []string
		for _, w := range want {
			if !strings.Contains(p.text, w) {
				missing = append(missing, w)
			}
		}
		t.Fatalf("the Web UI did not show %q: %v\n%s", missing, err, p)
	}
	t.Logf("%s: saw %q; screenshot %s", name, want, p.screenshot)
	return p
}

func holdsAll(text string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(text, w) {
			return false
		}
	}
	return true
}

func ptr[T any](v T) *T { return &v }
