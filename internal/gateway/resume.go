package gateway

import (
	"net/url"
	"strconv"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/gateway/intake"
)

// MaxQuoted is how much of a client's bad value an error quotes back.
const MaxQuoted = intake.MaxQuoted

// ResumeIndex reads where a client picks a stream up: after the index in
// the Last-Event-ID header (lastEventID: its values, as an EventSource
// sends it when it reconnects), else after the query parameter
// after_index (for clients that cannot set headers). The header wins: a
// browser's EventSource reconnects to the URL it first opened, whose
// after_index is where that first connection began, and adds the header
// with where it got to. ok is false when the client named no index. The
// query may hold after_index only; anything else is refused, as the HTTP
// API's other routes refuse unknown parameters.
func ResumeIndex(lastEventID []string, query url.Values) (after int64, ok bool, err error) {
	for key, vals := range query {
		if key != "after_index" {
			return 0, false, agent.Errorf(agent.CodeInvalid, "unknown query parameter %s: a stream takes after_index only", Clip(key))
		}
		if len(vals) != 1 {
			return 0, false, agent.Errorf(agent.CodeInvalid, "after_index is given %d times: give it once", len(vals))
		}
	}
	switch len(lastEventID) {
	case 0:
	case 1:
		if lastEventID[0] != "" {
			after, err := ParseIndex("Last-Event-ID", lastEventID[0])
			return after, err == nil, err
		}
	default:
		return 0, false, agent.Errorf(agent.CodeInvalid, "Last-Event-ID is given %d times: give it once", len(lastEventID))
	}
	if v, given := query["after_index"]; given {
		after, err := ParseIndex("after_index", v[0])
		return after, err == nil, err
	}
	return 0, false, nil
}

// ParseIndex reads an event index: a whole number, 0 or more, in decimal
// digits only (no sign, no spaces), as the stream's ids are written.
func ParseIndex(name, v string) (int64, error) {
	bad := agent.Errorf(agent.CodeInvalid, "%s %s is not an event index: want the index of the last event received, a whole number from 0", name, Clip(v))
	if v == "" || len(v) > 19 {
		return 0, bad
	}
	for i := range len(v) {
		if v[i] < '0' || v[i] > '9' {
			return 0, bad
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, bad
	}
	return n, nil
}

// Clip is a client's value quoted for an error message (as %q writes it),
// and shortened: bytes that are not text quote as four characters each,
// so the bound is on the quoted form.
func Clip(v string) string { return intake.Clip(v) }
