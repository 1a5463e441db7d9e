package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/testserver"
	"github.com/agentflow/agentflow/internal/timeline"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// auditEmail is in the turn page test's prompt; the tenant redacts it at
// intake, so it must never be seen on the page or in its JSON.
const auditEmail = "ana.lopez@example.com"

// auditCount is how far the auditor counts after its approved call:
// enough steps for its turn to continue as new (history_events: 100).
const auditCount = 60

// auditScript: the auditor asks the careful calculator (approval) for
// 1+1, then counts with the calculator to auditCount; its model call
// after the result 5 is cut mid-reply once and retried.
func auditScript() string {
	var b strings.Builder
	b.WriteString(`pacing: {chunk_words: 1, delay_ms: 1}
rules:
  - name: begin
    when: {user: '(?i)^audit the ledger'}
    reply: {text: 'Checking the first entry.', tool_calls: [{name: careful_calculator, arguments: '{"expression": "1+1"}'}]}
`)
	for n := 2; n < auditCount; n++ {
		fault := ""
		if n == 5 {
			fault = "    fault: {cut_after_chunks: 4, times: 1}\n"
		}
		fmt.Fprintf(&b, "  - name: c%d\n    when: {tool: '^%d$'}\n%s    reply: {text: 'Entry %d is fine; on to the next one.', tool_calls: [{name: calculator, arguments: '{\"expression\": \"%d+1\"}'}]}\n",
			n, n, fault, n, n)
	}
	fmt.Fprintf(&b, "  - name: done\n    when: {tool: '^%d$'}\n    reply: {text: 'Audited %d entries.'}\n", auditCount, auditCount)
	return b.String()
}

// auditCatalog: the auditor's turns continue as new every 100 events;
// the tenant redacts emails and prices its model.
const auditCatalog = `
tenant: demo
default_agent: auditor
pii: {mode: placeholder}
prices:
  - {model: 'openai:gpt-4o-mini', input: 0.15, output: 0.6}
tools:
  - name: calculator
    kind: calculator
  - name: careful_calculator
    kind: calculator
    approval: always
agents:
  - id: auditor
    model: openai:gpt-4o-mini
    system_prompt: Audit the ledger with the calculators.
    tools: [careful_calculator, calculator]
    limits: {max_iterations: 80, turn_timeout_sec: 600, approval_timeout_sec: 600, history_events: 100}
`

// TestTurnPage drives the turn page in headless Chromium on the real
// stack: a turn with a call behind approval, a retried model call and a
// continue-as-new shows every step in order with its tokens and cost, the
// approver, the retry and the run boundary; another tenant's token finds
// no such turn; the redacted email appears nowhere; and "try again from
// here" with an edited tool result runs a new turn and shows its diff
// against the original.
func TestTurnPage(t *testing.T) {
	chromium := testserver.Chromium(t, "the turn page test")
	e := newHTTPEnvWith(t, func(o *testserver.Options) {
		o.Script = auditScript()
		o.Catalogs = []string{auditCatalog, httpCatalogs[1]}
		o.VaultKey = []byte("0123456789abcdef0123456789abcdef") // the placeholders' vault
		o.WebUIURL, o.TraceURL = "http://webui.example:8233", "http://traces.example/search?workflow={workflow_id}"
	})
	job := "audit-" + testserver.RandomID()
	var started pb.StartResponse
	e.ok("POST", "/v1/turns", e.user, `{"job_id": "`+job+`", "prompt": "Audit the ledger for `+auditEmail+`, please."}`, &started)
	stream := started.GetStreamId()
	pending := e.waitPending(stream)
	e.approveOverHTTP(stream, pending, true, `, "reason": "one entry is fine"`)
	res := e.turnResult(stream)
	require.Equal(t, fmt.Sprintf("Audited %d entries.", auditCount), res.Output)

	// The JSON: every step in order, the approval's approver, the retry,
	// two runs at least, tokens and cost.
	tl := e.timeline(stream, e.all, -1, 1000)
	require.Equal(t, "completed", tl.Status)
	require.GreaterOrEqual(t, len(tl.Runs), 2, "the turn continued as new: %+v", tl.Runs)
	require.Equal(t, "ContinuedAsNew", tl.Runs[0].Status)
	require.Nil(t, tl.NextAfter)
	require.Equal(t, 2*auditCount, len(tl.Items), "the prompt, then a model call and a tool call per entry, then the answer")
	retried, boundary := 0, 0
	for i, it := range tl.Items {
		require.Equal(t, i, it.Seq, "steps in order")
		if i > 0 && it.Run != tl.Items[i-1].Run {
			boundary = it.Seq
		}
		if it.Kind == timeline.KindModelCall {
			require.Positive(t, it.InputTokens, "step %d", it.Seq)
			require.NotNil(t, it.CostUSD, "step %d", it.Seq)
			retried += it.Retries
		}
	}
	require.GreaterOrEqual(t, retried, 1, "the model call cut mid-reply was retried")
	require.Positive(t, boundary, "a step was stored in a later run")
	careful := tl.Items[2]
	require.Equal(t, timeline.KindToolCall, careful.Kind)
	require.Equal(t, "careful_calculator", careful.Tool.Name)
	require.NotNil(t, careful.Tool.Approval)
	require.Equal(t, "ann", careful.Tool.Approval.Approver)
	require.Equal(t, "approved", careful.Tool.Approval.Outcome)
	require.Positive(t, tl.Totals.CostUSD)
	require.Equal(t, retried, tl.Totals.Retries)
	require.Equal(t, auditCount-1, tl.Totals.ToolCalls)

	// Paged: three steps at a time, the same steps.
	page := e.timeline(stream, e.all, -1, 3)
	require.Len(t, page.Items, 3)
	require.NotNil(t, page.NextAfter)
	page = e.timeline(stream, e.all, *page.NextAfter, 3)
	require.Equal(t, 3, page.Items[0].Seq)

	// Another tenant's token: no such turn, on the API and on the page.
	status, body := e.call("GET", "/v1/"+stream+"/timeline", e.rival, "")
	require.Equal(t, http.StatusNotFound, status, "%s", body)
	status, _ = e.call("GET", "/v1/turn/rival/"+url.PathEscape(job)+"/timeline", e.rival, "")
	require.Equal(t, http.StatusNotFound, status)

	// The redacted email is in no answer.
	for _, path := range []string{"/v1/" + stream + "/timeline?limit=1000", "/v1/" + stream + "/timeline/steps/1/request", "/v1/turns?limit=50"} {
		status, body := e.call("GET", path, e.all, "")
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
		require.NotContains(t, string(body), auditEmail, path)
	}

	b := newChatBrowser(t, chromium)
	b.signIn(e.api, e.all)
	b.run(chromedp.Navigate(e.api + "/" + stream))
	b.waitPage("every step", fmt.Sprintf(`document.querySelectorAll("#timeline li.item").length === %d`, len(tl.Items)))
	seqs := b.eval(`[...document.querySelectorAll("#timeline li.item")].map(li => li.dataset.seq).join(",")`)
	want := make([]string, len(tl.Items))
	for i := range want {
		want[i] = fmt.Sprint(i)
	}
	require.Equal(t, strings.Join(want, ","), seqs, "the page shows the steps in order")
	require.Contains(t, b.eval(`document.querySelector('li.item[data-seq="2"] .approval').textContent`), "approved by ann")
	require.Contains(t, b.eval(`document.querySelector('li.item .retries').textContent`), "retried")
	require.Equal(t, fmt.Sprint(boundary), b.eval(`(() => { const r = document.querySelector("li.run-boundary"); return r ? r.nextElementSibling.dataset.seq : ""; })()`))
	require.NotEmpty(t, b.eval(`document.querySelector('li.item[data-kind="model_call"] .tokens').textContent`))
	require.Contains(t, b.eval(`document.querySelector('li.item[data-kind="model_call"] .cost').textContent`), "$")
	require.Contains(t, b.eval(`document.querySelector('[data-total="cost_usd"]').textContent`), "$")
	// The Web UI and the trace: the turn's latest run and its trace in
	// the header, and each step's run.
	last := tl.Runs[len(tl.Runs)-1]
	require.Equal(t, "http://webui.example:8233/namespaces/"+e.Namespace+"/workflows/"+url.PathEscape(stream)+"/"+last.RunID+"/history", last.WebUI)
	require.Equal(t, last.WebUI, b.eval(`document.getElementById("web-ui").getAttribute("href")`))
	require.Equal(t, "http://traces.example/search?workflow="+url.QueryEscape(stream), b.eval(`document.getElementById("trace").getAttribute("href")`))
	require.Equal(t, tl.Runs[0].WebUI, b.eval(`document.querySelector('li.item[data-seq="1"] a.item-web-ui').getAttribute("href")`))
	require.Equal(t, last.WebUI, b.eval(fmt.Sprintf(`document.querySelector('li.item[data-seq="%d"] a.item-web-ui').getAttribute("href")`, len(tl.Items)-1)))
	b.viewShot(b.dir, "turn-page", "#turn-header")
	html := b.eval(`document.documentElement.outerHTML`)
	require.NotContains(t, html, auditEmail, "the redacted email is not on the page")

	// Try again from the approved call, with its result edited: a new
	// turn, answered from the original's results but that one, and its
	// diff against the original.
	b.click(`li.item[data-seq="2"] button.retry`)
	b.waitPage("the retry form", `!!document.getElementById("retry-result")`)
	b.run(chromedp.SetValue(chromedp.ID("retry-result"), "3"))
	b.click("#retry-submit")
	b.waitPage("the two turns compared", `(() => { const c = document.getElementById("compare"); return !!c && c.querySelectorAll(".side").length === 2 && !!c.querySelector("pre.diff") && /Audited/.test(c.querySelector('.side:last-of-type').textContent); })()`)
	// The retry reads 3 for 1+1 and counts on from there: the original's
	// 2+1 is the call it does not make.
	diff := b.eval(`document.querySelector("#compare pre.diff").textContent`)
	var removed, added []string
	for _, line := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(line, "- "):
			removed = append(removed, line)
		case strings.HasPrefix(line, "+ "):
			added = append(added, line)
		}
	}
	require.Len(t, removed, 1, "the diff shows the one call the retry did not make:\n%s", diff)
	require.Contains(t, removed[0], "calculator")
	require.Contains(t, removed[0], "2+1")
	require.Empty(t, added, "the retry made no call the original did not, and gave its answer:\n%s", diff)
	b.viewShot(b.dir, "turn-page-retry", "#compare-diff")
	b.noTokenInURLs(e.all)
	retryLink := b.eval(`document.getElementById("retry-link").getAttribute("href")`)
	require.True(t, strings.HasPrefix(retryLink, "/turn/demo/"), retryLink)

	// The list of recent turns, filtered by channel: the retry alone,
	// linked to its page; unfiltered, the original too.
	b.run(chromedp.Navigate(e.api + "/turns?channel=retry"))
	b.waitPage("the retry listed", `document.querySelectorAll("#turns tbody tr[data-stream]").length === 1`)
	require.Equal(t, retryLink, b.eval(`document.querySelector("#turns tbody tr[data-stream] a.turn-link").getAttribute("href")`))
	b.run(chromedp.Navigate(e.api + "/turns"))
	b.waitPage("the original listed", fmt.Sprintf(`!!document.querySelector('#turns tr[data-stream=%q]')`, stream))

	// The other tenant's token on the page: not found.
	b.signIn(e.api, e.rival)
	b.run(chromedp.Navigate(e.api + "/" + stream))
	b.waitPage("the turn not found", `/not found/i.test(document.getElementById("notice").textContent)`)
	require.NotContains(t, b.eval(`document.documentElement.outerHTML`), auditEmail)
}

// timeline reads a page of a turn's timeline over HTTP.
func (e *httpEnv) timeline(stream, token string, after, limit int) timeline.Timeline {
	e.t.Helper()
	status, body := e.call("GET", fmt.Sprintf("/v1/%s/timeline?after=%d&limit=%d", stream, after, limit), token, "")
	require.Equal(e.t, http.StatusOK, status, "%s", body)
	var tl timeline.Timeline
	require.NoError(e.t, json.Unmarshal(body, &tl))
	return tl
}

// signIn has the browser's tab use token, as a person does on the chat
// page: the pages beside it share its tab's token.
func (b *chatBrowser) signIn(api, token string) {
	b.t.Helper()
	b.run(chromedp.Navigate(api + chatpage.Path))
	b.run(chromedp.SetValue(chromedp.ID("token"), token), chromedp.Click(chromedp.ID("use-token")))
	b.waitPage("the token in use", `[...document.querySelectorAll("#agent option")].length > 0`)
}

// viewShot writes a screenshot of what the window shows from the element
// selector finds down to dir/name.png: the page of a long turn is taller
// than a picture in the docs should be.
func (b *chatBrowser) viewShot(dir, name, selector string) {
	b.t.Helper()
	b.run(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.querySelector(%q).scrollIntoView()`, selector)))
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	require.NoError(b.t, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644))
}
