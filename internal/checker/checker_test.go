package checker_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/checker"
)

var t0 = time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)

// seq returns the indexes from..to.
func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// clean is a trial that kept every promise: three turns (two completed,
// one failed), writes of each outcome to both kinds of API, clients that
// resumed or joined late, an approval and a denial, the results, a
// conversation, and a fault healed 2.5 s before a probe succeeded.
func clean() checker.Records {
	return checker.Records{
		Trial: "partition of a gateway",
		Turns: []checker.Turn{
			{Job: "job-1", Accepted: true, Chains: 1, End: checker.Completed},
			{Job: "job-2", Accepted: true, Chains: 1, End: checker.Completed},
			{Job: "job-3", Accepted: true, Chains: 1, End: checker.Failed},
		},
		Writes: []checker.Write{
			{Key: "k1", Job: "job-1", Outcome: checker.CallOK, Requests: 1, Effects: 1},
			{Key: "k2", Job: "job-2", Idempotent: true, Outcome: checker.CallOK, Requests: 3, Effects: 1},
			{Key: "k3", Job: "job-1", Outcome: checker.CallUnknown, Requests: 1, Effects: 1},
			{Key: "k4", Job: "job-3", Outcome: checker.CallFailed},
			{Key: "k5", Job: "job-1", Outcome: checker.CallOK, Requests: 1, Effects: 1},
		},
		Streams: []checker.Stream{
			{Client: "c1", Job: "job-1", Indexes: seq(1, 10), End: checker.Completed, Answer: "Hello"},
			{Client: "c2", Job: "job-1", Indexes: seq(1, 10), Resumes: 1, End: checker.Completed, Answer: "Hello"},
			{Client: "c3", Job: "job-2", From: 3, Indexes: seq(4, 8), End: checker.Completed, Answer: "Two"},
			{Client: "c4", Job: "job-3", Indexes: seq(1, 5), End: checker.Failed},
		},
		Approvals: []checker.Approval{
			{ID: "a1", Job: "job-1", Approve: true, Sent: 2, Accepted: 1, Key: "k5"},
			{ID: "a2", Job: "job-2", Approve: false, Sent: 1, Accepted: 1, ToolEnd: "rejected"},
		},
		Results: []checker.Result{
			{Job: "job-1", Rows: 1, Answer: "Hello"},
			{Job: "job-2", Rows: 1, Answer: "Two"},
			{Job: "job-3", Rows: 1},
		},
		Sessions: []checker.Session{{
			ID: "s1",
			Sent: []checker.Message{
				{Job: "job-1", Prompt: "hi", Accepted: true},
				{Job: "job-2", Prompt: "more", Accepted: true},
			},
			Transcript: []checker.Entry{
				{Job: "job-1", Role: "user", Text: "hi"},
				{Job: "job-1", Role: "assistant"}, // a tool call
				{Job: "job-1", Role: "tool", Text: "{}"},
				{Job: "job-1", Role: "assistant", Text: "Hello"},
				{Job: "job-2", Role: "user", Text: "more"},
				{Job: "job-2", Role: "assistant", Text: "Two"},
			},
		}},
		Fault:  checker.Fault{Injected: t0, Healed: t0.Add(10 * time.Second)},
		Probes: []checker.Probe{{At: t0.Add(5 * time.Second)}, {At: t0.Add(13 * time.Second), OK: true}, {At: t0.Add(12500 * time.Millisecond), OK: true}},
	}
}

// TestCheckKinds: for each kind, records that exhibit it report it (and
// nothing else), and records that come close to it report nothing.
func TestCheckKinds(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *checker.Records)
		want []checker.Kind
	}{
		{"clean", func(*checker.Records) {}, nil},

		{"still running", func(r *checker.Records) { r.Turns[0].Chains, r.Turns[0].Running, r.Turns[0].End = 0, 1, "" }, []checker.Kind{checker.NotEnded}},
		{"accepted, no chain", func(r *checker.Records) { r.Turns[1].Chains = 0 }, []checker.Kind{checker.NotEnded}},
		{"start in doubt, never began", func(r *checker.Records) {
			r.Turns[1] = checker.Turn{Job: "job-2"}
			r.Streams[2].Indexes, r.Streams[2].End = nil, ""
		}, nil},
		{"start in doubt, streamed, no chain", func(r *checker.Records) {
			r.Turns[1] = checker.Turn{Job: "job-2"}
			r.Streams[2].End = ""
		}, []checker.Kind{checker.NotEnded}},

		{"two chains", func(r *checker.Records) { r.Turns[0].Chains = 2 }, []checker.Kind{checker.EndedTwice}},
		{"a chain closed and another running", func(r *checker.Records) { r.Turns[2].Running = 1 }, []checker.Kind{checker.EndedTwice}},

		{"not idempotent, sent twice", func(r *checker.Records) { r.Writes[0].Requests, r.Writes[0].Effects = 2, 2 }, []checker.Kind{checker.DuplicateWrite}},
		{"unknown, sent twice", func(r *checker.Records) { r.Writes[2].Requests, r.Writes[2].Effects = 2, 2 }, []checker.Kind{checker.DuplicateWrite}},
		{"no outcome, sent twice", func(r *checker.Records) { r.Writes[2].Outcome, r.Writes[2].Requests = "", 2 }, []checker.Kind{checker.DuplicateWrite}},
		{"idempotent, applied twice", func(r *checker.Records) { r.Writes[1].Effects = 2 }, []checker.Kind{checker.DuplicateWrite}},
		{"idempotent, many requests applied once", func(r *checker.Records) { r.Writes[1].Requests = 9 }, nil},

		{"ok, never received", func(r *checker.Records) { r.Writes[0].Requests, r.Writes[0].Effects = 0, 0 }, []checker.Kind{checker.LostWrite}},
		{"idempotent ok, never applied", func(r *checker.Records) { r.Writes[1].Effects = 0 }, []checker.Kind{checker.LostWrite}},
		{"unknown, never received", func(r *checker.Records) { r.Writes[2].Requests, r.Writes[2].Effects = 0, 0 }, nil},

		{"failed, received", func(r *checker.Records) { r.Writes[3].Requests, r.Writes[3].Effects = 1, 1 }, []checker.Kind{checker.FailedButMade}},
		{"failed, received twice", func(r *checker.Records) { r.Writes[3].Requests = 2 }, []checker.Kind{checker.DuplicateWrite, checker.FailedButMade}},

		{"an index missing", func(r *checker.Records) { r.Streams[0].Indexes = slices.Delete(seq(1, 10), 4, 6) }, []checker.Kind{checker.Gap}},
		{"joined late, nothing before owed", func(r *checker.Records) { r.Streams[2].From = 6; r.Streams[2].Indexes = seq(7, 8) }, nil},

		{"no terminal event", func(r *checker.Records) { r.Streams[0].End = "" }, []checker.Kind{checker.MissingTerminal}},
		{"no terminal event, turn not ended", func(r *checker.Records) {
			r.Turns[1].Chains, r.Turns[1].Running, r.Turns[1].End = 0, 1, ""
			r.Streams[2].End = ""
		}, []checker.Kind{checker.NotEnded}},

		{"resumed and got an index again", func(r *checker.Records) { r.Streams[1].Indexes = append(seq(1, 4), seq(4, 10)...) }, []checker.Kind{checker.DuplicateEvent}},
		{"index at or before where it started", func(r *checker.Records) { r.Streams[2].Indexes = seq(3, 8) }, []checker.Kind{checker.DuplicateEvent}},

		{"lower index after higher", func(r *checker.Records) { r.Streams[0].Indexes = []int64{1, 2, 4, 3, 5, 6, 7, 8, 9, 10} }, []checker.Kind{checker.OutOfOrder}},
		{"index zero", func(r *checker.Records) { r.Streams[3].Indexes = append([]int64{0}, seq(1, 5)...) }, []checker.Kind{checker.OutOfOrder}},

		{"decided twice", func(r *checker.Records) { r.Approvals[0].Accepted = 2 }, []checker.Kind{checker.DecidedTwice}},
		{"sent twice, accepted once", func(r *checker.Records) { r.Approvals[1].Sent = 3 }, nil},

		{"approved, never ran", func(r *checker.Records) { r.Writes[4] = checker.Write{Key: "k5", Job: "job-1"} }, []checker.Kind{checker.NotHonoured}},
		{"denied, ran", func(r *checker.Records) { r.Approvals[1].ToolEnd = "ok" }, []checker.Kind{checker.NotHonoured}},
		{"approved, not ran, turn failed", func(r *checker.Records) {
			r.Approvals = append(r.Approvals, checker.Approval{ID: "a3", Job: "job-3", Approve: true, Sent: 1, Accepted: 1, ToolEnd: "timed_out"})
		}, nil},
		{"denied, ran, decision in doubt", func(r *checker.Records) { r.Approvals[1].Accepted, r.Approvals[1].ToolEnd = 0, "ok" }, nil},

		{"no result", func(r *checker.Records) { r.Results = r.Results[1:] }, []checker.Kind{checker.ResultMissing}},
		{"two results", func(r *checker.Records) { r.Results[1].Rows = 2 }, []checker.Kind{checker.ResultTwice}},
		{"two result records", func(r *checker.Records) { r.Results = append(r.Results, checker.Result{Job: "job-3", Rows: 1}) }, []checker.Kind{checker.ResultTwice}},

		{"stored answer differs", func(r *checker.Records) { r.Results[0].Answer = "Goodbye" }, []checker.Kind{checker.ResultMismatch, checker.ResultMismatch}},
		{"streamed completed, turn failed", func(r *checker.Records) { r.Streams[3].End = checker.Completed }, []checker.Kind{checker.ResultMismatch}},
		{"answers differ in spaces only", func(r *checker.Records) { r.Results[0].Answer = " Hello\n" }, nil},

		{"accepted message missing", func(r *checker.Records) { r.Sessions[0].Transcript = r.Sessions[0].Transcript[:4] }, []checker.Kind{checker.TranscriptBroken}},
		{"message twice", func(r *checker.Records) {
			s := &r.Sessions[0]
			s.Transcript = append(s.Transcript, s.Transcript[4:]...)
		}, []checker.Kind{checker.TranscriptBroken}},
		{"messages out of order", func(r *checker.Records) {
			s := &r.Sessions[0]
			s.Transcript = append(slices.Clone(s.Transcript[4:]), s.Transcript[:4]...)
		}, []checker.Kind{checker.TranscriptBroken}},
		{"message without its answer", func(r *checker.Records) { r.Sessions[0].Transcript = r.Sessions[0].Transcript[:5] }, []checker.Kind{checker.TranscriptBroken}},
		{"message nobody sent", func(r *checker.Records) {
			r.Sessions[0].Transcript = append(r.Sessions[0].Transcript, checker.Entry{Job: "job-9", Role: "user", Text: "who?"})
		}, []checker.Kind{checker.TranscriptBroken}},
		{"message in doubt, absent", func(r *checker.Records) {
			r.Sessions[0].Sent = append(r.Sessions[0].Sent, checker.Message{Job: "job-4", Prompt: "maybe"})
		}, nil},
		{"running turn's message, no answer yet", func(r *checker.Records) {
			r.Turns[1].Chains, r.Turns[1].Running, r.Turns[1].End = 0, 1, ""
			r.Streams[2].End = ""
			r.Sessions[0].Transcript = r.Sessions[0].Transcript[:5]
		}, []checker.Kind{checker.NotEnded}},
		{"failed turn's message, no answer", func(r *checker.Records) {
			s := &r.Sessions[0]
			s.Sent = append(s.Sent, checker.Message{Job: "job-3", Prompt: "fail", Accepted: true})
			s.Transcript = append(s.Transcript, checker.Entry{Job: "job-3", Role: "user", Text: "fail"})
		}, nil},

		{"no probe after the heal", func(r *checker.Records) { r.Probes = r.Probes[:1] }, []checker.Kind{checker.NotRecovered}},
		{"success only before the heal", func(r *checker.Records) { r.Probes = []checker.Probe{{At: t0.Add(time.Second), OK: true}} }, []checker.Kind{checker.NotRecovered}},
		{"fault without a heal", func(r *checker.Records) { r.Fault.Healed = time.Time{} }, nil},
	}
	covered := map[checker.Kind]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clean()
			tt.edit(&r)
			got := checker.Check(r)
			var kinds []checker.Kind
			for _, v := range got.Violations {
				kinds = append(kinds, v.Kind)
				require.NotEmpty(t, v.Subject)
				require.NotEmpty(t, v.Detail)
			}
			require.Equal(t, tt.want, kinds, "%v", got.Violations)
			require.Equal(t, len(tt.want) == 0, got.Err() == nil)
		})
		for _, k := range tt.want {
			covered[k] = true
		}
	}
	for _, k := range checker.Kinds() {
		require.True(t, covered[k], "no case exhibits %s", k)
	}
}

// TestCheckStats: a clean trial's counts, and its recovery measured from
// the heal, or from the injection for a fault without one.
func TestCheckStats(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *checker.Records)
		want checker.Stats
	}{
		{"healed", func(*checker.Records) {}, checker.Stats{
			Turns: 3, Ended: 3, Writes: 5, Requests: 6, Events: 30, Resumes: 1,
			Faulted: true, Recovered: true, Recovery: 2500 * time.Millisecond,
		}},
		{"no heal", func(r *checker.Records) { r.Fault.Healed = time.Time{} }, checker.Stats{
			Turns: 3, Ended: 3, Writes: 5, Requests: 6, Events: 30, Resumes: 1,
			Faulted: true, Recovered: true, Recovery: 12500 * time.Millisecond,
		}},
		{"no fault", func(r *checker.Records) { r.Fault, r.Probes = checker.Fault{}, nil }, checker.Stats{
			Turns: 3, Ended: 3, Writes: 5, Requests: 6, Events: 30, Resumes: 1,
		}},
		{"not recovered", func(r *checker.Records) { r.Probes = nil }, checker.Stats{
			Turns: 3, Ended: 3, Writes: 5, Requests: 6, Events: 30, Resumes: 1, Faulted: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clean()
			tt.edit(&r)
			require.Equal(t, tt.want, checker.Check(r).Stats)
		})
	}
}

// TestCheckDetails: each violation names its subject and says what
// happened in a sentence of its own.
func TestCheckDetails(t *testing.T) {
	tests := []struct {
		name string
		edit func(r *checker.Records)
		want checker.Violation
	}{
		{"duplicate write", func(r *checker.Records) { r.Writes[0].Requests, r.Writes[0].Effects = 2, 2 }, checker.Violation{
			Kind: checker.DuplicateWrite, Subject: "k1",
			Detail: "write k1 of turn job-1 was applied 2 times (2 requests): the API deduplicates nothing, so the product must send it at most once",
		}},
		{"gap", func(r *checker.Records) { r.Streams[0].Indexes = slices.Delete(seq(1, 10), 4, 6) }, checker.Violation{
			Kind: checker.Gap, Subject: "c1",
			Detail: "client c1 of turn job-1 never received event(s) 5–6 of 1–10",
		}},
		{"not ended", func(r *checker.Records) { r.Turns[1].Chains = 0 }, checker.Violation{
			Kind: checker.NotEnded, Subject: "job-2",
			Detail: "turn job-2 was accepted by the gateway but never ended: Temporal holds no closed workflow chain for it",
		}},
		{"lost message", func(r *checker.Records) { r.Sessions[0].Transcript = r.Sessions[0].Transcript[:4] }, checker.Violation{
			Kind: checker.TranscriptBroken, Subject: "s1",
			Detail: "session s1 lost message job-2: the gateway accepted it, and the transcript does not hold it",
		}},
		{"not recovered", func(r *checker.Records) { r.Probes = r.Probes[:1] }, checker.Violation{
			Kind: checker.NotRecovered, Subject: "fault",
			Detail: "no probe turn succeeded after the fault healed (1 probes ran)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := clean()
			tt.edit(&r)
			require.Equal(t, []checker.Violation{tt.want}, checker.Check(r).Violations)
		})
	}
}

// TestCheckTranscriptByText: messages sent without job ids match the
// transcript's entries by their text, repeats of a text in turn.
func TestCheckTranscriptByText(t *testing.T) {
	msg := func(p string) checker.Message { return checker.Message{Prompt: p, Accepted: true} }
	user := func(p string) checker.Entry { return checker.Entry{Role: "user", Text: p} }
	answer := checker.Entry{Role: "assistant", Text: "ok"}
	tests := []struct {
		name       string
		transcript []checker.Entry
		want       int
	}{
		{"each once", []checker.Entry{user("a"), answer, user("b"), answer, user("a"), answer}, 0},
		{"a repeat too many", []checker.Entry{user("a"), answer, user("b"), answer, user("a"), answer, user("a"), answer}, 1},
		{"the second a missing", []checker.Entry{user("a"), answer, user("b"), answer}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := checker.Records{Sessions: []checker.Session{{ID: "s", Sent: []checker.Message{msg("a"), msg("b"), msg("a")}, Transcript: tt.transcript}}}
			require.Len(t, checker.Check(r).Violations, tt.want)
		})
	}
}

// TestCheckDeterministic: the same records in any order report the same
// violations in the same order.
func TestCheckDeterministic(t *testing.T) {
	r := clean()
	r.Turns[0].Chains = 2
	r.Writes[0].Requests, r.Writes[3].Requests = 3, 1
	r.Streams[0].Indexes = []int64{1, 3, 2, 2, 6}
	r.Streams[1].End = ""
	r.Approvals[0].Accepted = 2
	want := checker.Check(r).Violations
	require.Len(t, want, 8)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20 {
		s := r
		s.Writes = slices.Clone(r.Writes)
		s.Streams = slices.Clone(r.Streams)
		s.Turns = slices.Clone(r.Turns)
		rng.Shuffle(len(s.Writes), func(i, j int) { s.Writes[i], s.Writes[j] = s.Writes[j], s.Writes[i] })
		rng.Shuffle(len(s.Streams), func(i, j int) { s.Streams[i], s.Streams[j] = s.Streams[j], s.Streams[i] })
		rng.Shuffle(len(s.Turns), func(i, j int) { s.Turns[i], s.Turns[j] = s.Turns[j], s.Turns[i] })
		require.Equal(t, want, checker.Check(s).Violations)
	}
}

// TestParse: the product's spellings of an end and of a call's outcome.
func TestParse(t *testing.T) {
	ends := map[string]checker.End{
		"STATUS_COMPLETED": checker.Completed, "COMPLETED": checker.Completed, "completed": checker.Completed,
		"STATUS_FAILED": checker.Failed, "rejected": checker.Failed, "STATUS_CANCELED": checker.Canceled,
		"STATUS_RETRYING": "", "STATUS_RUNNING": "", "": "",
	}
	for in, want := range ends {
		require.Equal(t, want, checker.ParseEnd(in), in)
	}
	outcomes := map[string]checker.Outcome{
		"ok": checker.CallOK, "error": checker.CallFailed, "rejected": checker.CallFailed, "timed_out": checker.CallFailed,
		"unknown": checker.CallUnknown, "": "",
	}
	for in, want := range outcomes {
		require.Equal(t, want, checker.ParseOutcome(in), in)
	}
}
