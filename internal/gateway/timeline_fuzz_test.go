package gateway

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// FuzzRetryBody: any body of POST .../retry is a retry or an
// invalid-request error, never a panic; an accepted one names its step.
func FuzzRetryBody(f *testing.F) {
	for _, s := range []string{`{"seq": 2}`, `{"seq": 0, "prompt": "again", "model": "openai:gpt-4o", "agent_version": 2}`,
		`{"seq": 2, "results": [{"call_id": "call_1", "result": "3"}]}`, `{}`, `{"seq": "2"}`, `{"seq": 2, "tenant_id": "x"}`,
		`{"seq": 1, "agent_version": -1}`, `{"seq": 1, "results": [1]}`, `[]`, ``, `{"seq": 1e99}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := httptest.NewRequest("POST", "/v1/turn/demo/j/retry", bytes.NewReader(data))
		b, err := readRetryBody(r)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.GreaterOrEqual(t, b.AgentVersion, 0)
	})
}

// FuzzTurnQuery: any query of GET /v1/turns is a filter or an
// invalid-request error, never a panic; a cursor a page gave decodes to
// what it was made of.
func FuzzTurnQuery(f *testing.F) {
	for _, s := range []string{"", "status=running&limit=10", "since=2026-11-29T00:00:00Z&min_cost=0.5", "limit=0", "limit=x",
		"before=AAAA", "status=done", "agent_id=a&agent_id=b", "min_cost=-1", "nope=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		filter, err := turnFilter(q)
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		if filter.Before != nil {
			again, err := decodeTurnCursor(encodeTurnCursor(*filter.Before))
			require.NoError(t, err)
			require.True(t, again.CreatedAt.Equal(filter.Before.CreatedAt))
			require.Equal(t, filter.Before.JobID, again.JobID)
		}
	})
}
