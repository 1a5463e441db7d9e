package contract

import (
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// TurnCarry is what a turn's run hands to the next when the turn
// continues as new at a step boundary: AgentTurn's second argument, nil
// on a turn's first run. The request stays the first argument, as it was.
// Each of the turn's components writes its part and reads it back
// (workflows/component.go); none of it is a person's input, and the turn
// checks what it can (the stream, by eventlog.Restore).
//
// A turn stays on its build when it continues as new (a pinned run's next
// run is pinned to the same build), so a carry is read by the build that
// wrote it. An operator who moves a long turn to another build
// (a versioning override) has that build read it: a field is only ever
// added, never changed in meaning.
type TurnCarry struct {
	// Run is the number of runs the turn made before this one.
	Run int `json:"run"`
	// Start is when the turn started; Deadline when its timeout ends.
	Start    time.Time `json:"start"`
	Deadline time.Time `json:"deadline"`
	// Agent is the agent version the turn pinned (as the turn reads it:
	// agent.Agent.ForTurn), and Rule the routing rule that chose it.
	Agent agent.Agent `json:"agent"`
	Rule  string      `json:"rule,omitempty"`
	// Iteration is the number of model calls the turn made; Seq the last
	// step stored.
	Iteration int         `json:"iteration"`
	Seq       int         `json:"seq"`
	Usage     agent.Usage `json:"usage"`
	// Calls are the records of the turn's tool calls, in order; Round how
	// many of the last are the latest round's, AfterTools whether no model
	// call has started since it ended.
	Calls        []agent.ToolCallRecord `json:"calls,omitempty"`
	CallsOmitted int                    `json:"calls_omitted,omitempty"`
	Round        int                    `json:"round,omitempty"`
	AfterTools   bool                   `json:"after_tools,omitempty"`
	// Unstored are the latest round's calls that did not run, for the
	// next model call to store.
	Unstored []ToolFailure `json:"unstored,omitempty"`
	// What the result is made of so far: the data the latest round
	// produced, whether a call came from the cache, the reasoning (cut to
	// agent.MaxResultReasoningBytes) and the files.
	Data      *agent.DataPreview `json:"data,omitempty"`
	CacheHit  bool               `json:"cache_hit,omitempty"`
	Reasoning []string           `json:"reasoning,omitempty"`
	Files     []agent.Block      `json:"files,omitempty"`
	Retrieved [][]agent.Citation `json:"retrieved,omitempty"`

	// Stream is the event log's tail and next index (eventlog.Log.Carry).
	Stream agent.StreamState `json:"stream"`
	// ObserveEvents is LoadAgentResult's: the turn ends with ObserveEvents.
	ObserveEvents bool `json:"observe_events,omitempty"`
	// Each component's part, its own type (workflows/component.go),
	// embedded so that its fields keep their keys in the carry's JSON.
	ModelCarry
	SteerCarry
	ToolLimitsCarry
	DelegationCarry
	ContextCarry
	// Program is a program in the middle of its calls (code mode): the
	// next run goes on with it before its next model call.
	Program *ProgramCarry `json:"program,omitempty"`
}

// ModelCarry is the model policy's part of a carry: the model called
// last, and the fallback that took over, if one did. Repairs counts
// repair calls made.
type ModelCarry struct {
	Model   string `json:"model,omitempty"`
	Calling string `json:"calling,omitempty"`
	Repairs int    `json:"repairs,omitempty"`
}

// SteerCarry is steering's part of a carry: messages received and not
// yet taken in; the ids and prompts of those taken in, and the steps of
// the answers they cut short (SaveResultInput.CutAt).
type SteerCarry struct {
	Inbox    []agent.SteerMessage `json:"inbox,omitempty"`
	Steered  []string             `json:"steered,omitempty"`
	Prompted []string             `json:"prompted,omitempty"`
	CutAt    []int                `json:"cut_at,omitempty"`
}

// ToolLimitsCarry is the tool limits' part of a carry: the calls let
// through, in all and by tool.
type ToolLimitsCarry struct {
	ToolCalls   int            `json:"tool_calls,omitempty"`
	ToolsCalled map[string]int `json:"tools_called,omitempty"`
}

// DelegationCarry is delegation's part of a carry: the tokens the turn's
// child turns used.
type DelegationCarry struct {
	DelegatedTokens int `json:"delegated_tokens,omitempty"`
}

// ContextCarry is the turn context's part of a carry: where the turn's
// latest steps started, and how many steps it started.
type ContextCarry struct {
	ContextStarts []int `json:"context_starts,omitempty"`
	ContextSteps  int   `json:"context_steps,omitempty"`
}
