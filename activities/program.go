package activities

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/program"
	"github.com/agentflow/agentflow/internal/store"
	"github.com/agentflow/agentflow/internal/words"
)

// RunProgram runs a run_program call's program once, from its start
// (internal/program: durable by re-execution). The calls it made before
// get their results from their steps, stored by ExecuteTool (or, for
// calls that did not run, from in.Failures, stored here first). It
// returns the calls the program waits on, each with its approval need as
// the tool's policy decides it for a model's call (approvals: one rule);
// or, once the program ends, stores its outcome as the run_program call's
// result (step in.Seq) and returns it: the return value and console
// output, or the program's error with its line, or the limit that ended
// it, as a tool error the model can act on. A result once stored is what
// every later attempt returns.
func (a *Activities) RunProgram(ctx context.Context, in contract.RunProgramInput) (contract.RunProgramResult, error) {
	call := contract.ExecuteToolInput{TenantID: in.TenantID, JobID: in.JobID, AgentID: in.AgentID, AgentVersion: in.AgentVersion,
		Seq: in.Seq, Call: in.Call, SessionID: in.SessionID}
	ctx = withToolLog(ctx, call)
	var stored agent.Message
	err := a.db(ctx, "look up step", func() (err error) {
		stored, err = a.store.Step(ctx, in.TenantID, in.JobID, in.Seq)
		return err
	})
	if err == nil {
		res, err := a.toolResult(ctx, in.Call.ID, stored, statusOf(stored.Content))
		return contract.RunProgramResult{Done: &res}, err
	} else if !agent.IsCode(err, agent.CodeNotFound) {
		return contract.RunProgramResult{}, fmt.Errorf("look up step %d: %w", in.Seq, err)
	}
	if err := a.db(ctx, "store failed program calls", func() error {
		return a.storeToolFailures(ctx, in.TenantID, in.JobID, in.Failures)
	}); err != nil {
		return contract.RunProgramResult{}, err
	}
	ag, err := a.agentVersion(ctx, in.TenantID, in.AgentID, in.AgentVersion)
	if err != nil {
		return contract.RunProgramResult{}, err
	}
	done := func(content, status string) (contract.RunProgramResult, error) {
		res, err := a.storeToolResult(ctx, call, agent.Message{Content: content}, status)
		return contract.RunProgramResult{Done: &res}, err
	}
	if ag.CodeMode == nil {
		return done(fmt.Sprintf("agent %q does not run programs", ag.ID), agent.ToolError)
	}
	source, err := agent.ProgramSource(in.Call.Arguments)
	if err != nil {
		return done(err.Error(), agent.ToolError)
	}
	recorded, err := a.recordedCalls(ctx, in)
	if err != nil {
		return contract.RunProgramResult{}, err
	}
	out, err := a.runProgram(ctx, in, program.Input{
		Source: source, Tools: programTools(ag), Recorded: recorded, Now: in.Now, Seed: in.Seed, Limits: programLimits(*ag.CodeMode),
	})
	var perr *program.Error
	switch {
	case errors.As(err, &perr):
		return done(programFault(perr), agent.ToolError)
	case err != nil:
		return contract.RunProgramResult{}, fmt.Errorf("run program of call %q: %w", in.Call.ID, err)
	case out.Done:
		return done(programAnswer(out), agent.ToolOK)
	}
	res := contract.RunProgramResult{}
	calls := make([]agent.ToolCall, len(out.Pending))
	for i, c := range out.Pending {
		res.Pending = append(res.Pending, contract.ProgramCall{N: c.N, Tool: c.Tool, Args: c.Args})
		calls[i] = agent.ToolCall{ID: contract.ProgramCallID(in.Call.ID, c.N), Name: c.Tool, Arguments: string(c.Args)}
	}
	res.Approvals = a.approvals(ctx, ag, contract.CallModelInput{TenantID: in.TenantID, JobID: in.JobID, SessionID: in.SessionID,
		Context: in.Context, Caller: in.Caller}, calls)
	return res, nil
}

// runProgram runs the program until it ends or waits on tool calls,
// reading the data it asks for with data.read on the way: the turn never
// sees a read. The data is read again on each attempt and each
// RunProgram, never recorded (internal/program: a ref's data is the same
// every time). Each run asks for at least one ref it did not ask for
// before, and a program may read at most program.MaxReads refs, so the
// loop ends.
func (a *Activities) runProgram(ctx context.Context, in contract.RunProgramInput, p program.Input) (program.Outcome, error) {
	inputs := &turnInputs{a: a, tenantID: in.TenantID, jobID: in.JobID}
	room := cmp.Or(p.Limits.Read, program.DefaultRead)
	for {
		out, err := a.programs.Run(ctx, p)
		if err != nil || out.Done || len(out.Reads) == 0 {
			return out, err
		}
		for _, ref := range out.Reads {
			r, err := a.programRead(ctx, inputs, ref, room)
			if err != nil {
				return program.Outcome{}, fmt.Errorf("read %s for call %q's program: %w", words.Clip(ref, 100), in.Call.ID, err)
			}
			if r.Error == "" {
				room -= r.Bytes
			}
			p.Reads = append(p.Reads, r)
		}
	}
}

// programRead reads ref for a program's data.read: its data as the
// program gets it (readValue), or the error that rejects the read, which
// the model reads if the program does not catch it. Data larger than room
// (what is left of the program's read limit) keeps only its size: the
// program stops with a read limit when it reads it. An error reading the
// store is the runner's, to retry.
func (a *Activities) programRead(ctx context.Context, inputs *turnInputs, ref string, room int) (program.Read, error) {
	r := program.Read{Ref: ref}
	if !agent.IsRef(ref) && !agent.IsInputIndex(ref) {
		r.Error = fmt.Sprintf("data.read(%q): not a ref; pass a tool's result kept by reference, or its ref (cas://sha256:…)", words.Clip(ref, 100))
		return r, nil
	}
	raw, err := inputs.data(ctx, ref)
	switch {
	case agent.IsCode(err, agent.CodeNotFound):
		// Another tenant's ref reads as one of nothing.
		r.Error = fmt.Sprintf("data.read(%q): no data at this ref", words.Clip(ref, 100))
		return r, nil
	case agent.IsCode(err, agent.CodeInvalid):
		r.Error = fmt.Sprintf("data.read(%q): %v", words.Clip(ref, 100), err)
		return r, nil
	case err != nil:
		return program.Read{}, err
	}
	value, err := readValue(raw)
	if err != nil {
		r.Error = fmt.Sprintf("data.read(%q): %v", words.Clip(ref, 100), err)
		return r, nil
	}
	r.Bytes = len(value)
	if r.Bytes <= room {
		r.Data = value
	}
	return r, nil
}

// readValue is data as a program's data.read gets it, as JSON: the JSON
// value it is, or, for text, the string; binary data is an error.
func readValue(data []byte) (json.RawMessage, error) {
	if json.Valid(data) {
		return json.RawMessage(data), nil
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("the data is binary (%s), neither JSON nor text", agent.FormatBytes(len(data)))
	}
	return json.Marshal(string(data))
}

// recordedCalls reads the program's calls so far, and their results,
// from their steps: call N's is step in.From+N.
func (a *Activities) recordedCalls(ctx context.Context, in contract.RunProgramInput) ([]program.Recorded, error) {
	if in.Made <= 0 {
		return nil, nil
	}
	var steps []store.Step
	err := a.db(ctx, "read program calls", func() (err error) {
		steps, err = a.store.StepsBetween(ctx, in.TenantID, in.JobID, in.From, in.From+in.Made)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the calls of call %q's program: %w", in.Call.ID, err)
	}
	if len(steps) != in.Made {
		return nil, fmt.Errorf("call %q's program made %d calls; %d of their results are stored", in.Call.ID, in.Made, len(steps))
	}
	out := make([]program.Recorded, len(steps))
	for n, st := range steps {
		m := st.Message
		if m.Program != in.Call.ID || len(m.ToolCalls) != 1 || m.ToolCallID != contract.ProgramCallID(in.Call.ID, n) {
			return nil, agent.Errorf(agent.CodeInternal, "step %d is not the result of call %d of call %q's program", st.Seq, n, in.Call.ID)
		}
		out[n] = recordedOf(n, m)
	}
	return out, nil
}

// recordedOf is a stored result of call n of a program as the program
// reads it: an error, or an unknown outcome (internal/effects), rejects
// the call's promise; data kept by reference
// is its preview with its ref (programData), which data.read reads; a
// JSON result is the value, other text a string.
func recordedOf(n int, m agent.Message) program.Recorded {
	c := m.ToolCalls[0]
	r := program.Recorded{N: n, Tool: c.Name, Args: json.RawMessage(c.Arguments)}
	text := m.Text()
	switch statusOf(m.Content) {
	case agent.ToolError:
		r.Error = strings.TrimPrefix(text, errorPrefix)
		return r
	case agent.ToolUnknown:
		// Not a value to go on with: the program stops there, unless it
		// catches it, and the model reads what may have happened.
		r.Error = text
		return r
	}
	if m.Data != nil && m.Data.Ref != "" {
		d := programData{DataPreview: *m.Data}
		// The tool's own text comes before the data's description
		// (describeData).
		if before, _, ok := strings.Cut(text, "data: "+m.Data.Ref); ok {
			d.Text = strings.TrimSpace(before)
		}
		r.Result, _ = json.Marshal(d) // a preview of JSON values and strings
		return r
	}
	if json.Valid([]byte(text)) {
		r.Result = json.RawMessage(text)
	} else {
		r.Result, _ = json.Marshal(text) // a string always encodes
	}
	return r
}

// programData is what a program gets of a call's data kept by
// reference: the preview the model would see, its ref (for data.read),
// and the tool's text. program.DataDeclarations declares it.
type programData struct {
	agent.DataPreview
	Text string `json:"text,omitempty"`
}

// programTools are the tools the agent's programs may call, as the model
// would be offered them.
func programTools(ag agent.Agent) []program.Tool {
	var out []program.Tool
	for _, name := range ag.CodeMode.Tools {
		if t, ok := ag.Tool(name); ok {
			out = append(out, program.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	return out
}

func programLimits(c agent.CodeMode) program.Limits {
	return program.Limits{Time: time.Duration(c.TimeSec) * time.Second, Calls: c.MaxCalls, Output: c.MaxOutputBytes}
}

// programAnswer is what the model reads of a program that ended: what it
// printed, then what it returned.
func programAnswer(out program.Outcome) string {
	var b strings.Builder
	if out.Console != "" {
		b.WriteString("console:\n")
		b.WriteString(strings.TrimSuffix(out.Console, "\n"))
		b.WriteString("\n")
	}
	value := string(out.Value)
	value = cmp.Or(value, "null")
	b.WriteString("result: " + value)
	fmt.Fprintf(&b, "\n(%d tool calls)", out.Calls)
	return b.String()
}

// programFault is what the model reads of a program that failed: the
// error (with its line and column, or the limit that ended it) and what
// it printed before.
func programFault(e *program.Error) string {
	msg := "the program failed: " + e.Error()
	if e.Console != "" {
		msg += "\nconsole before the error:\n" + strings.TrimSuffix(e.Console, "\n")
	}
	return msg
}

// offered are the tools the model is offered: the agent's, and, in code
// mode, run_program in place of the tools its programs call.
func offered(ag agent.Agent) []agent.Tool {
	if ag.CodeMode == nil {
		return ag.Tools
	}
	out := make([]agent.Tool, 0, len(ag.Tools)+1)
	for _, t := range ag.Tools {
		if !ag.CodeModeTool(t.Name) {
			out = append(out, t)
		}
	}
	return append(out, runProgramTool(ag))
}

// runProgramTool is the run_program tool of an agent in code mode: its
// description says the contract and declares the tools a program calls.
func runProgramTool(ag agent.Agent) agent.Tool {
	c := *ag.CodeMode
	desc := fmt.Sprintf(`Run a short JavaScript program that calls the tools declared below itself, instead of calling them one at a time: use it when a task takes many tool calls, or when their results need filtering, joining or arithmetic. The program is the body of an async function: call a tool with await tools.<name>(args) (Promise.all for calls that do not depend on each other); a tool's error rejects its promise. A call's result is the tool's data; large data (and every table) comes back by reference, as a DataRef with a preview: await data.read(result) reads it whole. Print with console.log and end with return <JSON value>: both come back as this call's result, and a syntax or runtime error comes back with its line. There is no network, file, timer or require; Date is fixed at the program's start. Limits: %d tool calls, %d s of computing between calls, %d bytes of output, %d bytes of data read.

`, cmp.Or(c.MaxCalls, program.DefaultCalls), int(cmp.Or(time.Duration(c.TimeSec)*time.Second, program.DefaultTime)/time.Second),
		cmp.Or(c.MaxOutputBytes, program.DefaultOutput), program.DefaultRead)
	return agent.Tool{
		Name:        agent.RunProgramTool,
		Description: desc + program.Declarations(programTools(ag)) + program.DataDeclarations,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"program":{"type":"string","description":"the program: the body of an async function"}},"required":["program"],"additionalProperties":false}`),
	}
}
