package guard

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// HTTPCheck is what an HTTP guard is sent.
type HTTPCheck struct {
	Stage    string `json:"stage"` // input | output
	Text     string `json:"text"`
	TenantID string `json:"tenant_id"`
	AgentID  string `json:"agent_id"`
	JobID    string `json:"job_id"`
}

// Verdict is a custom guard's answer (an HTTP guard's body, a tool
// guard's text output): {"allow": true} or {"allow": false, "reason"}.
type Verdict struct {
	Allow  bool
	Reason string
}

// maxVerdictBytes bounds a custom guard's answer.
const maxVerdictBytes = 64 << 10

// errNotVerdict is an answer that is not a verdict.
var errNotVerdict = errors.New(`the answer is not {"allow": true|false, "reason"}`)

// ReadVerdict reads a custom guard's answer: a JSON object whose "allow"
// is true or false, with an optional string "reason" (other fields are
// ignored). Anything else — another JSON value, an "allow" that is
// missing or not a boolean, more than maxVerdictBytes — is not a verdict;
// the error says so without quoting the answer, which may quote the text
// the guard was asked about.
func ReadVerdict(data []byte) (Verdict, error) {
	if len(data) > maxVerdictBytes {
		return Verdict{}, errNotVerdict
	}
	var v struct {
		Allow  *bool  `json:"allow"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(data, &v); err != nil || v.Allow == nil {
		return Verdict{}, errNotVerdict
	}
	return Verdict{Allow: *v.Allow, Reason: v.Reason}, nil
}

// decide is the rule a custom guard's answer makes ("" when the text may
// go on): who names the guard in it ("http guard https://…", "tool guard
// policy_check"). A guard that could not be asked, or did not answer a
// verdict (err), refuses when it fails closed and lets the text go on
// when it fails open.
func decide(who string, g agent.GuardCall, v Verdict, err error) string {
	switch {
	case err != nil && g.FailsOpen():
		return ""
	case err != nil:
		return fmt.Sprintf("%s failed closed: %v", who, err)
	case v.Allow:
		return ""
	}
	reason := cmp.Or(v.Reason, "no reason given")
	return fmt.Sprintf("%s refused: %s", who, words.Clip(reason, 300))
}

// CallHTTP asks a tenant's guard about a text, through client (the
// tenant's egress policy), within the guard's timeout. It returns the
// rule the text broke ("" when allowed). A guard that cannot be asked, or
// answers what is not a verdict, is a refusal when it fails closed (the
// default), and nothing when it fails open: then err says what happened,
// for the log.
func CallHTTP(ctx context.Context, client *http.Client, g agent.HTTPGuard, check HTTPCheck) (rule string, err error) {
	ctx, cancel := context.WithTimeout(ctx, g.Timeout())
	defer cancel()
	verdict, err := callHTTP(ctx, client, g.URL, check)
	return decide("http guard "+g.URL, g.GuardCall, verdict, err), err
}

func callHTTP(ctx context.Context, client *http.Client, url string, check HTTPCheck) (Verdict, error) {
	body, err := json.Marshal(check)
	if err != nil {
		return Verdict{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Verdict{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Verdict{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxVerdictBytes))
	if err != nil {
		return Verdict{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Verdict{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	return ReadVerdict(data)
}
