package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/agentflow/agentflow/internal/agent"
)

// HTTPCheck is what an HTTP guard is sent.
type HTTPCheck struct {
	Stage    string `json:"stage"` // input | output
	Text     string `json:"text"`
	TenantID string `json:"tenant_id"`
	AgentID  string `json:"agent_id"`
	JobID    string `json:"job_id"`
}

type httpVerdict struct {
	Allow  *bool  `json:"allow"`
	Reason string `json:"reason"`
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
	if err != nil {
		if g.Fail == agent.GuardFailOpen {
			return "", err
		}
		return fmt.Sprintf("http guard %s failed closed: %v", g.URL, err), err
	}
	if *verdict.Allow {
		return "", nil
	}
	reason := verdict.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return fmt.Sprintf("http guard %s refused: %s", g.URL, agent.Clip(reason, 300)), nil
}

func callHTTP(ctx context.Context, client *http.Client, url string, check HTTPCheck) (httpVerdict, error) {
	body, err := json.Marshal(check)
	if err != nil {
		return httpVerdict{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return httpVerdict{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return httpVerdict{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return httpVerdict{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return httpVerdict{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	var v httpVerdict
	if err := json.Unmarshal(data, &v); err != nil || v.Allow == nil {
		return httpVerdict{}, fmt.Errorf(`the answer is not {"allow": true|false, "reason"}`)
	}
	return v, nil
}
