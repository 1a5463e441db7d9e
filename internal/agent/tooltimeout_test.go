package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestToolCallTimeout: a call may run its entry's timeout_sec, else two
// minutes, never longer than the turn; the operator's limit lowers what
// a turn pins, and leaves the agent as it was when nothing is over it.
func TestToolCallTimeout(t *testing.T) {
	require.Equal(t, DefaultToolTimeout, Tool{}.CallTimeout(0))
	require.Equal(t, 15*time.Minute, Tool{TimeoutSec: 900}.CallTimeout(time.Hour))
	require.Equal(t, 5*time.Minute, Tool{TimeoutSec: 900}.CallTimeout(5*time.Minute), "bounded by the turn")
	require.Equal(t, time.Minute, Tool{}.CallTimeout(time.Minute))

	ag := Agent{Tools: []Tool{{Name: "job", TimeoutSec: 900}, {Name: "calc"}, {Name: "quick", TimeoutSec: 10}}}
	require.Equal(t, ag, ag.CapToolTimeouts(0))
	require.Equal(t, ag, ag.CapToolTimeouts(time.Hour), "nothing over the limit: unchanged")
	capped := ag.CapToolTimeouts(time.Minute)
	require.Equal(t, []int{60, 60, 10}, []int{capped.Tools[0].TimeoutSec, capped.Tools[1].TimeoutSec, capped.Tools[2].TimeoutSec})
	require.Equal(t, 900, ag.Tools[0].TimeoutSec, "the agent it was given is not changed")
}
