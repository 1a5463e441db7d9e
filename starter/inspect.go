package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentflow/agentflow/internal/timeline"
	"github.com/agentflow/agentflow/internal/words"
)

const inspectUsage = `usage: starter inspect [--json] [--all] <turn id>
(with [--http URL] [--token TOKEN]; the turn id is turn/<tenant>/<job_id>, of the token's tenant)
Prints the turn page's URL and the turn's timeline: each step with its time, tokens and cost,
retries, approvals and the runs it spans. --all reads every page; --json prints the JSON pages.`

// inspectCmd prints a turn's timeline as text (GET
// /v1/turn/{tenant}/{job}/timeline, the turn page's JSON), and the URL
// of its page.
func inspectCmd(ctx context.Context, args []string, out io.Writer) error {
	fs := newFlagSet("inspect", inspectUsage)
	base := fs.String("http", cmp.Or(os.Getenv("AGENTFLOW_HTTP_API_ADDR"), "127.0.0.1:8080"),
		"the gateway's HTTP API address or URL (AGENTFLOW_HTTP_API_ADDR)")
	token := fs.String("token", cmp.Or(os.Getenv("AGENTFLOW_TOKEN"), devToken), "bearer token (AGENTFLOW_TOKEN); it names the tenant")
	asJSON := fs.Bool("json", false, "print the timeline's pages as JSON")
	all := fs.Bool("all", false, "read every page (a long turn has many)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("inspect: want one turn id\n%s", inspectUsage)
	}
	tenant, job, ok := splitStreamID(fs.Arg(0))
	if !ok {
		return fmt.Errorf("inspect: %q is not a turn id: want turn/<tenant>/<job_id>", words.Clip(fs.Arg(0), 200))
	}
	c := timelineClient{base: httpBase(*base), token: *token}
	page := c.base + "/turn/" + url.PathEscape(tenant) + "/" + url.PathEscape(job)
	after := -1
	for first := true; ; first = false {
		tl, err := c.page(ctx, tenant, job, after)
		if err != nil {
			return err
		}
		if *asJSON {
			if err := json.NewEncoder(out).Encode(tl); err != nil {
				return fmt.Errorf("inspect: %w", err)
			}
		} else {
			if first {
				printTimelineHeader(out, page, tl)
			}
			printTimelineItems(out, tl)
		}
		if tl.NextAfter == nil {
			return nil
		}
		if !*all {
			if !*asJSON {
				fmt.Fprintf(out, "… more steps after %d: --all prints them, the page shows them all\n", *tl.NextAfter)
			}
			return nil
		}
		after = *tl.NextAfter
	}
}

// splitStreamID splits turn/<tenant>/<job>.
func splitStreamID(id string) (tenant, job string, ok bool) {
	rest, ok := strings.CutPrefix(id, "turn/")
	if !ok {
		return "", "", false
	}
	tenant, job, ok = strings.Cut(rest, "/")
	return tenant, job, ok && tenant != "" && job != "" && !strings.Contains(job, "/")
}

// httpBase is the gateway's HTTP base URL: an address gets http://.
func httpBase(addr string) string {
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// timelineClient reads timeline pages from the gateway's HTTP API.
type timelineClient struct{ base, token string }

func (c timelineClient) page(ctx context.Context, tenant, job string, after int) (timeline.Timeline, error) {
	var tl timeline.Timeline
	u := fmt.Sprintf("%s/v1/turn/%s/%s/timeline?after=%d&limit=1000", c.base, url.PathEscape(tenant), url.PathEscape(job), after)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return tl, fmt.Errorf("inspect: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return tl, fmt.Errorf("inspect: %w (gateway %s; set --http or AGENTFLOW_HTTP_API_ADDR)", err, c.base)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return tl, fmt.Errorf("inspect: read the timeline: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return tl, fmt.Errorf("inspect: %s", problemText(resp.StatusCode, body))
	}
	if err := json.Unmarshal(body, &tl); err != nil {
		return tl, fmt.Errorf("inspect: decode the timeline: %w", err)
	}
	return tl, nil
}

// problemText is an HTTP error answer said plainly: its problem's
// detail (or title) and what to check.
func problemText(status int, body []byte) string {
	var p struct{ Title, Detail, Message string }
	_ = json.Unmarshal(body, &p)
	msg := cmp.Or(p.Detail, p.Message, p.Title, http.StatusText(status))
	switch status {
	case http.StatusUnauthorized:
		msg += " (set --token or AGENTFLOW_TOKEN)"
	case http.StatusNotFound:
		msg += " (a turn of the token's tenant?)"
	}
	return fmt.Sprintf("%d %s", status, msg)
}

func printTimelineHeader(out io.Writer, page string, tl timeline.Timeline) {
	fmt.Fprintf(out, "%s  %s  agent %s@%d", tl.StreamID, tl.Status, tl.AgentID, tl.AgentVersion)
	if tl.Channel != "" {
		fmt.Fprintf(out, "  channel %s", tl.Channel)
	}
	if tl.SessionID != "" {
		fmt.Fprintf(out, "  session %s", tl.SessionID)
	}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "page    %s\n", page)
	if tl.Links.WebUI != "" {
		fmt.Fprintf(out, "web ui  %s\n", tl.Links.WebUI)
	}
	if tl.Links.Trace != "" {
		fmt.Fprintf(out, "trace   %s\n", tl.Links.Trace)
	}
	if tl.ForkedFrom != nil {
		fmt.Fprintf(out, "retry of %s from step %d\n", tl.ForkedFrom.JobID, tl.ForkedFrom.Seq)
	}
	if tl.Error != nil {
		fmt.Fprintf(out, "error   %s: %s\n", tl.Error.Code, tl.Error.Message)
	}
	t := tl.Totals
	fmt.Fprintf(out, "totals  %d steps: %d model calls (%d retries), %d tool calls, %d approvals; %d in / %d out tokens (%d cached, %d reasoning); $%.6f; %s\n",
		t.Steps, t.ModelCalls, t.Retries, t.ToolCalls, t.Approvals, t.InputTokens, t.OutputTokens, t.CachedTokens, t.ReasoningTokens,
		t.CostUSD, time.Duration(t.DurationMs)*time.Millisecond)
	fmt.Fprintf(out, "runs    %d\n", len(tl.Runs))
	fmt.Fprintf(out, "prompt  %s\n\n", oneLine(tl.Prompt, 160))
}

func printTimelineItems(out io.Writer, tl timeline.Timeline) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	run := -2
	for _, it := range tl.Items {
		if it.Run != run && it.Run > 0 && run != -2 {
			fmt.Fprintf(w, "--\trun %d\t(continued as new)\t%s\t\n", it.Run+1, runID(tl, it.Run))
		}
		run = it.Run
		took := time.Duration(it.DurationMs) * time.Millisecond
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", it.Seq, it.Kind, took.Round(time.Millisecond), itemCost(it), itemWhat(it))
	}
	_ = w.Flush()
}

func runID(tl timeline.Timeline, i int) string {
	if i >= 0 && i < len(tl.Runs) {
		return tl.Runs[i].RunID
	}
	return ""
}

// itemCost is a model call's tokens and cost.
func itemCost(it timeline.Item) string {
	if it.Kind != timeline.KindModelCall {
		return ""
	}
	s := fmt.Sprintf("%d/%d tok", it.InputTokens, it.OutputTokens)
	if it.CostUSD != nil {
		s += fmt.Sprintf(" $%.6f", *it.CostUSD)
	}
	return s
}

// itemWhat says what a step did, on one line.
func itemWhat(it timeline.Item) string {
	switch it.Kind {
	case timeline.KindModelCall:
		s := it.Model
		if it.Retries > 0 {
			s += fmt.Sprintf(" (attempt %d: retried %d×)", it.Attempt, it.Retries)
		}
		if len(it.Calls) > 0 {
			names := make([]string, len(it.Calls))
			for i, c := range it.Calls {
				names[i] = c.Name
			}
			return s + " → calls " + strings.Join(names, ", ")
		}
		return s + " → " + oneLine(it.Text, 100)
	case timeline.KindToolCall:
		if it.Tool == nil {
			return ""
		}
		return toolWhat(*it.Tool)
	default:
		return oneLine(it.Text, 120)
	}
}

func toolWhat(t timeline.ToolCall) string {
	s := t.Name + " " + oneLine(string(t.Args), 60) + " → "
	if t.Error {
		s += "error: "
	}
	s += oneLine(t.Result, 60)
	if a := t.Approval; a != nil {
		s += fmt.Sprintf("  [%s by %s]", a.Outcome, cmp.Or(a.Approver, "-"))
	}
	if d := t.Delivery; d != nil {
		s += "  [delivery " + d.State + "]"
	}
	return s
}

// oneLine is text on one line, clipped to n runes.
func oneLine(s string, n int) string {
	return words.Clip(strings.Join(strings.Fields(s), " "), n)
}
