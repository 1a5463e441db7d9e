package checker

import (
	"fmt"
	"strings"
)

// sessions checks each conversation's transcript against the messages
// the workload sent to it.
func (c *check) sessions() {
	for _, s := range c.r.Sessions {
		t := newTranscript(s)
		for _, p := range t.strays {
			c.add(TranscriptBroken, s.ID, "session %s holds a user message nobody sent: %q", s.ID, short(t.entries[p].Text))
		}
		c.session(s, t)
	}
}

func (c *check) session(s Session, t *transcript) {
	prev, prevAt := -1, -1
	for i, m := range s.Sent {
		at := t.at[i]
		name := messageName(m)
		switch {
		case len(at) == 0 && m.Accepted:
			c.add(TranscriptBroken, s.ID, "session %s lost message %s: the gateway accepted it, and the transcript does not hold it", s.ID, name)
		case len(at) > 1:
			c.add(TranscriptBroken, s.ID, "session %s holds message %s %d times, want once", s.ID, name, len(at))
		}
		if len(at) == 0 {
			continue
		}
		if at[0] < prevAt {
			c.add(TranscriptBroken, s.ID, "session %s holds message %s before message %s, which was sent before it", s.ID, name, messageName(s.Sent[prev]))
		}
		prev, prevAt = i, at[0]
		if !c.owesAnswer(m.Job) {
			continue
		}
		if why := t.answered(at[0], m); why != "" {
			c.add(TranscriptBroken, s.ID, "session %s holds message %s without its answer: %s", s.ID, name, why)
		}
	}
}

// owesAnswer says the turn of a message's job owes it an answer: one not
// recorded is taken to, one recorded does once it ended, unless it failed
// or was canceled.
func (c *check) owesAnswer(job string) bool {
	t, ok := c.turnOf[job]
	return !ok || (t.Chains > 0 && t.End != Failed && t.End != Canceled)
}

func messageName(m Message) string {
	if m.Job != "" {
		return m.Job
	}
	return fmt.Sprintf("%q", short(m.Prompt))
}

// transcript is a session's user and assistant entries, with each sent
// message's positions among them.
type transcript struct {
	entries []Entry
	at      [][]int // by message: the positions of its user entries
	strays  []int   // user entries of no message sent
}

func newTranscript(s Session) *transcript {
	t := &transcript{at: make([][]int, len(s.Sent))}
	for _, e := range s.Transcript {
		if e.Role == "user" || (e.Role == "assistant" && strings.TrimSpace(e.Text) != "") {
			t.entries = append(t.entries, e)
		}
	}
	byJob, byText := map[string]int{}, map[string][]int{}
	for i, m := range s.Sent {
		if m.Job != "" {
			byJob[m.Job] = i
		} else {
			text := strings.TrimSpace(m.Prompt)
			byText[text] = append(byText[text], i)
		}
	}
	seenText := map[string]int{} // occurrences of each text so far
	for p, e := range t.entries {
		if e.Role != "user" {
			continue
		}
		if i, ok := byJob[e.Job]; ok && e.Job != "" {
			t.at[i] = append(t.at[i], p)
			continue
		}
		text := strings.TrimSpace(e.Text)
		same := byText[text]
		if len(same) == 0 {
			t.strays = append(t.strays, p)
			continue
		}
		// The k-th entry of a text is the k-th message of it; more are
		// repeats of the last.
		i := same[min(seenText[text], len(same)-1)]
		seenText[text]++
		t.at[i] = append(t.at[i], p)
	}
	return t
}

// answered says why the user entry at p, of message m, is not followed
// by its answer ("" when it is).
func (t *transcript) answered(p int, m Message) string {
	if p+1 >= len(t.entries) {
		return "the transcript ends there"
	}
	next := t.entries[p+1]
	if next.Role != "assistant" {
		return fmt.Sprintf("the next message is the user's %q", short(next.Text))
	}
	if m.Job != "" && next.Job != "" && next.Job != m.Job {
		return fmt.Sprintf("the next answer is turn %s's", next.Job)
	}
	return ""
}
