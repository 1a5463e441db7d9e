package main

import (
	"slices"
	"sync"
	"time"
)

// usage is what the processes of a stack have used so far.
type usage struct {
	cpu, server float64 // CPU ms of the workers and of the Temporal server
	rss         float64 // the workers' resident memory, MiB
}

func sample(st *stack) usage {
	var u usage
	var err error
	if u.cpu, err = cpuMS(st.workers...); err != nil {
		progress("worker CPU: %v", err)
	}
	if st.server != 0 {
		if u.server, err = cpuMS(st.server); err != nil {
			progress("Temporal server CPU: %v", err)
		}
	}
	if u.rss, err = rssMiB(st.workers...); err != nil {
		progress("worker RSS: %v", err)
	}
	return u
}

// watchRSS samples the workers' resident memory every second until the
// function it returns is called, which returns the largest sample.
func watchRSS(st *stack) func() float64 {
	var mu sync.Mutex
	peak := 0.0
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if v, err := rssMiB(st.workers...); err == nil {
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return func() float64 {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

func (r *report) fromFollower(f *follower, calls int) {
	r.ToolCalls, r.Duplicates, r.Resumes, r.Failure = f.toolCalls, f.duplicates, f.resumes, f.failure
	r.InputTokens, r.CachedInputTokens = f.prompt, f.cached
	if f.prompt > 0 {
		r.CachedInputShare = float64(int64(float64(f.cached)/float64(f.prompt)*1000+0.5)) / 1000
	}
	steps := f.stepTimes(calls)
	r.StepP50First100 = median(steps[:min(100, len(steps))])
	r.StepP50Last100 = median(steps[max(0, len(steps)-100):])
}

func (r *report) fromModel(m *model) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.ModelRequests, r.MaxModelRequest = m.requests, m.maxSize
	r.FirstModelRequest, r.LastModelRequest = m.firstBytes, m.lastBytes
}

func (r *report) fromRuns(rs []workflowRun) {
	r.Runs = len(rs)
	if len(rs) > 0 {
		r.LastRunStatus = rs[len(rs)-1].status
	}
	for _, x := range rs {
		r.RunEvents = append(r.RunEvents, x.events)
		r.RunHistoryBytes = append(r.RunHistoryBytes, x.bytes)
		r.MaxRunEvents, r.MaxRunHistoryBytes = max(r.MaxRunEvents, x.events), max(r.MaxRunHistoryBytes, x.bytes)
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return round(s[len(s)/2])
}

func round(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func clip(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
