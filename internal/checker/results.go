package checker

import (
	"maps"
	"slices"
	"strings"
)

// results checks each ended turn's stored result: one row, whose answer
// is the one its clients streamed.
func (c *check) results() {
	rows, answer := map[string]int{}, map[string]string{}
	for _, r := range c.r.Results {
		rows[r.Job] += r.Rows
		if _, ok := answer[r.Job]; !ok && r.Rows > 0 {
			answer[r.Job] = r.Answer
		}
	}
	jobs := map[string]bool{}
	for job := range rows {
		jobs[job] = true
	}
	for job := range c.turnOf {
		jobs[job] = true
	}
	for _, job := range slices.Sorted(maps.Keys(jobs)) {
		switch n := rows[job]; {
		case n > 1:
			c.add(ResultTwice, job, "turn %s has %d stored results, want one", job, n)
		case n == 0 && c.ended(job):
			c.add(ResultMissing, job, "turn %s ended, and no result of it is stored", job)
		}
	}
	for _, s := range c.r.Streams {
		c.streamedResult(s, answer)
	}
}

// streamedResult compares what a client saw the turn end with against
// the turn's end and its stored answer.
func (c *check) streamedResult(s Stream, answer map[string]string) {
	if s.End == "" {
		return
	}
	if end := c.turnOf[s.Job].End; end != "" && (end == Completed) != (s.End == Completed) {
		c.add(ResultMismatch, s.Job, "client %s saw turn %s end %s, and the turn's result says %s", s.Client, s.Job, s.End, end)
	}
	stored, ok := answer[s.Job]
	if s.End != Completed || !ok {
		return
	}
	if strings.TrimSpace(stored) != strings.TrimSpace(s.Answer) {
		c.add(ResultMismatch, s.Job, "client %s of turn %s streamed the answer %q, and the stored answer is %q", s.Client, s.Job, short(s.Answer), short(stored))
	}
}

// short clips a text for a detail.
func short(s string) string {
	const n = 120
	s = strings.TrimSpace(s)
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}
