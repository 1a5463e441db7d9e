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

func (r *report) fromFollower(f *follower) {
	r.ToolCalls, r.Duplicates, r.Resumes, r.Failure = f.toolCalls, f.duplicates, f.resumes, f.failure
	r.InputTokens, r.CachedInputTokens = f.prompt, f.cached
	if f.prompt > 0 {
		r.CachedInputShare = float64(int64(float64(f.cached)/float64(f.prompt)*1000+0.5)) / 1000
	}
}

// fromSteps fills the step times from the model's side.
func (r *report) fromSteps(steps []float64) {
	first := func(n int) []float64 { return steps[:min(n, len(steps))] }
	last := func(n int) []float64 { return steps[max(0, len(steps)-n):] }
	r.StepP50First100, r.StepP50Last100 = median(first(100)), median(last(100))
	r.StepP50First1000, r.StepP99First1000 = median(first(1000)), percentile(first(1000), 0.99)
	r.StepP50Last1000, r.StepP99Last1000 = median(last(1000)), percentile(last(1000), 0.99)
	if r.StepP50First1000 > 0 {
		r.StepLastFirst = float64(int64(r.StepP50Last1000/r.StepP50First1000*100+0.5)) / 100
	}
}

// percentile is the value below which a share p of v falls (nearest
// rank).
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	return round(s[min(max(i, 0), len(s)-1)])
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
