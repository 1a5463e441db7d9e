package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/chatpage"
	"github.com/agentflow/agentflow/internal/testserver"
)

// TestEvalReportPage: the gateway's report page shows an evaluation of a
// recorded dataset to a person with a token: its totals per version, its
// replay table, and each case with its result.
func TestEvalReportPage(t *testing.T) {
	chromium := testserver.Chromium(t, "the evaluation report page test")
	e := newHTTPEnv(t)

	// A turn, recorded as a dataset, replayed on the active version.
	status, body := e.call("POST", "/v1/turns:invoke", e.all, `{"prompt": "What is 12.5 * 4?"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	from, to := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Minute).UTC().Format(time.RFC3339)
	status, body = e.call("POST", "/v1/evals/datasets", e.all,
		`{"dataset_id": "page", "agent_id": "assistant", "from": "`+from+`", "to": "`+to+`"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = e.call("POST", "/v1/evals", e.all, `{"dataset_id": "page", "eval_id": "eval-page"}`)
	require.Equal(t, http.StatusOK, status, "%s", body)
	status, body = e.call("GET", "/v1/evals/eval-page?wait=true", e.all, "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	var run struct {
		Status string `json:"status"`
		Cases  []struct {
			CaseID string `json:"case_id"`
		} `json:"cases"`
	}
	require.NoError(t, json.Unmarshal(body, &run))
	require.Equal(t, "completed", run.Status)
	require.Len(t, run.Cases, 1)

	resp, err := http.Get(e.api + chatpage.EvalsPath)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, chatpage.ContentSecurityPolicy, resp.Header.Get("Content-Security-Policy"))

	b := newChatBrowser(t, chromium)
	b.run(chromedp.Navigate(e.api + chatpage.EvalsPath + "#eval-page"))
	b.run(chromedp.SetValue(chromedp.ID("token"), e.all), chromedp.Click(chromedp.ID("show")))
	b.waitPage("the report shown", `document.querySelectorAll("#report table").length === 3`)
	text := b.eval(`document.getElementById("report").innerText`)
	for _, want := range []string{
		"eval-page: dataset page, agent assistant v1; completed, every case passed",
		"Replay against the recordings",
		run.Cases[0].CaseID,
		"1/1",
	} {
		require.Contains(t, text, want)
	}
	require.Empty(t, b.eval(`document.getElementById("token").value`), "the token is not left in the field")
	require.True(t, strings.Contains(b.eval(`location.hash`), "eval-page"))

	// Another tenant's token finds no such evaluation.
	b.run(chromedp.SetValue(chromedp.ID("token"), e.rival), chromedp.Click(chromedp.ID("show")))
	b.waitPage("the refusal shown", `!document.getElementById("notice").hidden`)
	require.Contains(t, b.eval(`document.getElementById("notice").innerText`), "not found")
}
