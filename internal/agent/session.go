package agent

import "github.com/agentflow/agentflow/internal/words"

// What a turn's end does to its session (TurnRequest.SessionEnd).
const (
	// SessionEndClose closes the session: no later turn may join it
	// (CodeConflict), while turns that began before finish.
	SessionEndClose = "close"
	// SessionEndMark marks the session inactive: the next turn of the
	// session makes it active again.
	SessionEndMark = "mark"
)

// checkSessionEnd checks a request's session_end: none, or one of the
// two for a turn that names its session.
func checkSessionEnd(end, session string) error {
	switch end {
	case "":
		return nil
	case SessionEndClose, SessionEndMark:
		if session == "" {
			return Errorf(CodeInvalid, "session_end %q needs session_id: the session the turn's end closes or marks", end)
		}
		return nil
	}
	return Errorf(CodeInvalid, "session_end %q: want %q or %q", words.Clip(end, 50), SessionEndClose, SessionEndMark)
}
