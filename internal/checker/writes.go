package checker

import "fmt"

// writes checks each write against the at-most-once rule and against
// what the stream said of its call.
func (c *check) writes() {
	c.stats.Writes = len(c.r.Writes)
	for _, w := range c.r.Writes {
		c.stats.Requests += w.Requests
		n := w.applied()
		if n > 1 {
			c.add(DuplicateWrite, w.Key, "write %s%s was applied %d times (%d requests): %s", w.Key, ofJob(w.Job), n, w.Requests, dedupWord(w))
		}
		switch {
		case w.Outcome == CallOK && n == 0:
			c.add(LostWrite, w.Key, "write %s%s ended ok on the stream, but the API never %s it (%d requests)", w.Key, ofJob(w.Job), appliedWord(w), w.Requests)
		case w.Outcome == CallFailed && n > 0:
			c.add(FailedButMade, w.Key, "write %s%s ended failed on the stream, but the API %s it %d time(s)", w.Key, ofJob(w.Job), appliedWord(w), n)
		}
	}
}

func ofJob(job string) string {
	if job == "" {
		return ""
	}
	return " of turn " + job
}

func dedupWord(w Write) string {
	if w.Idempotent {
		return "the API deduplicates its key, so it should have applied it once"
	}
	return "the API deduplicates nothing, so the product must send it at most once"
}

func appliedWord(w Write) string {
	if w.Idempotent {
		return "applied"
	}
	return "received"
}

// approvals checks that each approval was decided once and honoured.
func (c *check) approvals() {
	for _, a := range c.r.Approvals {
		if a.Accepted > 1 {
			c.add(DecidedTwice, a.ID, "approval %s of turn %s was decided %d times: the gateway accepted %d of %d decisions sent, want one", a.ID, a.Job, a.Accepted, a.Accepted, a.Sent)
		}
		if a.Accepted == 0 {
			continue // the decision is in doubt: nothing to honour
		}
		ran, known := c.ran(a)
		switch {
		case !known:
		case a.Approve && !ran && c.turnOf[a.Job].End == Completed:
			c.add(NotHonoured, a.ID, "approval %s of turn %s was approved, and the turn completed without running the call (%s)", a.ID, a.Job, c.ranWhy(a))
		case !a.Approve && ran:
			c.add(NotHonoured, a.ID, "approval %s of turn %s was denied, and the call ran anyway (%s)", a.ID, a.Job, c.ranWhy(a))
		}
	}
}

// ran says whether an approval's call ran, and whether that is known: the
// counting API's word when the call writes to one, else the stream's.
func (c *check) ran(a Approval) (ran, known bool) {
	if a.Key != "" {
		return c.writeOf[a.Key].applied() > 0, true
	}
	switch a.ToolEnd {
	case "ok", "error", "unknown": // an error is a call that ran and failed
		return true, true
	case "rejected", "timed_out":
		return false, true
	}
	return false, false
}

// ranWhy says where ran's answer came from.
func (c *check) ranWhy(a Approval) string {
	if a.Key != "" {
		w := c.writeOf[a.Key]
		return fmt.Sprintf("the API applied its write %s %d time(s)", a.Key, w.applied())
	}
	return "its tool_end said " + a.ToolEnd
}
