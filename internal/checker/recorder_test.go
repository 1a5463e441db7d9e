package checker_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/checker"
)

// TestStreamRecorder: what a client feeds it is the Stream the checker
// reads, and Resume answers where to go on from.
func TestStreamRecorder(t *testing.T) {
	tests := []struct {
		name   string
		after  int64
		feed   func(s *checker.StreamRecorder)
		want   checker.Stream
		resume int64
	}{
		{"from the start, resumed once", 0, func(s *checker.StreamRecorder) {
			s.Event(1)
			s.Event(2)
			s.Resume()
			s.Event(3)
			s.Ended(checker.Completed, "Hi")
		}, checker.Stream{Client: "c", Job: "j", Indexes: []int64{1, 2, 3}, Resumes: 1, End: checker.Completed, Answer: "Hi"}, 3},
		{"joined late, nothing yet", 7, func(*checker.StreamRecorder) {},
			checker.Stream{Client: "c", Job: "j", From: 7}, 7},
		{"resumes after the highest", 0, func(s *checker.StreamRecorder) {
			s.Event(1)
			s.Event(3)
			s.Event(2)
		}, checker.Stream{Client: "c", Job: "j", Indexes: []int64{1, 3, 2}}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r checker.Recorder
			s := r.Follow("c", "j", tt.after)
			tt.feed(s)
			require.Equal(t, []checker.Stream{tt.want}, r.Streams())
			require.Equal(t, tt.resume, s.Last())
			require.Equal(t, tt.resume, s.Resume())
		})
	}
}

// TestRecorderConcurrent: many clients feeding their streams while
// others read snapshots and record call ends; the result checks clean.
// Run with -race.
func TestRecorderConcurrent(t *testing.T) {
	const clients, events = 16, 300
	var r checker.Recorder
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			job := fmt.Sprintf("job-%d", c%4)
			s := r.Follow(fmt.Sprintf("c%d", c), job, 0)
			for i := int64(1); i <= events; i++ {
				if i%100 == 0 {
					assert.Equal(t, i-1, s.Resume()) // not require: this is not the test's goroutine
				}
				s.Event(i)
				if i%50 == 0 {
					r.CallEnded(fmt.Sprintf("%s-call-%d", job, i), job, checker.CallOK)
				}
			}
			s.Ended(checker.Completed, "done")
		})
		wg.Go(func() {
			for range 50 {
				_ = r.Streams()
				_ = r.Writes()
			}
		})
	}
	wg.Wait()
	streams := r.Streams()
	require.Len(t, streams, clients)
	var turns []checker.Turn
	var results []checker.Result
	for j := range 4 {
		job := fmt.Sprintf("job-%d", j)
		turns = append(turns, checker.Turn{Job: job, Accepted: true, Chains: 1, End: checker.Completed})
		results = append(results, checker.Result{Job: job, Rows: 1, Answer: "done"})
	}
	writes := r.Writes()
	require.Len(t, writes, 4*events/50)
	for i := range writes {
		writes[i].Requests, writes[i].Effects = 1, 1
	}
	rep := checker.Check(checker.Records{Turns: turns, Streams: streams, Writes: writes, Results: results})
	require.NoError(t, rep.Err())
	require.Equal(t, clients*events, rep.Stats.Events)
	require.Equal(t, clients*3, rep.Stats.Resumes)
}

// TestRecorderWrites: the counting APIs' writes joined with the streams'
// outcomes; a call the stream ended that no API received is a write of
// zero requests, and so a lost one.
func TestRecorderWrites(t *testing.T) {
	var r checker.Recorder
	r.CallEnded("k1", "job-1", checker.CallOK)
	r.CallEnded("k1", "job-1", checker.CallFailed) // the first word stands
	r.CallEnded("k3", "job-2", checker.CallOK)
	plain := []checker.Write{{Key: "k1", Requests: 1, Effects: 1}, {Key: "k2", Job: "job-9", Requests: 2, Effects: 2}}
	dedup := []checker.Write{{Key: "k0", Idempotent: true, Requests: 2, Effects: 1}}
	got := r.Writes(plain, dedup)
	require.Equal(t, []checker.Write{
		{Key: "k0", Idempotent: true, Requests: 2, Effects: 1},
		{Key: "k1", Job: "job-1", Outcome: checker.CallOK, Requests: 1, Effects: 1},
		{Key: "k2", Job: "job-9", Requests: 2, Effects: 2},
		{Key: "k3", Job: "job-2", Outcome: checker.CallOK},
	}, got)
	rep := checker.Check(checker.Records{Writes: got})
	var kinds []checker.Kind
	for _, v := range rep.Violations {
		kinds = append(kinds, v.Kind)
	}
	require.Equal(t, []checker.Kind{checker.DuplicateWrite, checker.LostWrite}, kinds)
}
