package agent

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTurnRequestHash(t *testing.T) {
	no := false
	base := func() TurnRequest {
		return TurnRequest{
			Version: "1.0", JobID: "job-1", TenantID: "demo", AgentID: "assistant", SessionID: "s1",
			Prompt: "What is 6 * 7?", History: HistoryLoad, TimeoutSec: 30,
			Context: TurnContext{UserRole: "user", UIPage: "/orders", Metadata: map[string]string{"plan": "gold", "region": "eu"},
				PreviousResults: []PreviousResult{{NodeID: "n1", ResultRef: "cas://sha256:00"}}},
			RunID: "r1", NodeID: "n2", WorkflowTag: "w", Notify: "proc/1", TokenBudget: 500,
			Parent: &ParentRef{WorkflowID: "turn/demo/p", CallID: "c1", Depth: 1},
		}
	}
	tests := []struct {
		name   string
		mutate func(*TurnRequest)
		same   bool
	}{
		// What is not the request.
		{"job id", func(r *TurnRequest) { r.JobID = "job-2" }, true},
		{"channel", func(r *TurnRequest) { r.Channel = ChannelOpenAI }, true},
		{"stream off", func(r *TurnRequest) { r.Stream = &no }, true},
		{"version absent", func(r *TurnRequest) { r.Version = "" }, true},
		{"minor version", func(r *TurnRequest) { r.Version = "1.3" }, true},
		{"history by default", func(r *TurnRequest) { r.History = "" }, true},
		{"metadata order", func(r *TurnRequest) { r.Context.Metadata = map[string]string{"region": "eu", "plan": "gold"} }, true},
		{"decode error (Validate refuses it)", func(r *TurnRequest) { r.decodeErr = "x" }, true},
		// What is.
		{"tenant", func(r *TurnRequest) { r.TenantID = "other" }, false},
		{"agent", func(r *TurnRequest) { r.AgentID = "writer" }, false},
		{"routed", func(r *TurnRequest) { r.AgentID = "" }, false},
		{"session", func(r *TurnRequest) { r.SessionID = "s2" }, false},
		{"history fresh", func(r *TurnRequest) { r.History = HistoryFresh }, false},
		{"prompt", func(r *TurnRequest) { r.Prompt = "What is 6 * 8?" }, false},
		{"prompt whitespace", func(r *TurnRequest) { r.Prompt += " " }, false},
		{"user role", func(r *TurnRequest) { r.Context.UserRole = "supervisor" }, false},
		{"ui page", func(r *TurnRequest) { r.Context.UIPage = "/" }, false},
		{"metadata value", func(r *TurnRequest) { r.Context.Metadata["plan"] = "free" }, false},
		{"metadata key", func(r *TurnRequest) { r.Context.Metadata["x"] = "" }, false},
		{"previous results", func(r *TurnRequest) { r.Context.PreviousResults = nil }, false},
		{"timeout", func(r *TurnRequest) { r.TimeoutSec = 31 }, false},
		{"run id", func(r *TurnRequest) { r.RunID = "r2" }, false},
		{"node id", func(r *TurnRequest) { r.NodeID = "" }, false},
		{"workflow tag", func(r *TurnRequest) { r.WorkflowTag = "v" }, false},
		{"notify", func(r *TurnRequest) { r.Notify = "proc/2" }, false},
		{"token budget", func(r *TurnRequest) { r.TokenBudget = 0 }, false},
		{"parent", func(r *TurnRequest) { r.Parent = nil }, false},
		{"parent call", func(r *TurnRequest) { r.Parent.CallID = "c2" }, false},
		{"zero parent", func(r *TurnRequest) { r.Parent = &ParentRef{} }, false},
		// Text that only looks alike.
		{"key-like value", func(r *TurnRequest) { r.Prompt = `What is 6 * 7?","agent_id":"x` }, false},
	}
	want := base().Hash()
	require.Len(t, want, 64)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base()
			tt.mutate(&r)
			if tt.same {
				require.Equal(t, want, r.Hash())
			} else {
				require.NotEqual(t, want, r.Hash())
			}
		})
	}
}

// TestTurnRequestHashZeroValues: what decodes to the same request hashes
// the same.
func TestTurnRequestHashZeroValues(t *testing.T) {
	plain := TurnRequest{TenantID: "demo", Prompt: "hi"}
	for name, r := range map[string]TurnRequest{
		"empty metadata":   {TenantID: "demo", Prompt: "hi", Context: TurnContext{Metadata: map[string]string{}}},
		"empty previous":   {TenantID: "demo", Prompt: "hi", Context: TurnContext{PreviousResults: []PreviousResult{}}},
		"normalised":       {Version: ProtocolVersion, TenantID: "demo", Prompt: "hi", History: HistoryFresh},
		"stream on":        {TenantID: "demo", Prompt: "hi", Stream: new(true)},
		"job id and route": {JobID: "turn/demo/x", TenantID: "demo", Prompt: "hi"},
	} {
		require.Equal(t, plain.Hash(), r.Hash(), name)
	}
	// Hash normalises a copy: the caller's request is left as it was.
	r := TurnRequest{TenantID: "demo", Prompt: "hi", JobID: "j"}
	_ = r.Hash()
	require.Equal(t, TurnRequest{TenantID: "demo", Prompt: "hi", JobID: "j"}, r)
}

// FuzzTurnRequestHash: any request that decodes hashes without panicking,
// and its hash survives the JSON round trips a request makes (a
// workflow's input, a CLI's --input), normalised or not.
func FuzzTurnRequestHash(f *testing.F) {
	for _, s := range []string{
		`{"tenant_id":"demo","prompt":"What is 12.5 * 4?"}`,
		`{"version":"1.0","job_id":"j","tenant_id":"demo","agent_id":"assistant","session_id":"s1","prompt":"hi","history":"load","timeout_sec":30,"stream":false,"token_budget":500}`,
		`{"tenant_id":"demo","prompt":"hi","context":{"user_role":"admin","metadata":{"k":"v","":""},"previous_results":[{"node_id":"","result_ref":"cas://sha256:00"},{}]}}`,
		`{"tenant_id":"demo","prompt":"sub","notify":"turn/demo/p","parent":{"workflow_id":"turn/demo/p","call_id":"c1","depth":1}}`,
		`{"tenant_id":"demo","prompt":"hi","parent":{}}`,
		`{"tenant_id":"demo","prompt":"\ud800 \u0000 <&>","timeout_sec":-0}`,
		`{"tenant_id":"demo","prompt":"hi","token_budget":9007199254740993}`,
		`{"tenant_id":42}`, `[]`, `null`, `{}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var r TurnRequest
		if json.Unmarshal([]byte(raw), &r) != nil {
			return
		}
		h := r.Hash()
		require.Len(t, h, 64)
		b, err := json.Marshal(r)
		require.NoError(t, err)
		var back TurnRequest
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, h, back.Hash(), "the hash survives a round trip of %s", b)
		back.Normalize()
		require.Equal(t, h, back.Hash(), "normalising does not change the hash")
	})
}
