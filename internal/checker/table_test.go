package checker_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/checker"
)

// TestTable: one row per trial, counts with thousands separators, the
// recovery in seconds (or why there is none), then the violations.
func TestTable(t *testing.T) {
	failover := checker.Report{Trial: "PostgreSQL failover under load", Stats: checker.Stats{
		Turns: 241, Ended: 240, Writes: 410, Requests: 415, Events: 9812, Resumes: 37,
		Faulted: true, Recovered: true, Recovery: 4180 * time.Millisecond, Rate: 8,
	}}
	tests := []struct {
		name    string
		reports []checker.Report
		want    string
	}{
		{"clean", []checker.Report{failover}, "" +
			"| trial | turns | turns/s | writes | events | resumes | lost | duplicated | other violations | recovery |\n" +
			"|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n" +
			"| PostgreSQL failover under load | 240 | 8.0 | 410 | 9,812 | 37 | 0 | 0 | 0 | 4.2 s |\n"},
		{"violations", []checker.Report{
			failover,
			{Trial: "S3 down | 30 s", Stats: checker.Stats{Ended: 1234567, Faulted: true}, Violations: []checker.Violation{
				{Kind: checker.LostWrite, Subject: "k1", Detail: "write k1 was lost"},
				{Kind: checker.DuplicateWrite, Subject: "k2", Detail: "write k2 twice"},
				{Kind: checker.DuplicateWrite, Subject: "k3", Detail: "write k3 twice"},
				{Kind: checker.NotRecovered, Subject: "S3 down | 30 s", Detail: "no probe succeeded"},
			}},
			{Trial: "baseline", Stats: checker.Stats{Ended: 12}},
		}, "" +
			"| trial | turns | turns/s | writes | events | resumes | lost | duplicated | other violations | recovery |\n" +
			"|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n" +
			"| PostgreSQL failover under load | 240 | 8.0 | 410 | 9,812 | 37 | 0 | 0 | 0 | 4.2 s |\n" +
			"| S3 down \\| 30 s | 1,234,567 | 0.0 | 0 | 0 | 0 | 1 | 2 | 1 | not recovered |\n" +
			"| baseline | 12 | 0.0 | 0 | 0 | 0 | 0 | 0 | 0 | no fault |\n" +
			"\nViolations:\n\n" +
			"- S3 down \\| 30 s: lost write (k1): write k1 was lost\n" +
			"- S3 down \\| 30 s: duplicate write (k2): write k2 twice\n" +
			"- S3 down \\| 30 s: duplicate write (k3): write k3 twice\n" +
			"- S3 down \\| 30 s: not recovered (S3 down | 30 s): no probe succeeded\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, checker.Table(tt.reports))
		})
	}
}

// TestTableOfCheck: a checked trial renders as its counts say.
func TestTableOfCheck(t *testing.T) {
	r := clean()
	r.Writes[0].Requests = 2
	got := checker.Table([]checker.Report{checker.Check(r)})
	require.Contains(t, got, "| partition of a gateway | 3 | 0.0 | 5 | 30 | 1 | 0 | 1 | 0 | 2.5 s |\n")
	require.Contains(t, got, "- partition of a gateway: duplicate write (k1): write k1 of turn job-1 was applied 2 times")
}

// TestRate: the ended turns over the workload's span.
func TestRate(t *testing.T) {
	r := clean()
	r.Began = time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	r.Ended = r.Began.Add(2 * time.Second)
	rep := checker.Check(r)
	require.InDelta(t, float64(rep.Stats.Ended)/2, rep.Stats.Rate, 1e-9)
	r.Ended = r.Began
	require.Zero(t, checker.Check(r).Stats.Rate, "no span, no rate")
}
