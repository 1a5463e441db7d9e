package agent

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseDelegateConfig(t *testing.T) {
	tests := []struct {
		name, raw string
		want      DelegateConfig
		wantErr   string
	}{
		{name: "none", raw: ``, want: DelegateConfig{MaxDepth: DefaultDelegateDepth}},
		{name: "null", raw: `null`, want: DelegateConfig{MaxDepth: DefaultDelegateDepth}},
		{name: "empty", raw: `{}`, want: DelegateConfig{MaxDepth: DefaultDelegateDepth}},
		{name: "agents and depth", raw: `{"agents": ["researcher", "writer"], "max_depth": 5}`,
			want: DelegateConfig{Agents: []string{"researcher", "writer"}, MaxDepth: 5}},
		{name: "depth too deep", raw: `{"max_depth": 6}`, wantErr: "max_depth is 6; want 1 to 5"},
		{name: "negative depth", raw: `{"max_depth": -1}`, wantErr: "max_depth is -1"},
		{name: "unknown field", raw: `{"agent": ["x"]}`, wantErr: `unknown field "agent"`},
		{name: "empty agent", raw: `{"agents": [""]}`, wantErr: "agents[0] is empty"},
		{name: "agent with slash", raw: `{"agents": ["a/b"]}`, wantErr: "may not contain '/'"},
		{name: "agent twice", raw: `{"agents": ["a", "a"]}`, wantErr: `agent "a" is listed twice`},
		{name: "not an object", raw: `[1]`, wantErr: "delegate_to_agent config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDelegateConfig(json.RawMessage(tt.raw))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Equal(t, CodeInvalid, ErrorCode(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestDelegateConfigAllows(t *testing.T) {
	anyAgent := DelegateConfig{}
	require.NoError(t, anyAgent.Allows("a", "b"))
	require.ErrorContains(t, anyAgent.Allows("a", "a"), `agent "a" cannot delegate to itself`)
	listed := DelegateConfig{Agents: []string{"b", "a"}}
	require.NoError(t, listed.Allows("a", "b"))
	require.NoError(t, listed.Allows("a", "a"), "a list may name the caller: the depth bounds the recursion")
	err := listed.Allows("a", "c")
	require.ErrorContains(t, err, `agent "c" is not one this tool may delegate to; it may delegate to b, a`)
	require.Equal(t, CodeInvalid, ErrorCode(err))
}

func TestParseDelegateArgs(t *testing.T) {
	tests := []struct {
		name, raw string
		want      DelegateArgs
		wantErr   string
	}{
		{name: "minimal", raw: `{"agent_id": "b", "prompt": "do it"}`, want: DelegateArgs{AgentID: "b", Prompt: "do it"}},
		{name: "all", raw: `{"agent_id": "b", "prompt": "do it", "context": "why", "refs": ["cas://sha256:00", "artifact://x"]}`,
			want: DelegateArgs{AgentID: "b", Prompt: "do it", Context: "why", Refs: []string{"cas://sha256:00", "artifact://x"}}},
		{name: "no agent", raw: `{"prompt": "do it"}`, wantErr: `argument "agent_id" is required`},
		{name: "blank prompt", raw: `{"agent_id": "b", "prompt": " "}`, wantErr: `argument "prompt" is required`},
		{name: "unknown argument", raw: `{"agent_id": "b", "prompt": "p", "inputs": {}}`, wantErr: `unknown field "inputs"`},
		{name: "not json", raw: `agent b`, wantErr: "arguments must be a JSON object"},
		{name: "agent with space", raw: `{"agent_id": "b c", "prompt": "p"}`, wantErr: "agent_id"},
		{name: "not a ref", raw: `{"agent_id": "b", "prompt": "p", "refs": ["http://x"]}`, wantErr: `refs[0] "http://x" is not a data ref`},
		{name: "too many refs", raw: `{"agent_id": "b", "prompt": "p", "refs": [` + strings.Repeat(`"artifact://x",`, 20) + `"artifact://x"]}`,
			wantErr: `"refs" has 21 refs; the limit is 20`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDelegateArgs(tt.raw)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.Equal(t, CodeInvalid, ErrorCode(err))
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	require.Equal(t, "p", DelegateArgs{Prompt: "p"}.ChildPrompt())
	require.Equal(t, "p\n\nContext:\nc", DelegateArgs{Prompt: "p", Context: "c"}.ChildPrompt())
}

// FuzzParseDelegateArgs: any arguments a model writes are parsed or
// refused with CodeInvalid, never a panic; what is accepted is sound.
func FuzzParseDelegateArgs(f *testing.F) {
	for _, s := range []string{`{"agent_id":"b","prompt":"p"}`, `{"agent_id":"b","prompt":"p","refs":["cas://sha256:0"]}`, `[]`, `{`, `null`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := ParseDelegateArgs(raw)
		if err != nil {
			require.Equal(t, CodeInvalid, ErrorCode(err))
			return
		}
		require.NoError(t, ValidateID("agent_id", a.AgentID))
		require.NotEmpty(t, strings.TrimSpace(a.Prompt))
		for _, r := range a.Refs {
			require.True(t, IsRef(r))
		}
	})
}

func TestChildJobID(t *testing.T) {
	require.Equal(t, "job-1-call_7", ChildJobID("job-1", "call_7"))
	require.Equal(t, ChildJobID("job-1", "call_7"), ChildJobID("job-1", "call_7"), "the same on every replay")

	long := strings.Repeat("j", MaxKeyLength)
	id := ChildJobID(long, "c1")
	require.LessOrEqual(t, len(id), MaxKeyLength)
	require.NoError(t, validateKey("job_id", id))
	require.NotEqual(t, id, ChildJobID(long, "c2"), "calls of one job get children of their own")

	spaced := ChildJobID("job-1", "call 7")
	require.NoError(t, validateKey("job_id", spaced))
	require.True(t, strings.HasPrefix(spaced, "job-1-"), spaced)

	multi := ChildJobID(strings.Repeat("é", MaxKeyLength/2), "c")
	require.NoError(t, validateKey("job_id", multi), "cut at a rune boundary")
}

func TestTurnRequestParent(t *testing.T) {
	valid := func() TurnRequest {
		return TurnRequest{TenantID: "demo", Prompt: "hi", JobID: "job-1-c1",
			Parent: &ParentRef{WorkflowID: "turn/demo/job-1", CallID: "c1", Depth: 1}}
	}
	tests := []struct {
		name    string
		mutate  func(*TurnRequest)
		wantErr string
	}{
		{"valid", func(*TurnRequest) {}, ""},
		{"deepest", func(r *TurnRequest) { r.Parent.Depth = MaxDelegateDepth }, ""},
		{"too deep", func(r *TurnRequest) { r.Parent.Depth = MaxDelegateDepth + 1 }, "parent.depth is 6; want 1 to 5"},
		{"depth zero", func(r *TurnRequest) { r.Parent.Depth = 0 }, "parent.depth is 0"},
		{"no workflow", func(r *TurnRequest) { r.Parent.WorkflowID = "" }, "parent.workflow_id is required"},
		{"call with space", func(r *TurnRequest) { r.Parent.CallID = "a b" }, "parent.call_id"},
		{"budget", func(r *TurnRequest) { r.TokenBudget = 100 }, ""},
		{"negative budget", func(r *TurnRequest) { r.TokenBudget = -1 }, "token_budget must not be negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.mutate(&r)
			err := r.Validate()
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, CodeInvalid, ErrorCode(err))
		})
	}
	require.Equal(t, 1, valid().Depth())
	require.Equal(t, 0, TurnRequest{}.Depth())
}

// The v1 JSON contract: the new fields are optional and named in
// snake_case; a request without them reads as before.
func TestTurnRequestParentJSON(t *testing.T) {
	var r TurnRequest
	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id":"demo","prompt":"p","token_budget":500,
		"parent":{"workflow_id":"turn/demo/j","call_id":"c1","depth":2}}`), &r))
	require.NoError(t, r.Validate())
	require.Equal(t, 500, r.TokenBudget)
	require.Equal(t, &ParentRef{WorkflowID: "turn/demo/j", CallID: "c1", Depth: 2}, r.Parent)

	b, err := json.Marshal(TurnRequest{TenantID: "demo", Prompt: "p"})
	require.NoError(t, err)
	require.JSONEq(t, `{"tenant_id":"demo","prompt":"p"}`, string(b))

	require.NoError(t, json.Unmarshal([]byte(`{"tenant_id":"demo","prompt":"p","parent":{"depth":"deep"}}`), &r))
	require.ErrorContains(t, r.Validate(), "field parent.depth must be a number")
}

func TestTurnRequestBudget(t *testing.T) {
	for _, tt := range []struct{ request, agent, want int }{
		{0, 0, 0}, {0, 100, 100}, {50, 0, 50}, {50, 100, 50}, {200, 100, 100},
	} {
		r := TurnRequest{TokenBudget: tt.request}
		require.Equal(t, tt.want, r.Budget(Limits{TokenBudget: tt.agent}), "request %d, agent %d", tt.request, tt.agent)
	}
}

// A child's events in a parent's log never end the parent's stream, are
// not its text, and read back as the child's own.
func TestChildEventsInAParentLog(t *testing.T) {
	child := func(i int64, e Event) Event {
		e.Child = &ChildEvent{CallID: "c1", StreamID: "turn/demo/j-c1", Index: i}
		return e
	}
	log := []Event{
		{Index: 1, Kind: EventToken, Text: "Asking. "},
		{Index: 2, Kind: EventToolStart, Tool: &ToolEvent{CallID: "c1", Name: "delegate"}},
		child(3, Event{Index: 3, Kind: EventToken, Text: "Hel"}),
		child(4, Event{Index: 4, Kind: EventStatus, Status: StreamRetrying, VoidFrom: 3}),
		child(5, Event{Index: 5, Kind: EventToken, Text: "Hello"}),
		child(9, Event{Index: 6, Kind: EventStatus, Status: StreamCompleted}),
		{Index: 7, Kind: EventToolEnd, Tool: &ToolEvent{CallID: "c1", Name: "delegate", Status: ToolOK}},
		{Index: 8, Kind: EventToken, Text: "Done."},
	}
	require.False(t, log[5].Terminal())
	require.Equal(t, "Asking. Done.", ReplayText(log))
	evs := ChildEvents(log, "c1")
	require.Len(t, evs, 4)
	require.Equal(t, "turn/demo/j-c1", evs[0].StreamID)
	require.Equal(t, []int64{3, 4, 5, 9}, []int64{evs[0].Index, evs[1].Index, evs[2].Index, evs[3].Index})
	require.Nil(t, evs[0].Child)
	require.Equal(t, "Hello", ReplayText(evs))
	require.True(t, evs[3].Terminal())
	require.Empty(t, ChildEvents(log, "c2"))
}
