package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// EnvScreenshots, set to 1, writes the chat page test's screenshots to docs/
// (the pictures docs/guides/chat-page.md shows); otherwise they go to the
// test's temporary folder.
const EnvScreenshots = "AGENTFLOW_SCREENSHOTS"

// chatAnswer and chatStory are long, and the script streams them a word
// at a time, slowly enough that a person (and the test) sees them grow.
const (
	chatAnswer = "The result is 42. Six sevens are forty-two, and so are seven sixes: the calculator " +
		"agrees with the tables learned at school. Multiplication of whole numbers is repeated addition, " +
		"so adding seven to itself six times gives the same number again, which is reassuring for anyone " +
		"who checks the work by hand before trusting a machine with it. If you need another product, " +
		"ask carefully and a person will approve the call before it runs."
	chatStory = "Once upon a time a durable agent waited for a person to approve its calculator call. " +
		"It waited through the night and through a restart of its worker, through a deploy and through " +
		"a change of the catalog, and it never lost its place, because every step it took was written " +
		"down in the history of its workflow before it took the next one. In the morning the person " +
		"came back, read the arguments, and the agent went on exactly where it had stopped, as if " +
		"nothing had happened at all, and told the whole story again from the very first word."
)

// chatScript: "Carefully, what is X?" thinks aloud, then asks for the
// calculator that waits for approval; the tool's result is answered with
// chatAnswer; "Tell me a story" with chatStory, and so does "Cut a story",
// whose first model call is cut mid-way and retried.
const chatScript = `
pacing: {chunk_words: 1, delay_ms: 80}
rules:
  - name: careful
    when: {user: '(?i)^carefully, what is ([-0-9.+*/() ]+)\?'}
    reply:
      reasoning: 'The user wants $1 worked out; this calculator asks a person first.'
      tool_calls: [{name: careful_calculator, arguments: '{"expression": "$1"}'}]
  - name: answer
    when: {tool: '^(.+)$'}
    reply: {text: '` + chatAnswer + `'}
  - name: story
    when: {user: '(?i)^tell me a story'}
    reply: {text: '` + chatStory + `'}
  - name: cut
    when: {user: '(?i)^cut a story'}
    fault: {cut_after_chunks: 12, times: 1}
    reply: {text: '` + chatStory + `'}
`

// TestChatPage drives the gateway's chat page in headless Chromium on the
// real stack: a message to the careful agent shows its reasoning
// (collapsed) and its calculator call waiting, which a user token cannot
// approve and an approver's can; the answer streams in, a reload mid-way
// resumes it after the last event the page held, and it ends complete and
// once; a second message is canceled mid-way; a third's model call is cut
// and retried, and the page drops what the retry voided. The token never
// appears in a URL the page requests.
func TestChatPage(t *testing.T) {
	chromium := testserver.Chromium(t, "the chat page test")
	person := "secret-" + testserver.RandomID() + testserver.RandomID()
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = chatScript
		o.Tokens[person] = "demo:user+approver:pat"
	})
	// The gateway serves the page under its policy, which the browser
	// enforces below: the page runs on its own script alone.
	resp, err := http.Get(e.api + chatpage.Path)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, chatpage.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))

	b := newChatBrowser(t, chromium)
	b.run(chromedp.Navigate(e.api + chatpage.Path))

	// A gateway without a dev token offers none: the page asks for one.
	resp, err = http.Get(e.api + chatpage.DevPath)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	b.waitPage("the page asking for a token", `document.getElementById("notice").textContent === "Type a bearer token and press Use token."`)
	require.Equal(t, "hidden", b.eval(`document.getElementById("dev-token").hidden && document.getElementById("who").hidden ? "hidden" : "shown"`))
	require.Empty(t, b.eval(`document.getElementById("token").value`))

	// A user's token lists the tenant's agents; the careful one is picked.
	b.run(chromedp.SetValue(chromedp.ID("token"), e.user), chromedp.Click(chromedp.ID("use-token")))
	b.waitPage("the agents listed", `[...document.querySelectorAll("#agent option")].some(o => o.value === "careful")`)
	b.run(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("agent"); s.value = "careful"; s.dispatchEvent(new Event("change")); })()`))

	// The message: reasoning, then the calculator call waiting.
	prompt := "Carefully, what is 6 * 7?"
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), prompt), chromedp.Click(chromedp.ID("send")))
	turn := b.waitTurn("the call waiting for approval", func(p pageTurn) bool { return p.Approve })
	require.Equal(t, prompt, turn.Prompt)
	require.Equal(t, "The user wants 6 * 7 worked out; this calculator asks a person first.", turn.Reasoning)
	require.False(t, turn.ReasoningOpen, "reasoning is shown collapsed")
	require.Equal(t, "careful_calculator", turn.Tool)
	require.Contains(t, turn.ToolState, "waiting for approval")
	require.Equal(t, "{\n  \"expression\": \"6 * 7\"\n}", turn.Args)
	require.Empty(t, turn.Text)
	require.Equal(t, "WAITING_APPROVAL", turn.Status)
	b.shot(b.dir, "chat-approval")

	// The user's token may not decide: the page shows the API's problem.
	b.click(".turn:last-of-type .approve")
	turn = b.waitTurn("the refusal shown", func(p pageTurn) bool { return p.Problem != "" })
	require.Contains(t, turn.Problem, "needs the role approver")
	require.Contains(t, turn.Problem, "403")
	require.Equal(t, "WAITING_APPROVAL", turn.Status, "nothing was decided")

	// An approver's token decides it, and the answer streams in: a part of
	// it is on the page while the turn runs.
	b.run(chromedp.SetValue(chromedp.ID("token"), person), chromedp.Click(chromedp.ID("use-token")))
	b.click(".turn:last-of-type .approve")
	turn = b.waitTurn("a part of the answer", func(p pageTurn) bool {
		return len(strings.Fields(p.Text)) >= 10 && p.Status == "RUNNING"
	})
	require.True(t, strings.HasPrefix(chatAnswer, turn.Text) && turn.Text != chatAnswer,
		"the page shows %q, not a part of the answer", turn.Text)
	require.Equal(t, "ok", turn.ToolState)
	require.Equal(t, "approved by pat: approved in the chat page", turn.Decided)
	require.Equal(t, "42", turn.Output)
	require.Empty(t, turn.Problem)
	b.shot(b.dir, "chat-streaming")
	b.noTokenInURLs(e.user, person)

	// A reload mid-answer: the page shows what it had and follows the turn
	// after the last event it held, to the end, with nothing twice.
	before := turn.Last
	b.run(chromedp.Reload())
	turn = b.waitTurn("the answer complete after the reload", func(p pageTurn) bool { return p.Status == "COMPLETED" })
	require.Equal(t, chatAnswer, turn.Text, "the answer after a reload is the whole answer, once")
	require.Equal(t, 1, turn.Turns)
	var resumed int64
	_, err = fmt.Sscanf(turn.Resumed, "resumed after event %d", &resumed)
	require.NoError(t, err, "the page says where it resumed: %q", turn.Resumed)
	require.GreaterOrEqual(t, resumed, before, "the page resumed before the events it had shown")
	require.Greater(t, turn.Last, resumed, "no event came after the reload: it was not mid-answer")
	require.Equal(t, "The user wants 6 * 7 worked out; this calculator asks a person first.", turn.Reasoning)
	require.Equal(t, "ok", turn.ToolState)
	require.Equal(t, "approved by pat: approved in the chat page", turn.Decided)
	require.Equal(t, "42", turn.Output)
	require.False(t, turn.Cancel, "a finished turn has nothing to cancel")
	// The reasoning opens when asked.
	b.click(".turn:last-of-type .reasoning summary")
	b.waitTurn("the reasoning open", func(p pageTurn) bool { return p.ReasoningOpen })
	b.shot(b.dir, "chat-resumed")
	require.Equal(t, "/turn/demo/"+turn.Job, b.eval(`document.querySelector(".turn:last-of-type a.turn-link").getAttribute("href")`),
		"the answer links its turn's page")

	// A second message, canceled while it streams: the part streamed stays.
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Tell me a story"), chromedp.Click(chromedp.ID("send")))
	turn = b.waitTurn("a part of the story", func(p pageTurn) bool { return p.Turns == 2 && p.Text != "" && p.Cancel })
	b.click(".turn:last-of-type .cancel")
	turn = b.waitTurn("the story canceled", func(p pageTurn) bool { return p.Status == "CANCELED" })
	require.True(t, strings.HasPrefix(chatStory, turn.Text) && turn.Text != chatStory,
		"the canceled story shows %q, not a part of the story", turn.Text)
	first := b.eval(`document.querySelector(".turn .text").textContent`)
	require.Equal(t, chatAnswer, first, "the first answer is still there, once")

	// A model call cut mid-way is retried: what the cut attempt streamed
	// is void, and the page drops it.
	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Cut a story"), chromedp.Click(chromedp.ID("send")))
	turn = b.waitTurn("the retried story complete", func(p pageTurn) bool { return p.Turns == 3 && p.Status == "COMPLETED" })
	require.Equal(t, chatStory, turn.Text, "the story once, without what the cut attempt streamed")
	require.Equal(t, "model call retried once", turn.Retries)
	voided := 0
	var tokens []int64
	for _, ev := range e.events(contract.TurnWorkflowID("demo", turn.Job), person) {
		if ev.GetToken() != nil {
			tokens = append(tokens, ev.GetMeta().GetEventIndex())
		}
		if st := ev.GetStatus(); st.GetStatus() == pb.Status_STATUS_RETRYING {
			for _, i := range tokens {
				if i >= st.GetVoidFrom() {
					voided++
				}
			}
		}
	}
	require.Positive(t, voided, "the cut attempt streamed text that its retry voided")
	b.noTokenInURLs(e.user, person)
}

// TestChatPageDevToken: on a stack whose operator set the chat page's
// dev token (as `go tool task up` and `go tool task demo` do), the page
// opens signed in: the tenant's agents are listed with no token typed,
// and a message is answered. Another token typed replaces it, and "Use
// the dev token" brings it back. No token is in a URL the page requested.
func TestChatPageDevToken(t *testing.T) {
	chromium := testserver.Chromium(t, "the chat page's dev token test")
	dev := "secret-" + testserver.RandomID() + testserver.RandomID()
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = chatScript
		o.Tokens[dev] = "demo:user+approver:dev"
		o.ChatDevToken = dev
	})
	b := newChatBrowser(t, chromium)
	b.run(chromedp.Navigate(e.api + chatpage.Path))
	b.waitPage("the agents listed without a token typed", `[...document.querySelectorAll("#agent option")].some(o => o.value === "assistant")`)
	require.Equal(t, "signed in with the dev token (tenant demo)", b.eval(`document.getElementById("who").hidden ? "" : document.getElementById("who").textContent`))
	require.Equal(t, dev, b.eval(`document.getElementById("token").value`))
	b.shot(b.tmp, "chat-dev-token")

	b.run(chromedp.SendKeys(chromedp.ID("prompt"), "Tell me a story"), chromedp.Click(chromedp.ID("send")))
	turn := b.waitTurn("the story told", func(p pageTurn) bool { return p.Status == "COMPLETED" })
	require.Equal(t, chatStory, turn.Text)
	require.Empty(t, turn.Problem)

	// Another token replaces it; the button brings it back.
	b.run(chromedp.SetValue(chromedp.ID("token"), e.user), chromedp.Click(chromedp.ID("use-token")))
	b.waitPage("the dev token no longer in use", `document.getElementById("who").hidden`)
	b.click("#dev-token")
	b.waitPage("the dev token in use again", `!document.getElementById("who").hidden`)
	require.Equal(t, dev, b.eval(`document.getElementById("token").value`))
	b.noTokenInURLs(dev, e.user)
}

// pageTurn is what the page shows of its last turn.
type pageTurn struct {
	Turns         int    `json:"turns"`
	Job           string `json:"job"`
	Last          int64  `json:"last"`
	Status        string `json:"status"`
	Prompt        string `json:"prompt"`
	Text          string `json:"text"`
	Reasoning     string `json:"reasoning"`
	ReasoningOpen bool   `json:"reasoningOpen"`
	Tool          string `json:"tool"`
	ToolState     string `json:"toolState"`
	Decided       string `json:"decided"`
	Args          string `json:"args"`
	Output        string `json:"output"`
	Approve       bool   `json:"approve"`
	Problem       string `json:"problem"`
	Resumed       string `json:"resumed"`
	Cancel        bool   `json:"cancel"`
	Retries       string `json:"retries"`
}

// readTurn reads pageTurn from the page's DOM.
const readTurn = `(() => {
	const turns = document.querySelectorAll(".turn");
	const turn = turns[turns.length - 1];
	if (!turn) return {turns: 0};
	const text = (s) => { const n = turn.querySelector(s); return n ? n.textContent : ""; };
	const r = turn.querySelector(".reasoning");
	return {
		turns: turns.length, job: turn.dataset.job, last: Number(turn.dataset.last), status: turn.dataset.status,
		prompt: text(".prompt"), text: [...turn.querySelectorAll(".text")].map(n => n.textContent).join(""),
		reasoning: text(".reasoning div"), reasoningOpen: !!(r && r.open),
		tool: text(".tool-name"), toolState: text(".tool-state"), decided: text(".decided"), args: text(".args"), output: text(".output"),
		approve: !!turn.querySelector(".approve"), problem: text(".problem"), resumed: text(".resumed"),
		cancel: !!turn.querySelector(".cancel"), retries: text(".retries"),
	};
})()`

// chatBrowser is a headless Chromium tab on the chat page.
type chatBrowser struct {
	t   *testing.T
	ctx context.Context
	// dir holds the screenshots, tmp the one of a failure (never docs/).
	dir, tmp string
}

func newChatBrowser(t *testing.T, path string) *chatBrowser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1000, 720),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root with its sandbox
	}
	// The first action starts the browser, for as long as ctx lives. A
	// launch that dies at once (Chromium's start-up on a machine running
	// the rest of the suite) is tried once more with a fresh process.
	var ctx context.Context
	var err error
	for range 2 {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		t.Cleanup(cancelAlloc)
		var cancel context.CancelFunc
		ctx, cancel = chromedp.NewContext(actx)
		t.Cleanup(cancel)
		if err = chromedp.Do(ctx, chromedp.Navigate("about:blank")); err == nil {
			break
		}
		t.Logf("chromium at %s did not start: %v", path, err)
	}
	require.NoError(t, err, "start chromium at %s", path)
	b := &chatBrowser{t: t, ctx: ctx, dir: t.TempDir()}
	b.tmp = b.dir
	if os.Getenv(EnvScreenshots) == "1" {
		b.dir = filepath.Join("..", "..", "docs")
	}
	return b
}

func (b *chatBrowser) run(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, actions...))
}

// eval is a script's string value.
func (b *chatBrowser) eval(script string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](script))
	require.NoError(b.t, err, "%s", script)
	return v
}

// click clicks the element selector finds, once there is one, in one
// step of the page's own script: the page re-renders a turn as its events
// arrive, and a node found in one call may be gone by the next.
func (b *chatBrowser) click(selector string) {
	b.t.Helper()
	script := fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false; el.click(); return true; })()`, selector)
	b.wait("a "+selector+" to click", func() bool {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](script))
		return err == nil && ok
	})
}

// waitPage waits until the script cond is true on the page.
func (b *chatBrowser) waitPage(what, cond string) {
	b.t.Helper()
	b.wait(what, func() bool {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](cond))
		return err == nil && ok
	})
}

// waitTurn waits until the page's last turn is as cond wants, and returns it.
func (b *chatBrowser) waitTurn(what string, cond func(pageTurn) bool) pageTurn {
	b.t.Helper()
	var p pageTurn
	b.wait(what, func() bool {
		seen, err := chromedp.Run(b.ctx, chromedp.Evaluate[pageTurn](readTurn))
		if err != nil {
			return false // the page is loading
		}
		p = seen
		return cond(p)
	})
	return p
}

// wait polls check until it holds; otherwise it fails the test with a
// screenshot and what the page showed.
func (b *chatBrowser) wait(what string, check func() bool) {
	b.t.Helper()
	if !assert.Eventually(b.t, check, 90*time.Second, 50*time.Millisecond, "the chat page shows %s", what) {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		b.t.Fatalf("the chat page did not show %s; screenshot %s; it shows:\n%s", what, b.shot(b.tmp, "chat-failed"), text)
	}
}

// shot writes a screenshot of the whole page to dir/name.png and returns
// its path.
func (b *chatBrowser) shot(dir, name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("write screenshot: %v", err)
	}
	return path
}

// noTokenInURLs checks the URLs the page has requested since it loaded:
// the token travels in a header, never in a URL.
func (b *chatBrowser) noTokenInURLs(tokens ...string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	urls, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.href, ...performance.getEntriesByType("resource").map(e => e.name)]`))
	require.NoError(b.t, err)
	require.Greater(b.t, len(urls), 2, "the page requested its files and the API")
	for _, u := range urls {
		for _, tok := range tokens {
			require.NotContains(b.t, u, tok, "a URL the page requested holds a token")
		}
	}
}

// TestChatPageDecidesEachCall: a turn asks for the careful calculator in
// two steps, each time as call_0. The page approves the first call, then
// the second — each with the approval id its own approval_required gave,
// so the second click decides the second call (a decision bound to the
// first would be refused) — and the turn completes.
func TestChatPageDecidesEachCall(t *testing.T) {
	chromium := testserver.Chromium(t, "the chat page's approval test")
	person := "secret-" + testserver.RandomID() + testserver.RandomID()
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = twiceScript
		o.Tokens[person] = "demo:user+approver:pat"
	})
	b := newChatBrowser(t, chromium)
	b.run(chromedp.Navigate(e.api + chatpage.Path))
	b.run(chromedp.SetValue(chromedp.ID("token"), person), chromedp.Click(chromedp.ID("use-token")))
	b.waitPage("the agents listed", `[...document.querySelectorAll("#agent option")].some(o => o.value === "careful")`)
	b.run(chromedp.Evaluate[chromedp.Void](`(() => { const s = document.getElementById("agent"); s.value = "careful"; s.dispatchEvent(new Event("change")); })()`))

	b.run(chromedp.SendKeys(chromedp.ID("prompt"), twicePrompt), chromedp.Click(chromedp.ID("send")))
	turn := b.waitTurn("the first call waiting", func(p pageTurn) bool { return p.Approve })
	stream := contract.TurnWorkflowID("demo", turn.Job)
	first := e.waitPending(stream)
	b.click(".turn:last-of-type .approve")
	second := e.waitPendingNot(stream, first.GetApprovalId())
	require.Equal(t, first.GetCallId(), second.GetCallId(), "the same call id, another call")
	b.waitTurn("the second call waiting", func(p pageTurn) bool {
		return p.Approve && p.Status == "WAITING_APPROVAL" && strings.Contains(p.Args, "4 * 5")
	})
	b.click(".turn:last-of-type .approve")
	turn = b.waitTurn("the turn completed", func(p pageTurn) bool { return p.Status == "COMPLETED" })
	require.Empty(t, turn.Problem)
	require.Equal(t, "The result is 20.", turn.Text)
	recs, err := e.Store().Approvals(context.Background(), "demo", turn.Job)
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, r.ApprovalID+" "+r.Outcome+" by "+r.Approver)
	}
	require.Equal(t, []string{first.GetApprovalId() + " approved by pat", second.GetApprovalId() + " approved by pat"}, got)
}
