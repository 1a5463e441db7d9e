package checker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is the kind of a broken promise.
type Kind string

// The kinds of violation, in the order a report lists them.
const (
	NotEnded         Kind = "not ended"
	EndedTwice       Kind = "ended twice"
	DuplicateWrite   Kind = "duplicate write"
	LostWrite        Kind = "lost write"
	FailedButMade    Kind = "failed but made"
	Gap              Kind = "gap"
	DuplicateEvent   Kind = "duplicate event"
	OutOfOrder       Kind = "out of order"
	MissingTerminal  Kind = "missing terminal"
	DecidedTwice     Kind = "decided twice"
	NotHonoured      Kind = "not honoured"
	ResultMissing    Kind = "result missing"
	ResultTwice      Kind = "result twice"
	ResultMismatch   Kind = "result mismatch"
	TranscriptBroken Kind = "transcript broken"
	NotRecovered     Kind = "not recovered"
)

// Kinds returns every kind, in the order a report lists them.
func Kinds() []Kind {
	return []Kind{
		NotEnded, EndedTwice, DuplicateWrite, LostWrite, FailedButMade, Gap, DuplicateEvent, OutOfOrder,
		MissingTerminal, DecidedTwice, NotHonoured, ResultMissing, ResultTwice, ResultMismatch,
		TranscriptBroken, NotRecovered,
	}
}

// Violation is one broken promise.
type Violation struct {
	Kind Kind
	// Subject is what broke it: a job, a write's key, a client, an
	// approval id, a session, or "fault" (NotRecovered).
	Subject string
	// Detail says what happened in a sentence that stands alone.
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("%s (%s): %s", v.Kind, v.Subject, v.Detail) }

// Report is the checker's verdict on one trial.
type Report struct {
	Trial      string
	Violations []Violation
	Stats      Stats
}

// Stats count what a trial did.
type Stats struct {
	Turns    int // turns recorded
	Ended    int // turns with at least one closed chain
	Writes   int // writes recorded (keys)
	Requests int // requests the counting APIs received
	Events   int // events delivered to clients, over all streams
	Resumes  int // reconnects, over all streams
	// Rate is the turns that ended per second of the workload's span
	// (Records.Began to Ended); 0 without a span.
	Rate float64
	// Faulted says a fault was injected; Recovered that a probe
	// succeeded after it healed (or after it was injected, for a fault
	// without a heal), Recovery how long after.
	Faulted   bool
	Recovered bool
	Recovery  time.Duration
}

// Count returns the number of violations of kind k.
func (r Report) Count(k Kind) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == k {
			n++
		}
	}
	return n
}

// Err returns nil for a trial without violations, or an error that lists
// them.
func (r Report) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	lines := make([]string, len(r.Violations))
	for i, v := range r.Violations {
		lines[i] = v.String()
	}
	return errors.New(r.Trial + ": " + strings.Join(lines, "; "))
}

// Check judges a trial's records.
func Check(r Records) Report {
	c := newCheck(r)
	c.turns()
	c.writes()
	c.streams()
	c.approvals()
	c.results()
	c.sessions()
	c.recovery()
	sortViolations(c.out)
	if span := r.Ended.Sub(r.Began); span > 0 {
		c.stats.Rate = float64(c.stats.Ended) / span.Seconds()
	}
	return Report{Trial: r.Trial, Violations: c.out, Stats: c.stats}
}

// check is one run of Check: the records indexed by job and key, and
// what it found so far.
type check struct {
	r       Records
	turnOf  map[string]Turn
	writeOf map[string]Write
	out     []Violation
	stats   Stats
}

func newCheck(r Records) *check {
	c := &check{r: r, turnOf: map[string]Turn{}, writeOf: map[string]Write{}}
	for _, t := range r.Turns {
		c.turnOf[t.Job] = t
	}
	for _, w := range r.Writes {
		c.writeOf[w.Key] = w
	}
	return c
}

func (c *check) add(k Kind, subject, format string, args ...any) {
	c.out = append(c.out, Violation{Kind: k, Subject: subject, Detail: fmt.Sprintf(format, args...)})
}

// ended says the job's turn has a closed chain (a turn not recorded has
// none the checker knows of).
func (c *check) ended(job string) bool {
	t, ok := c.turnOf[job]
	return ok && t.Chains > 0
}

// turns checks that each turn ended exactly once. A turn whose start
// was in doubt was accepted all the same if a client got events of it.
func (c *check) turns() {
	c.stats.Turns = len(c.r.Turns)
	streamed := map[string]bool{}
	for _, s := range c.r.Streams {
		streamed[s.Job] = streamed[s.Job] || len(s.Indexes) > 0
	}
	for _, t := range c.r.Turns {
		accepted := t.Accepted || streamed[t.Job]
		if t.Chains > 0 {
			c.stats.Ended++
		}
		switch {
		case t.Chains > 1:
			c.add(EndedTwice, t.Job, "turn %s ended %d times: Temporal holds %d closed workflow chains for it, want one", t.Job, t.Chains, t.Chains)
		case t.Chains == 1 && t.Running > 0:
			c.add(EndedTwice, t.Job, "turn %s ended and began again: one closed workflow chain and %d running run(s) at the check", t.Job, t.Running)
		case t.Running > 0:
			c.add(NotEnded, t.Job, "turn %s had not ended at the check: %d run(s) still running", t.Job, t.Running)
		case t.Chains == 0 && accepted:
			c.add(NotEnded, t.Job, "turn %s was accepted by the gateway but never ended: Temporal holds no closed workflow chain for it", t.Job)
		}
	}
}

// recovery measures how long after the fault healed a probe succeeded.
func (c *check) recovery() {
	f := c.r.Fault
	if f.Injected.IsZero() {
		return
	}
	c.stats.Faulted = true
	from, what := f.Healed, "healed"
	if from.IsZero() {
		from, what = f.Injected, "was injected"
	}
	var first time.Time
	for _, p := range c.r.Probes {
		if p.OK && !p.At.Before(from) && (first.IsZero() || p.At.Before(first)) {
			first = p.At
		}
	}
	if first.IsZero() {
		c.add(NotRecovered, "fault", "no probe turn succeeded after the fault %s (%d probes ran)", what, len(c.r.Probes))
		return
	}
	c.stats.Recovered, c.stats.Recovery = true, first.Sub(from)
}

// sortViolations orders violations by kind (as Kinds lists them), then
// subject, then detail: two checks of the same records read the same.
func sortViolations(vs []Violation) {
	rank := map[Kind]int{}
	for i, k := range Kinds() {
		rank[k] = i
	}
	slices.SortStableFunc(vs, func(a, b Violation) int {
		if d := rank[a.Kind] - rank[b.Kind]; d != 0 {
			return d
		}
		if d := strings.Compare(a.Subject, b.Subject); d != 0 {
			return d
		}
		return strings.Compare(a.Detail, b.Detail)
	})
}
