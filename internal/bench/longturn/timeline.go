package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/agentflow/agentflow/internal/timeline"
)

// readTimeline times the turn's timeline over the gateway's HTTP API:
// the first page as the turn page loads it, the last, and all of them.
func (r *report) readTimeline(ctx context.Context, api, token, streamID string) error {
	page := func(after, limit int) (timeline.Timeline, float64, error) {
		var tl timeline.Timeline
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/%s/timeline?after=%d&limit=%d", api, streamID, after, limit), nil)
		if err != nil {
			return tl, 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return tl, 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		took := float64(time.Since(start).Microseconds()) / 1000
		if err != nil {
			return tl, 0, err
		}
		if resp.StatusCode != http.StatusOK {
			return tl, 0, fmt.Errorf("GET timeline: %d %s", resp.StatusCode, clip(string(body)))
		}
		return tl, took, json.Unmarshal(body, &tl)
	}
	tl, took, err := page(-1, 200)
	if err != nil {
		return err
	}
	r.TimelineFirstPage = round(took)
	if _, took, err = page(max(-1, tl.Totals.Steps-101), 200); err != nil {
		return err
	}
	r.TimelineLastPage = round(took)
	after, all, steps := -1, 0.0, 0
	for {
		tl, took, err = page(after, 1000)
		if err != nil {
			return err
		}
		all += took
		steps += len(tl.Items)
		if tl.NextAfter == nil {
			break
		}
		after = *tl.NextAfter
	}
	r.TimelineAllPages, r.TimelineSteps = round(all), steps
	return nil
}
