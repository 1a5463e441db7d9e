package checker

import (
	"maps"
	"slices"
	"sync"
)

// Recorder gathers what a trial's clients see while it runs, from any
// number of goroutines: their streams, and the outcome each call's
// tool_end gave. Its zero value is ready to use.
type Recorder struct {
	mu      sync.Mutex
	streams []*StreamRecorder
	ends    map[string]callEnd
}

type callEnd struct {
	job     string
	outcome Outcome
}

// Follow registers a client that follows job's turn, starting after
// index after (0: from the beginning), and returns its recorder.
func (r *Recorder) Follow(client, job string, after int64) *StreamRecorder {
	s := &StreamRecorder{s: Stream{Client: client, Job: job, From: after}}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.streams = append(r.streams, s)
	return s
}

// CallEnded records what a tool_end said of the call whose writes carry
// key. The first word on a key stands: every client of a turn reads the
// same log, and the stream checks catch one that does not.
func (r *Recorder) CallEnded(key, job string, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ends == nil {
		r.ends = map[string]callEnd{}
	}
	if _, ok := r.ends[key]; !ok {
		r.ends[key] = callEnd{job: job, outcome: o}
	}
}

// Streams returns a snapshot of every client's stream, in the order they
// were registered.
func (r *Recorder) Streams() []Stream {
	r.mu.Lock()
	recs := slices.Clone(r.streams)
	r.mu.Unlock()
	out := make([]Stream, len(recs))
	for i, s := range recs {
		out[i] = s.Stream()
	}
	return out
}

// Writes joins the counting APIs' writes (CountingAPI.Writes of each)
// with the outcomes the streams gave, sorted by key: a call the stream
// ended whose key no API received is a write of zero requests, so that a
// lost one is seen.
func (r *Recorder) Writes(counted ...[]Write) []Write {
	r.mu.Lock()
	ends := maps.Clone(r.ends)
	r.mu.Unlock()
	byKey := map[string]Write{}
	for _, ws := range counted {
		for _, w := range ws {
			byKey[w.Key] = w
		}
	}
	for key, e := range ends {
		w, ok := byKey[key]
		if !ok {
			w = Write{Key: key}
		}
		if w.Job == "" {
			w.Job = e.job
		}
		w.Outcome = e.outcome
		byKey[key] = w
	}
	out := make([]Write, 0, len(byKey))
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		out = append(out, byKey[key])
	}
	return out
}

// StreamRecorder records one client's stream of one turn as it reads it;
// its methods may be called from any goroutine.
type StreamRecorder struct {
	mu   sync.Mutex
	s    Stream
	last int64
}

// Event records a received event's event_index.
func (r *StreamRecorder) Event(index int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Indexes = append(r.s.Indexes, index)
	r.last = max(r.last, index)
}

// Ended records the terminal event (its status, as ParseEnd reads it),
// with the answer the client assembled.
func (r *StreamRecorder) Ended(end End, answer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.End, r.s.Answer = end, answer
}

// Resume records a reconnect and returns the index to resume after: the
// highest the client has (or where it started).
func (r *StreamRecorder) Resume() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s.Resumes++
	return max(r.last, r.s.From)
}

// Last returns the highest index received (or where the client started).
func (r *StreamRecorder) Last() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return max(r.last, r.s.From)
}

// Stream returns a snapshot of what the client received so far.
func (r *StreamRecorder) Stream() Stream {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.s
	s.Indexes = slices.Clone(r.s.Indexes)
	return s
}
