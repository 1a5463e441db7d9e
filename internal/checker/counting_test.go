package checker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/checker"
)

// post sends one write and returns the status and the decoded answer.
func post(ctx context.Context, url, header, body string) (int, map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, fmt.Errorf("new request: %w", err)
	}
	if header != "" {
		req.Header.Set("Idempotency-Key", header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("post: %w", err)
	}
	defer resp.Body.Close()
	var got map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("decode answer: %w", err)
	}
	return resp.StatusCode, got, nil
}

// TestCountingAPI: requests and effects by key, for an API that
// deduplicates nothing and one that honours the key; the key from the
// body or the header; bad requests refused and not counted.
func TestCountingAPI(t *testing.T) {
	type req struct{ header, body string }
	tests := []struct {
		name   string
		dedup  bool
		reqs   []req
		status []int
		want   []checker.Write
	}{
		{"not deduplicated", false,
			[]req{{"", `{"key":"k","job":"j"}`}, {"", `{"key":"k"}`}, {"", `{"key":"k"}`}},
			[]int{200, 200, 200},
			[]checker.Write{{Key: "k", Job: "j", Requests: 3, Effects: 3}}},
		{"deduplicated", true,
			[]req{{"k", `{"job":"j","run":"r","i":1}`}, {"k", ``}, {"k2", `{}`}},
			[]int{200, 200, 200},
			[]checker.Write{{Key: "k", Job: "j", Idempotent: true, Requests: 2, Effects: 1}, {Key: "k2", Idempotent: true, Requests: 1, Effects: 1}}},
		{"the body's key over the header's", false,
			[]req{{"h", `{"key":"b"}`}},
			[]int{200},
			[]checker.Write{{Key: "b", Requests: 1, Effects: 1}}},
		{"refused", false,
			[]req{{"", `{}`}, {"", `[1]`}, {"k", `{"key":`}, {"k", `{"delay_ms":-1}`}, {"k", `{"delay_ms":600000}`}},
			[]int{400, 400, 400, 400, 400},
			[]checker.Write{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &checker.CountingAPI{Deduplicate: tt.dedup}
			srv := httptest.NewServer(api)
			defer srv.Close()
			for i, r := range tt.reqs {
				status, got, err := post(t.Context(), srv.URL, r.header, r.body)
				require.NoError(t, err)
				require.Equal(t, tt.status[i], status, "%v: %v", r, got)
			}
			require.Equal(t, tt.want, api.Writes())
			api.Reset()
			require.Empty(t, api.Writes())
		})
	}
}

// TestCountingAPIAnswer: the answer says the key's counts and whether the
// request applied; anything but a POST is refused.
func TestCountingAPIAnswer(t *testing.T) {
	srv := httptest.NewServer(&checker.CountingAPI{Deduplicate: true})
	defer srv.Close()
	_, first, err := post(t.Context(), srv.URL, "k", "")
	require.NoError(t, err)
	require.Equal(t, map[string]any{"key": "k", "requests": 1.0, "effects": 1.0, "applied": true}, first)
	_, again, err := post(t.Context(), srv.URL, "k", "")
	require.NoError(t, err)
	require.Equal(t, map[string]any{"key": "k", "requests": 2.0, "effects": 1.0, "applied": false}, again)

	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestCountingAPIDelay: a write counts as it arrives and its answer is
// held; a client that gives up first loses the answer, not the write.
func TestCountingAPIDelay(t *testing.T) {
	api := &checker.CountingAPI{Delay: 100 * time.Millisecond}
	srv := httptest.NewServer(api)
	defer srv.Close()

	begin := time.Now()
	status, _, err := post(t.Context(), srv.URL, "held", "")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	require.GreaterOrEqual(t, time.Since(begin), 100*time.Millisecond)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, _, err = post(ctx, srv.URL, "", `{"key":"lost","delay_ms":5000}`)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, []checker.Write{
		{Key: "held", Requests: 1, Effects: 1},
		{Key: "lost", Requests: 1, Effects: 1},
	}, api.Writes())
}

// TestCountingAPIConcurrent: concurrent requests on shared keys are
// counted exactly, while snapshots are taken. Run with -race.
func TestCountingAPIConcurrent(t *testing.T) {
	const workers, each, keys = 16, 25, 5
	for _, dedup := range []bool{false, true} {
		t.Run(fmt.Sprintf("deduplicate=%t", dedup), func(t *testing.T) {
			api := &checker.CountingAPI{Deduplicate: dedup}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					for i := range each {
						status, _, err := post(t.Context(), srv.URL, "", fmt.Sprintf(`{"key":"k%d"}`, (w+i)%keys))
						assert.NoError(t, err) // not require: this is not the test's goroutine
						assert.Equal(t, http.StatusOK, status)
						_ = api.Writes()
					}
				})
			}
			wg.Wait()
			writes := api.Writes()
			require.Len(t, writes, keys)
			total := 0
			for _, w := range writes {
				total += w.Requests
				want := w.Requests
				if dedup {
					want = 1
				}
				require.Equal(t, want, w.Effects, w.Key)
			}
			require.Equal(t, workers*each, total)
		})
	}
}
