package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// result is one line of ../shared/peers/run's output.
type result struct {
	Peer        string  `json:"peer"`
	Mode        string  `json:"mode"`
	P50         float64 `json:"turn_p50_ms"`
	P99         float64 `json:"turn_p99_ms"`
	Concurrency int     `json:"concurrency"`
	PerSecond   float64 `json:"turns_per_s"`
	Errors      int64   `json:"errors"`
	// FirstCall is the p50, over the runs one after another, of the time
	// from the client's start to the first model-like step's beginning:
	// what Temporal alone puts before a turn's first model request.
	FirstCall  float64 `json:"first_call_p50_ms,omitempty"`
	FirstError string  `json:"first_error,omitempty"`
}

// printReport prints the floor's lines as a table, and agentflow's
// figures as multiples of the turn-shaped floor's.
func printReport(w io.Writer, floorFile, againstFile string) error {
	floor, err := readResults(floorFile)
	if err != nil {
		return err
	}
	against, err := readResults(againstFile)
	if err != nil {
		return err
	}
	var shape, af *result
	for i := range floor {
		if floor[i].Mode == "turn shape" {
			shape = &floor[i]
		}
	}
	if len(against) > 0 {
		af = &against[0]
	}
	fmt.Fprintln(w, "\n| Temporal alone, same stack | turn p50 ms | turn p99 ms | first model-like step p50 ms | turns/s | errors |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range floor {
		first := "–"
		if r.FirstCall > 0 {
			first = fmt.Sprintf("%.1f", r.FirstCall)
		}
		fmt.Fprintf(w, "| %s | %.1f | %.1f | %s | %.1f | %d |\n", r.Mode, r.P50, r.P99, first, r.PerSecond, r.Errors)
	}
	if shape == nil || af == nil || shape.P50 == 0 || shape.PerSecond == 0 {
		fmt.Fprintln(w, "(no agentflow line or no turn-shaped floor: no ratios)")
		return nil
	}
	fmt.Fprintf(w, "\nagentflow over the turn-shaped floor: p50 %.2f×, p99 %.2f×, turns/s %.2f× (floor %.1f/s, agentflow %.1f/s)\n",
		af.P50/shape.P50, af.P99/shape.P99, af.PerSecond/shape.PerSecond, shape.PerSecond, af.PerSecond)
	return nil
}

// readResults reads the JSON lines of a file that start with '{'.
func readResults(path string) ([]result, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []result
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r result
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, nil
}
