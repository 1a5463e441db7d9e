package checker

import (
	"fmt"
	"strings"
)

// streams checks each client's indexes: every one from where it started
// to the last it got, each once, in order, and the terminal event when
// the turn ended.
func (c *check) streams() {
	for _, s := range c.r.Streams {
		c.stats.Events += len(s.Indexes)
		c.stats.Resumes += s.Resumes
		c.stream(s)
	}
}

func (c *check) stream(s Stream) {
	seen := map[int64]bool{}
	last := s.From
	var dups, disorder []string
	for i, idx := range s.Indexes {
		switch {
		case idx < 1:
			disorder = append(disorder, fmt.Sprintf("index %d at position %d (indexes start at 1)", idx, i+1))
		case seen[idx]:
			dups = append(dups, fmt.Sprintf("%d", idx))
		case idx <= s.From:
			dups = append(dups, fmt.Sprintf("%d (at or before %d, where it started)", idx, s.From))
		case idx < last:
			disorder = append(disorder, fmt.Sprintf("event %d after event %d", idx, last))
		}
		if idx >= 1 {
			seen[idx] = true
			last = max(last, idx)
		}
	}
	who := fmt.Sprintf("client %s of turn %s", s.Client, s.Job)
	if s.Resumes > 0 {
		who += fmt.Sprintf(" (resumed %d time(s))", s.Resumes)
	}
	if len(dups) > 0 {
		c.add(DuplicateEvent, s.Client, "%s received %d event(s) it already had: %s", who, len(dups), clip(dups))
	}
	if len(disorder) > 0 {
		c.add(OutOfOrder, s.Client, "%s received events out of order: %s", who, clip(disorder))
	}
	if missing := gaps(seen, s.From, last); len(missing) > 0 {
		c.add(Gap, s.Client, "%s never received event(s) %s of %d–%d", who, clip(missing), s.From+1, last)
	}
	if s.End == "" && c.ended(s.Job) {
		c.add(MissingTerminal, s.Client, "%s never received the terminal event, though the turn ended (last event %d)", who, last)
	}
}

// gaps lists the ranges of indexes after from up to last not seen, as
// "5", "7–9".
func gaps(seen map[int64]bool, from, last int64) []string {
	var out []string
	for i := from + 1; i <= last; i++ {
		if seen[i] {
			continue
		}
		j := i
		for j+1 <= last && !seen[j+1] {
			j++
		}
		if i == j {
			out = append(out, fmt.Sprintf("%d", i))
		} else {
			out = append(out, fmt.Sprintf("%d–%d", i, j))
		}
		i = j
	}
	return out
}

// clipAt bounds how many items a detail lists.
const clipAt = 5

// clip joins items, the first clipAt of them, saying how many more.
func clip(items []string) string {
	if len(items) <= clipAt {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:clipAt], ", "), len(items)-clipAt)
}
