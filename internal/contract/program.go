package contract

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/agentflow/agentflow/internal/agent"
)

// RunProgramInput is one run of a run_program call's program (code mode,
// internal/program): the activity runs it from its start, answering the
// calls it made before from their stored results, and returns the calls
// it waits on, or its end.
type RunProgramInput struct {
	TenantID     string `json:"tenant_id"`
	JobID        string `json:"job_id"`
	AgentID      string `json:"agent_id"`
	AgentVersion int    `json:"agent_version"`
	SessionID    string `json:"session_id,omitempty"`
	// Seq is the step the run_program call's result is stored under once
	// the program ends; Call is the call, its program in its arguments.
	Seq  int            `json:"seq"`
	Call agent.ToolCall `json:"call"`
	// Now and Seed are what the program sees as the time and seeds its
	// randomness with: the same on every run of the program.
	Now  time.Time `json:"now"`
	Seed int64     `json:"seed"`
	// Made is how many calls the program has made so far; call N's
	// result is stored as step From+N, with the call (agent.Message.Program),
	// and read from there: the input stays the same size however many
	// calls the program makes.
	From int `json:"from,omitempty"`
	Made int `json:"made,omitempty"`
	// Failures are calls of the program that did not run (refused by a
	// limit, rejected, timed out): stored as their steps' results first.
	Failures []ToolFailure `json:"failures,omitempty"`
	// Context and Caller are the turn's, for the approval policies of the
	// calls the program waits on.
	Context agent.TurnContext `json:"context,omitzero"`
	Caller  *agent.Caller     `json:"caller,omitempty"`
}

// ProgramCall is call N of a program: the tool and its arguments as
// canonical JSON. Its call id is ProgramCallID(the run_program call's, N).
type ProgramCall struct {
	N    int             `json:"n"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// RunProgramResult is where the run left the program: Done, its result
// stored as the run_program call's step; or waiting on Pending, whose
// approval needs Approvals lists as a model call's would.
type RunProgramResult struct {
	Pending   []ProgramCall      `json:"pending,omitempty"`
	Approvals []ApprovalNeed     `json:"approvals,omitempty"`
	Done      *ExecuteToolResult `json:"done,omitempty"`
}

// ProgramCallID is the call id of call n of the program of run_program
// call id: what its events, approvals and step carry.
func ProgramCallID(id string, n int) string {
	return id + "." + strconv.Itoa(n)
}

// ProgramCarry is a program in the middle of its calls when its turn
// continues as new: the model step whose reply called run_program, and
// where the program was. A program that makes thousands of calls hands
// its turn on, as a turn of many steps does; the next run goes on from
// its next call, its earlier calls' results read from their steps.
type ProgramCarry struct {
	// Step is the model step, Reply its reply: the round's calls, and the
	// step's usage and finish when the round ends.
	Step  int             `json:"step"`
	Reply CallModelResult `json:"reply"`
	// Index is the run_program call's in Reply.ToolCalls (the round's
	// last: the calls before it have ended), Extra the steps the round's
	// programs' calls took so far, Failures the round's calls before it
	// that failed (for the next model call to store).
	Index    int           `json:"index"`
	Extra    int           `json:"extra"`
	Failures []ToolFailure `json:"failures,omitempty"`
	// Now, From, Made and Pending are the program's RunProgramInput.Now
	// (the program sees one time in each of its runs, whichever run of the turn),
	// From, Made and Failures.
	Now     time.Time     `json:"now"`
	From    int           `json:"from"`
	Made    int           `json:"made"`
	Pending []ToolFailure `json:"pending,omitempty"`
}
