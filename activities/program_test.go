package activities

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/program"
)

// startProgram starts a turn of agent coder whose reply (step 1) is one
// run_program call of source, and returns RunProgram's first input.
func (h *harness) startProgram(t *testing.T, source string) contract.RunProgramInput {
	t.Helper()
	return h.startProgramAs(t, "coder", source)
}

// startProgramAs is startProgram for another agent of the harness.
func (h *harness) startProgramAs(t *testing.T, agentID, source string) contract.RunProgramInput {
	t.Helper()
	job := randomJob()
	in := loadAgentInput(job, "program")
	in.Request.AgentID, in.AgentID = agentID, agentID
	var loaded contract.LoadAgentResult
	h.execute(t, contract.LoadAgent, in, &loaded)
	args, err := json.Marshal(map[string]string{"program": source})
	require.NoError(t, err)
	call := agent.ToolCall{ID: "p", Name: agent.RunProgramTool, Arguments: string(args)}
	require.NoError(t, h.store.PutStep(t.Context(), "demo", job, 1, agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}))
	return contract.RunProgramInput{TenantID: "demo", JobID: job, AgentID: agentID, AgentVersion: loaded.Agent.Version, Seq: 2, Call: call, Seed: 1}
}

// TestRunProgram drives a program of two calls as the turn does: each
// run returns the call it waits on, ExecuteTool makes it and stores its
// result as the program's, and the last run stores the program's answer
// as the run_program call's result, which a retry returns again. The
// model reads that one result, not the calls'.
func TestRunProgram(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	in := h.startProgram(t, "const a = await tools.tally({});\nconst b = await tools.calculator({expression: \"6 * 7\"});\nconsole.log(a);\nreturn b;")
	h.toolRuns.Store(0)
	want := []contract.ProgramCall{
		{N: 0, Tool: "tally", Args: json.RawMessage(`{}`)},
		{N: 1, Tool: "calculator", Args: json.RawMessage(`{"expression":"6 * 7"}`)},
	}
	in.From = 3
	for n, call := range want {
		var out contract.RunProgramResult
		h.execute(t, contract.RunProgram, in, &out)
		require.Nil(t, out.Done)
		require.Equal(t, []contract.ProgramCall{call}, out.Pending)
		require.Empty(t, out.Approvals)
		var res contract.ExecuteToolResult
		h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: in.JobID, AgentID: "coder", AgentVersion: in.AgentVersion,
			Seq: 3 + n, Program: "p", Call: agent.ToolCall{ID: contract.ProgramCallID("p", n), Name: call.Tool, Arguments: string(call.Args)}}, &res)
		require.Equal(t, agent.ToolOK, res.Status)
		in.Made++
	}
	for range 2 { // the second is a retry of a run whose completion was lost
		var out contract.RunProgramResult
		h.execute(t, contract.RunProgram, in, &out)
		require.Empty(t, out.Pending)
		require.NotNil(t, out.Done)
		require.Equal(t, agent.ToolOK, out.Done.Status)
		require.Equal(t, "console:\nrun 1\nresult: 42\n(2 tool calls)", out.Done.Preview)
	}
	require.EqualValues(t, 1, h.toolRuns.Load(), "the program's runs never made its calls again")

	steps, err := h.store.StepsBetween(t.Context(), "demo", in.JobID, 1, 5)
	require.NoError(t, err)
	require.Len(t, steps, 4)
	msgs := messagesOf(steps)
	require.Len(t, msgs, 2, "the model reads its call and the program's result, not the program's calls")
	require.Equal(t, "p", msgs[1].ToolCallID)
	require.NotContains(t, digestOf(1, steps), "step 3", "nor does its digest of the turn")
}

// TestRunProgramFaults: what the model wrote wrong is the run_program
// call's error result, with the line; a call the program did not make
// again is a replay error, not a wrong answer.
func TestRunProgramFaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	for _, tc := range []struct{ name, source, want string }{
		{"syntax", "return (1;", "the program failed: SyntaxError"},
		{"runtime", "const x = 1;\nreturn x.y.z;", "(line 2, column"},
		{"a tool it may not call", "return await tools.own_preview({});", "the program failed: TypeError"},
		{"calls over the limit", "for (let i = 0; i < 1001; i++) { tools.tally({}); }", "limit: calls (1000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := h.startProgram(t, tc.source)
			var out contract.RunProgramResult
			h.execute(t, contract.RunProgram, in, &out)
			require.NotNil(t, out.Done)
			require.Equal(t, agent.ToolError, out.Done.Status)
			require.Contains(t, out.Done.Preview, tc.want)
		})
	}
	t.Run("not the recorded call", func(t *testing.T) {
		in := h.startProgram(t, "return await tools.calculator({expression: \"1 + 1\"});")
		require.NoError(t, h.store.PutStep(t.Context(), "demo", in.JobID, 3, agent.Message{Role: agent.RoleTool, ToolCallID: "p.0", Name: "calculator",
			Content: "3", Program: "p", ToolCalls: []agent.ToolCall{{ID: "p.0", Name: "calculator", Arguments: `{"expression":"1 + 2"}`}}}))
		in.From, in.Made = 3, 1
		var out contract.RunProgramResult
		h.execute(t, contract.RunProgram, in, &out)
		require.NotNil(t, out.Done)
		require.Equal(t, agent.ToolError, out.Done.Status)
		require.Contains(t, out.Done.Preview, "the program failed:")
	})
}

// FuzzRecordedOf: whatever a tool stored as a program's call's result,
// the program gets it back as a JSON value or as the call's error, with
// the call it made; data kept by reference as its preview with its ref.
func FuzzRecordedOf(f *testing.F) {
	for _, s := range []string{`42`, `{"a":[1,2]}`, `plain text`, errorPrefix + "no such order", "", `"quoted"`, "{broken", "\xff\xfe"} {
		f.Add(s, `{"i":1}`, "")
	}
	f.Add("the rows\n\ndata: cas://sha256:ab (dataset, 2 rows). Pass the ref…", `{}`, "cas://sha256:ab")
	f.Fuzz(func(t *testing.T, content, args, ref string) {
		m := agent.Message{Role: agent.RoleTool, Content: content, Program: "p", ToolCalls: []agent.ToolCall{{ID: "p.3", Name: "square", Arguments: args}}}
		if ref != "" {
			m.Data = &agent.DataPreview{Type: agent.DataDataset, Ref: ref, Bytes: 7}
		}
		r := recordedOf(3, m)
		require.Equal(t, 3, r.N)
		require.Equal(t, "square", r.Tool)
		require.Equal(t, args, string(r.Args))
		if statusOf(content) == agent.ToolError {
			require.Equal(t, content[len(errorPrefix):], r.Error)
			return
		}
		require.Empty(t, r.Error)
		require.True(t, json.Valid(r.Result), "%q", r.Result)
		if ref != "" && utf8.ValidString(ref) {
			var d programData
			require.NoError(t, json.Unmarshal(r.Result, &d))
			require.Equal(t, ref, d.Ref, "data kept by reference is its ref and preview")
		}
	})
}

// runOnce runs the program's next RunProgram and returns its result.
func (h *harness) runOnce(t *testing.T, in contract.RunProgramInput) contract.RunProgramResult {
	t.Helper()
	var out contract.RunProgramResult
	h.execute(t, contract.RunProgram, in, &out)
	return out
}

// TestRunProgramData: a call whose data the tool keeps by reference
// gives the program its preview and ref, and data.read reads the data
// whole, inside RunProgram: the turn sees one tool call, then the end.
// A read of what is not a ref, of nothing, of another tenant's data, or
// of more than the read limit is an error the model reads.
func TestRunProgramData(t *testing.T) {
	t.Parallel()
	h := newHarness(t, modelScript)
	in := h.startProgram(t, `const r = await tools.echo_data({text: "the orders", data: Array.from({length: 2000}, (_, i) => ({id: i, name: "order " + i}))});
const rows = await data.read(r);
const again = await data.read(r.ref);
return {type: r.type, row_count: r.row_count, bytes: r.bytes, text: r.text, sample: r.sample.length, read: rows.length, last: rows[1999], same: again.length};`)
	in.From = 3
	out := h.runOnce(t, in)
	require.Nil(t, out.Done)
	require.Len(t, out.Pending, 1)
	call := out.Pending[0]
	var res contract.ExecuteToolResult
	h.execute(t, contract.ExecuteTool, contract.ExecuteToolInput{TenantID: "demo", JobID: in.JobID, AgentID: "coder", AgentVersion: in.AgentVersion,
		Seq: 3, Program: "p", Call: agent.ToolCall{ID: contract.ProgramCallID("p", 0), Name: call.Tool, Arguments: string(call.Args)}}, &res)
	require.NotNil(t, res.Data)
	require.Greater(t, res.Data.Bytes, 40000, "the data is large, and kept by reference")
	in.Made = 1
	out = h.runOnce(t, in)
	require.Empty(t, out.Pending, "the reads never reach the turn")
	require.NotNil(t, out.Done)
	require.Equal(t, agent.ToolOK, out.Done.Status, out.Done.Preview)
	require.Contains(t, out.Done.Preview, fmt.Sprintf(`result: {"bytes":%d,"last":{"id":1999,"name":"order 1999"},"read":2000,"row_count":2000,"same":2000,"sample":3,"text":"the orders","type":"dataset"}`, res.Data.Bytes))

	other, err := h.store.PutTenantBlob(t.Context(), "other", []byte(`{"secret":"of another tenant"}`), "application/json")
	require.NoError(t, err)
	big, err := h.store.PutTenantBlob(t.Context(), "demo", []byte(`"`+strings.Repeat("x", program.DefaultRead)+`"`), "application/json")
	require.NoError(t, err)
	for _, tc := range []struct{ name, source, want string }{
		{"not a ref", `return await data.read("orders.json");`, `data.read("orders.json"): not a ref`},
		{"nothing there", `return await data.read("cas://sha256:` + strings.Repeat("0", 64) + `");`, `: no data at this ref`},
		{"another tenant's", `return await data.read("` + other + `");`, `data.read("` + other + `"): no data at this ref`},
		{"over the read limit", `return (await data.read("` + big + `")).length;`, `limit: read (8 MiB): data.read("` + big + `") is 8388610 bytes of JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := h.runOnce(t, h.startProgram(t, tc.source))
			require.NotNil(t, out.Done)
			require.Equal(t, agent.ToolError, out.Done.Status)
			require.Contains(t, out.Done.Preview, "the program failed: ")
			require.Contains(t, out.Done.Preview, tc.want)
			require.NotContains(t, out.Done.Preview, "of another tenant")
		})
	}
}

// FuzzReadValue: whatever bytes a ref holds, a program's read gets a
// JSON value (the data itself when it is JSON) or an error.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{`[{"a":1}]`, `"text"`, "plain text", "", "\xff\xfe\x00", `{"a":`, " 42 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := readValue(data)
		if err != nil {
			require.False(t, utf8.Valid(data))
			return
		}
		require.True(t, json.Valid(v), "%q", v)
		if json.Valid(data) {
			require.Equal(t, string(data), string(v))
		}
	})
}

// TestRunProgramLimits: a program that takes more memory than its budget
// and one that never ends each end, through the worker's own runner, as
// the run_program result the model reads, naming the limit; and the
// worker is as it was: no goroutine left, no process beyond the warm
// one, and its memory not grown by the program's (the bomb's memory was
// its child's, never the worker's: the bound is the child's budget's
// half, far above what the worker's own work allocates and far below
// what the bomb took).
func TestRunProgramLimits(t *testing.T) {
	const budget = 96 << 20
	runner := program.New(program.Options{Memory: budget, Concurrency: 1})
	t.Cleanup(func() { runner.Close() })
	h := newHarness(t, modelScript, func(d *Deps) { d.Programs = runner })
	run := func(source string) *contract.ExecuteToolResult {
		out := h.runOnce(t, h.startProgramAs(t, "quick-coder", source))
		require.NotNil(t, out.Done)
		return out.Done
	}
	require.Equal(t, agent.ToolOK, run("return 1").Status, "a warm child waits in the pool")
	runtime.GC()
	goroutines, rss, children := runtime.NumGoroutine(), residentBytes(t), childProcesses(t)

	for _, tc := range []struct{ name, source, want string }{
		// In steps larger than the budget: under the race detector a
		// bomb that fills its memory a little at a time takes seconds,
		// and the time limit would end it first (internal/program's
		// tests cover those).
		{"memory", `const a = []; for (let n = 1 << 27; ; n *= 2) { a.push("x".repeat(n)); }`, "the program failed: limit: memory (96 MiB)"},
		{"time", `let i = 0; for (;;) { i++; }`, "the program failed: limit: time (1s)"},
	} {
		done := run(tc.source)
		require.Equal(t, agent.ToolError, done.Status)
		require.Contains(t, done.Preview, tc.want, tc.name)
	}
	require.Equal(t, agent.ToolOK, run("return 2").Status, "the runner runs the next program")
	// A killed child's goroutines end as its pipes close: wait for
	// that, then compare.
	var nowG, nowC int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if nowG, nowC = runtime.NumGoroutine(), childProcesses(t); nowG <= goroutines && nowC <= children {
			break
		}
	}
	require.LessOrEqual(t, nowG, goroutines, "goroutines")
	require.LessOrEqual(t, nowC, children, "child processes")
	after := residentBytes(t)
	t.Logf("resident memory %d MiB (was %d MiB)", after>>20, rss>>20)
	require.Less(t, after, rss+budget/2, "the worker's memory grew by the program's")
}

// residentBytes is the process's resident memory.
func residentBytes(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// childProcesses counts the processes whose parent is this one.
func childProcesses(t *testing.T) int {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	require.NoError(t, err)
	n, self := 0, strconv.Itoa(os.Getpid())
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // it ended
		}
		// pid (comm) state ppid …: comm may hold spaces, not ")".
		_, rest, ok := strings.Cut(string(b), ") ")
		if f := strings.Fields(rest); ok && len(f) > 1 && f[1] == self {
			n++
		}
	}
	return n
}
