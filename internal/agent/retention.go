package agent

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentflow/agentflow/internal/words"
)

// Retention is how long a tenant's data is kept, by kind. The operator
// sets the deployment's, 0 keeping it forever; a tenant's catalog may
// only narrow them (Narrows), 0 taking the operator's (Within).
type Retention struct {
	// Blobs: a tenant's ownership of a blob it stored, counted from when
	// it stored it. The blob itself goes with its last owner, unless a
	// result still names it.
	Blobs time.Duration `json:"blobs,omitempty"`
	// Results: a turn's stored result, from when it was stored.
	Results time.Duration `json:"results,omitempty"`
	// Transcripts: a turn's request and steps, and a session's messages
	// (and the summary made of them), from when each was written.
	Transcripts time.Duration `json:"transcripts,omitempty"`
}

// MaxRetention bounds a TTL: a hundred years is "forever" in all but
// name, and keeps the cutoff's arithmetic far from overflow.
const MaxRetention = 100 * 365 * 24 * time.Hour

// ParseTTL reads a TTL: a Go duration ("36h", "90m") or a number of days
// ("30d"), at least a minute and at most MaxRetention. "" is 0: keep
// forever.
func ParseTTL(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > int64(MaxRetention/(24*time.Hour)) {
			return 0, Errorf(CodeInvalid, "%q: want a whole number of days (30d) or a duration (36h)", words.Clip(s, 40))
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, Errorf(CodeInvalid, "%q: want a whole number of days (30d) or a duration (36h)", words.Clip(s, 40))
		}
	}
	if d < time.Minute || d > MaxRetention {
		return 0, Errorf(CodeInvalid, "%q: want 1m to %dd", words.Clip(s, 40), int64(MaxRetention/(24*time.Hour)))
	}
	return d, nil
}

// Narrows reports, naming the field, where r keeps data longer than
// limit allows: a tenant's retention may shorten the operator's TTLs,
// never lengthen them. A TTL r leaves at 0 is the operator's (Within).
func (r Retention) Narrows(limit Retention) error {
	for _, f := range []struct {
		name     string
		own, max time.Duration
	}{{"blobs", r.Blobs, limit.Blobs}, {"results", r.Results, limit.Results}, {"transcripts", r.Transcripts, limit.Transcripts}} {
		if f.max != 0 && f.own > f.max {
			return Errorf(CodeInvalid, "retention.%s: %s is longer than the operator's %s; a tenant may only shorten it",
				f.name, ttlText(f.own), ttlText(f.max))
		}
	}
	return nil
}

// Within returns the TTLs that apply to a tenant whose own are r under
// the operator's limit: the shorter of each, 0 only when both keep
// forever.
func (r Retention) Within(limit Retention) Retention {
	shorter := func(a, b time.Duration) time.Duration {
		if a == 0 || (b != 0 && b < a) {
			return b
		}
		return a
	}
	return Retention{Blobs: shorter(r.Blobs, limit.Blobs), Results: shorter(r.Results, limit.Results),
		Transcripts: shorter(r.Transcripts, limit.Transcripts)}
}

// IsZero reports whether r keeps everything forever.
func (r Retention) IsZero() bool { return r == Retention{} }

func ttlText(d time.Duration) string {
	switch {
	case d == 0:
		return "forever"
	case d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	default:
		return d.String()
	}
}
