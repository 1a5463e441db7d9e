package checker

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// CountingAPI is the far side of the tools' writes in a trial: an HTTP
// API that counts, by key, the requests it receives and the times it
// applies them. Each request is a POST whose JSON body may carry
//
//	{"key": "…", "job": "…", "delay_ms": 400}
//
// key names the write (else the Idempotency-Key header does), job the
// turn that made it, delay_ms how long to hold the answer. A write takes
// effect as it arrives, and its answer comes after the delay: a fault
// then lands with requests in flight, whose answers are lost. The answer
// is {"key", "requests", "effects", "applied"}, applied false for a
// request a deduplicating API did not apply again.
//
// Mount one per kind of far side: one that deduplicates nothing, and one
// that honours the key (Deduplicate), as the OpenAPI documents of the
// trial's tools declare. Its zero value deduplicates nothing, holds no
// answer, and is ready to use; it may serve any number of requests at
// once.
type CountingAPI struct {
	// Deduplicate has the API apply each key once, however many
	// requests carry it (it honours the Idempotency-Key).
	Deduplicate bool
	// Delay holds each answer, unless the request's delay_ms (above 0)
	// says otherwise; 0 answers at once.
	Delay time.Duration

	mu   sync.Mutex
	keys map[string]*counts
}

type counts struct {
	job               string
	requests, effects int
}

// The bounds of a request.
const (
	maxWriteBody = 64 << 10
	maxDelay     = time.Minute
)

// writeRequest is what a request to CountingAPI says.
type writeRequest struct {
	key   string
	job   string
	delay time.Duration // 0: the API's
}

// decodeWrite reads a request's key, job and delay from its body (empty,
// or a JSON object) and its Idempotency-Key header.
func decodeWrite(header string, body []byte) (writeRequest, error) {
	var b struct {
		Key     string `json:"key"`
		Job     string `json:"job"`
		DelayMS int64  `json:"delay_ms"`
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &b); err != nil {
			return writeRequest{}, fmt.Errorf("body: want a JSON object: %w", err)
		}
	}
	req := writeRequest{key: strings.TrimSpace(b.Key), job: b.Job}
	if req.key == "" {
		req.key = strings.TrimSpace(header)
	}
	if req.key == "" {
		return writeRequest{}, errors.New("no key: want the body's key or an Idempotency-Key header")
	}
	if b.DelayMS < 0 || b.DelayMS > maxDelay.Milliseconds() {
		return writeRequest{}, fmt.Errorf("delay_ms %d: want 0 to %d", b.DelayMS, maxDelay.Milliseconds())
	}
	req.delay = time.Duration(b.DelayMS) * time.Millisecond
	return req, nil
}

func (a *CountingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, map[string]any{"error": "POST a write"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWriteBody))
	if err != nil {
		status := http.StatusBadRequest
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			status = http.StatusRequestEntityTooLarge
		}
		answer(w, status, map[string]any{"error": "read body: " + err.Error()})
		return
	}
	req, err := decodeWrite(r.Header.Get("Idempotency-Key"), body)
	if err != nil {
		answer(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	c, applied := a.count(req)
	if wait := cmp.Or(req.delay, a.Delay); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return // the write stands; its answer is lost
		}
	}
	answer(w, http.StatusOK, map[string]any{"key": req.key, "requests": c.requests, "effects": c.effects, "applied": applied})
}

// count records a request, and whether it applied, and returns the key's
// counts after it.
func (a *CountingAPI) count(req writeRequest) (counts, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys == nil {
		a.keys = map[string]*counts{}
	}
	c := a.keys[req.key]
	if c == nil {
		c = &counts{job: req.job}
		a.keys[req.key] = c
	}
	c.requests++
	applied := !a.Deduplicate || c.effects == 0
	if applied {
		c.effects++
	}
	return *c, applied
}

func answer(w http.ResponseWriter, status int, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone: nothing to do
}

// Writes returns a snapshot of the writes received, by key (Outcome
// empty: Recorder.Writes joins the streams' word in).
func (a *CountingAPI) Writes() []Write {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Write, 0, len(a.keys))
	for _, key := range slices.Sorted(maps.Keys(a.keys)) {
		c := a.keys[key]
		out = append(out, Write{Key: key, Job: c.job, Idempotent: a.Deduplicate, Requests: c.requests, Effects: c.effects})
	}
	return out
}

// Reset forgets every write, for the next trial.
func (a *CountingAPI) Reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = nil
}
