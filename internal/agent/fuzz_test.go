package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// requireInvalid checks that err is what a caller with bad input must
// get: a CodeInvalid error with a message.
func requireInvalid(t *testing.T, err error) {
	t.Helper()
	require.Equal(t, CodeInvalid, ErrorCode(err), "%v", err)
	require.NotEmpty(t, strings.TrimSpace(err.Error()))
}

// requireRoundTrip checks that v, encoded and decoded into a fresh
// value, encodes to the same JSON again: nothing accepted is lost or
// changed on its way through Temporal's JSON converter.
func requireRoundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	b1, err := json.Marshal(v)
	require.NoError(t, err)
	var back T
	require.NoError(t, json.Unmarshal(b1, &back), "%s", b1)
	b2, err := json.Marshal(back)
	require.NoError(t, err)
	require.JSONEq(t, string(b1), string(b2))
	return back
}

// FuzzTurnRequest: the AgentTurn input, as the gateway, the starter and
// `temporal workflow start --input` send it. Any JSON decodes (shape
// errors are kept for Validate) or fails as a syntax error; Validate
// refuses with CodeInvalid or accepts a request within the documented
// limits that survives a round trip and validates again.
func FuzzTurnRequest(f *testing.F) {
	for _, s := range []string{
		`{"tenant_id":"demo","prompt":"What is 12.5 * 4?"}`,
		`{"version":"1.0","job_id":"turn/demo/job-1","tenant_id":"demo","agent_id":"assistant","session_id":"s1","prompt":"hi","history":"load","timeout_sec":30,"stream":false,"token_budget":500}`,
		`{"tenant_id":"demo","prompt":"hi","context":{"user_role":"admin","ui_page":"/orders","metadata":{"k":"v"},"previous_results":[{"node_id":"n1","result_ref":"cas://sha256:00"}]}}`,
		`{"tenant_id":"demo","prompt":"sub-task","notify":"turn/demo/p","parent":{"workflow_id":"turn/demo/p","call_id":"c1","depth":1}}`,
		`{"tenant_id":"demo","prompt":"hi","run_id":"r1","node_id":"n1","workflow_tag":"w"}`,
		`{"tenant_id":"demo","prompt":"hi","output_schema":{"type":"object","properties":{"n":{"type":"integer"}}}}`,
		`{"tenant_id":"demo","prompt":"hi","output_schema":null}`,
		`{"tenant_id":"demo","prompt":"hi","output_schema":{"type":"array"}}`,
		`{"tenant_id":"demo","prompt":"hi","parent":{"workflow_id":"turn/demo/p","call_id":"c1","depth":9}}`,
		`{"tenant_id":"demo","prompt":"hi","context":{"previous_results":[{"node_id":"n1"}]}}`,
		`{"tenant_id":"0","prompt":"0","context":{"previous_results":[]}}`,
		`{"tenant_id":"0","prompt":"0","context":{"metadata":{}}}`,
		`{"version":"2.0","tenant_id":"demo","prompt":"hi"}`,
		`{"tenant_id":"de/mo","prompt":"hi"}`,
		`{"tenant_id":"demo","prompt":"   "}`,
		`{"tenant_id":"demo","prompt":"hi","history":"all"}`,
		`{"tenant_id":"demo","prompt":"hi","timeout_sec":-1}`,
		`{"tenant_id":"demo","prompt":"hi","job_id":"a b"}`,
		`{"tenant_id":"demo","prompt":"\ud800"}`,
		`{"tenant_id":42,"prompt":"hi"}`,
		`{"tenant_id":"demo","prompt":"hi","stream":"yes"}`,
		`["tenant_id"]`, `"x"`, `null`, `{}`, `{`, ``,
		`{"tenant_id":"demo","promt":"hi"}`,
		`{"tenant_id":"demo","prompt":"hi","context":{"sesion_id":"s1"}}`,
		`{"tenant_id":"demo","prompt":"hi","context":{"session_id":"s1","previous_results":[{"node_id":"n","result_ref":"cas://sha256:00","preview":{"count":150}}]}}`,
		`{"tenant_id":"demo","prompt":"hi","session_id":"s1","context":{"session_id":"s2"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var r TurnRequest
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			var syntax *json.SyntaxError
			require.ErrorAs(t, err, &syntax, "only malformed JSON fails to decode")
			return
		}
		r.Normalize()
		if err := r.Validate(); err != nil {
			requireInvalid(t, err)
			return
		}
		if err := r.Context.Bounded(); err != nil {
			requireInvalid(t, err)
		}
		major, _, _ := strings.Cut(r.Version, ".")
		require.Equal(t, "1", major)
		require.NotEmpty(t, strings.TrimSpace(r.TenantID))
		require.Empty(t, r.Context.SessionID, "a valid request names its session in session_id")
		for _, id := range []string{r.TenantID, r.AgentID, r.SessionID} {
			require.LessOrEqual(t, len(id), MaxKeyLength)
			require.NotContains(t, id, "/")
		}
		require.LessOrEqual(t, len(r.JobID), MaxKeyLength)
		require.NotEmpty(t, strings.TrimSpace(r.Prompt))
		require.LessOrEqual(t, len(r.Prompt), MaxPromptBytes)
		require.True(t, utf8.ValidString(r.Prompt))
		require.Contains(t, []string{HistoryLoad, HistoryFresh}, r.History)
		require.GreaterOrEqual(t, r.TimeoutSec, 0)
		require.GreaterOrEqual(t, r.TokenBudget, 0)
		require.GreaterOrEqual(t, r.Depth(), 0)
		require.LessOrEqual(t, r.Depth(), MaxDelegateDepth)

		back := requireRoundTrip(t, r)
		require.NoError(t, back.Validate())
		back.Normalize()
		b1, _ := json.Marshal(r)
		b2, _ := json.Marshal(back)
		require.JSONEq(t, string(b1), string(b2), "Normalize is idempotent")
	})
}

// payloads are the signal and update payloads of AgentTurn and
// Conversation, each decoded and checked the way its handler does.
var payloads = []struct {
	name  string // signal or update
	seeds []string
	check func(t *testing.T, raw []byte)
}{
	{
		name: "approve", // signal and update of AgentTurn
		seeds: []string{
			`{"call_id":"call_1","approved":true,"approver":"ops@example.com"}`,
			`{"call_id":"call_1","approved":false,"reason":"too expensive","approver":"ana"}`,
			`{"call_id":"call_1","approver":"ana"}`,
			`{"call_id":"call_1","approved":true}`,
			`{"call_id":"","approved":true,"approver":"ana"}`,
			`{"call_id":"call_1","approved":"yes","approver":"ana"}`,
			`{"approved":null}`, `[]`, `null`,
			`{"call_id":"call_0","approval_id":"apr_0123","approved":true,"approver":"ana","scope":"session","match":[{"path":"/region","equals":"eu"}],"expires_in_sec":3600}`,
			`{"call_id":"call_0","approved":false,"approver":"ana","scope":"turn"}`,
			`{"call_id":"call_0","approved":true,"approver":"ana","scope":"call","match":[{"path":"region","equals":1}]}`,
			`{"call_id":"call_0","approved":true,"approver":"ana","scope":"turn","match":[{"path":"/a~2"}],"expires_in_sec":-1}`,
			`{"call_id":"call_0","approved":true,"approver":"ana","approver_issuer":"https://idp","approver_subject":"00u1","match":{"a":1}}`,
		},
		check: func(t *testing.T, raw []byte) {
			var d ApprovalDecision
			if json.Unmarshal(raw, &d) != nil {
				return // the signal logs it; the update's converter refuses it
			}
			errShape, errComplete := d.Validate(), d.Complete()
			for _, err := range []error{errShape, errComplete} {
				if err != nil {
					requireInvalid(t, err)
				}
			}
			if errShape != nil || errComplete != nil {
				return
			}
			require.NotEmpty(t, strings.TrimSpace(d.CallID))
			require.LessOrEqual(t, len(d.CallID), MaxKeyLength)
			require.NotEmpty(t, strings.TrimSpace(d.Approver))
			require.LessOrEqual(t, len(d.Approver), MaxKeyLength)
			require.LessOrEqual(t, len(d.Reason), 4096)
			require.LessOrEqual(t, len(d.Match), MaxGrantConditions)
			if d.Remembers() {
				require.True(t, d.Scope == ScopeTurn || d.Scope == ScopeSession)
			} else {
				require.Empty(t, d.Match, "a match only with a scope that remembers")
				require.Zero(t, d.ExpiresInSec)
			}
			for _, c := range d.Match {
				require.True(t, json.Valid(c.Equals))
				_ = d.Match.Matches(json.RawMessage(`{"region":"eu"}`))
			}
			back := requireRoundTrip(t, d)
			require.Equal(t, d, back)
			require.NoError(t, back.Complete())
		},
	},
	{
		name: "cancel_turn", // signal of AgentTurn; an empty payload is a plain cancel
		seeds: []string{
			``, `{}`, `{"reason":"the user left","requested_by":"ana"}`,
			`{"requested_by":"` + strings.Repeat("x", MaxKeyLength+1) + `"}`,
			`{"reason":7}`, `"stop"`,
		},
		check: func(t *testing.T, raw []byte) {
			var c CancelRequest
			if len(raw) > 0 && json.Unmarshal(raw, &c) != nil {
				return // logged and ignored
			}
			if err := c.Validate(); err != nil {
				requireInvalid(t, err)
				return
			}
			require.LessOrEqual(t, len(c.Reason), 4096)
			require.LessOrEqual(t, len(c.RequestedBy), MaxKeyLength)
			require.True(t, strings.HasPrefix(c.Message(), "the turn was cancelled"))
			require.Equal(t, c, requireRoundTrip(t, c))
		},
	},
	{
		name: "send_message", // update of Conversation
		seeds: []string{
			`{"prompt":"hello"}`,
			`{"prompt":"and then?","job_id":"order-42","context":{"user_role":"admin","metadata":{"k":"v"}}}`,
			`{"prompt":""}`, `{"prompt":"hi","job_id":"a b"}`, `{"prompt":"hi","job_id":"a\u0000b"}`,
			`{"prompt":"hi","context":{"previous_results":[{"node_id":"n"}]}}`,
			`{"prompt":["hi"]}`, `null`,
			`{"prompt":"in euros","on_busy":"steer"}`, `{"prompt":"stop","on_busy":"interrupt","stop_at":"boundary"}`,
			`{"prompt":"hi","on_busy":"later"}`, `{"prompt":"hi","stop_at":"soon"}`,
		},
		check: func(t *testing.T, raw []byte) {
			var m SendMessage
			if json.Unmarshal(raw, &m) != nil {
				return // the update's converter refuses it
			}
			if err := m.Validate(); err != nil {
				requireInvalid(t, err)
				return
			}
			require.NotEmpty(t, strings.TrimSpace(m.Prompt))
			require.LessOrEqual(t, len(m.Prompt), MaxPromptBytes)
			require.LessOrEqual(t, len(m.JobID), MaxKeyLength)
			require.NoError(t, m.Context.Bounded())
			requireRoundTrip(t, m)
			// An accepted message becomes a turn (workflows.Conversation's
			// runTurn): the update must not accept what the turn refuses.
			jobID := m.JobID
			if jobID == "" {
				jobID = "s1-1"
			}
			req := TurnRequest{TenantID: "demo", SessionID: "s1", JobID: jobID, Prompt: m.Prompt, Context: m.Context}
			req.Normalize()
			require.NoError(t, req.Validate(), "accepted message %s", raw)
			require.NoError(t, req.Context.Bounded())
		},
	},
	{
		name: "steer", // signal of AgentTurn, sent by its Conversation
		seeds: []string{
			`{"id":"s1-4","prompt":"in euros, please"}`, `{"prompt":"no id"}`, `{"id":"s1-4","prompt":" "}`,
			`{"id":"a\u0000b","prompt":"x"}`, `"not a message"`,
		},
		check: func(t *testing.T, raw []byte) {
			var m SteerMessage
			if json.Unmarshal(raw, &m) != nil {
				return // dropped by the channel, logged
			}
			if err := m.Validate(); err != nil {
				requireInvalid(t, err)
				return
			}
			require.NoError(t, validateKey("id", m.ID))
			require.NotEmpty(t, strings.TrimSpace(m.Prompt))
			require.LessOrEqual(t, len(m.Prompt), MaxPromptBytes)
			// What the turn logs of it is a valid steered event.
			e := Event{StreamID: "turn/demo/s1-3", Index: 1, Kind: EventSteered, Message: &MessageEvent{ID: m.ID}, Text: m.Prompt}
			require.NoError(t, e.Validate())
			require.Equal(t, m, requireRoundTrip(t, m))
		},
	},
	{
		name: "tool_progress", // signal of AgentTurn, sent by ExecuteTool
		seeds: []string{
			`{"call_id":"call_1","tool":"fetch_orders","message":"page 2 of 5"}`, `{}`, `{"call_id":1}`,
		},
		check: func(t *testing.T, raw []byte) {
			var p ToolProgress
			if json.Unmarshal(raw, &p) != nil {
				return
			}
			require.Equal(t, p, requireRoundTrip(t, p))
		},
	},
	{
		name: "tokens", // signal of AgentTurn (and agent_tokens of a notify workflow)
		seeds: []string{
			`{"stream_id":"turn/demo/j1","step":1,"attempt":1,"first":3,"events":[{"event_index":3,"kind":"token","text":"Hel"},{"event_index":4,"kind":"token","text":"lo"}]}`,
			`{"stream_id":"turn/demo/j1-c1","first":5,"events":[{"event_index":5,"kind":"tool_start","tool":{"call_id":"c","name":"calculator","args":{"x":1}}}]}`,
			`{"events":[{"kind":"status","status":"RETRYING","void_from":2}]}`,
			`{"events":[{"tool":{"deadline":"yesterday"}}]}`, `{"events":{}}`,
		},
		check: func(t *testing.T, raw []byte) {
			var b TokenBatch
			if json.Unmarshal(raw, &b) != nil {
				return
			}
			requireRoundTrip(t, b)
			_ = b.Text()
			_ = ReplayText(b.Events)
			for _, e := range b.Events {
				_ = e.String()
				_ = e.Terminal()
			}
			if tenant, err := StreamTenant(b.StreamID); err != nil {
				requireInvalid(t, err)
			} else {
				require.NotEmpty(t, tenant)
				require.NotContains(t, tenant, "/")
			}
		},
	},
	{
		name: "answer", // signal and update of AgentTurn
		seeds: []string{
			`{"call_id":"call_1","answer":"Rome","answerer":"uma","roles":["user"]}`,
			`{"call_id":"call_1","answer":"","answerer":"uma"}`,
			`{"call_id":"call_1","answer":"yes"}`,
			`{"call_id":"","answer":"yes","answerer":"uma"}`,
			`{"call_id":"call_1","answer":"\xff","answerer":"uma"}`,
			`{"call_id":"call_1","answer":1,"answerer":"uma"}`, `[]`, `null`,
		},
		check: func(t *testing.T, raw []byte) {
			var a Answer
			if json.Unmarshal(raw, &a) != nil {
				return
			}
			if err := a.Validate(); err != nil {
				requireInvalid(t, err)
				return
			}
			require.NotEmpty(t, strings.TrimSpace(a.CallID))
			require.NotEmpty(t, strings.TrimSpace(a.Text))
			require.LessOrEqual(t, len(a.Text), MaxAnswerBytes)
			require.True(t, utf8.ValidString(a.Text))
			require.NotEmpty(t, strings.TrimSpace(a.Answerer))
			q := PendingQuestion{CallID: a.CallID, Role: "user", Choices: []string{"Rome"}}
			if err := q.Fits(a); err != nil {
				require.Contains(t, []Code{CodeInvalid, CodePermissionDenied}, ErrorCode(err))
			} else {
				require.Equal(t, "Rome", a.Text)
				require.Contains(t, a.Roles, "user")
			}
			back := requireRoundTrip(t, a)
			require.Equal(t, a.Text, back.Text)
			require.ElementsMatch(t, a.Roles, back.Roles)
		},
	},
}

// FuzzSignalPayloads: every signal and update payload, picked by the
// first argument, decodes or is refused without a panic; what validates
// is within its limits and survives Temporal's JSON round trip.
func FuzzSignalPayloads(f *testing.F) {
	for i, p := range payloads {
		for _, s := range p.seeds {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, kind uint8, raw string) {
		p := payloads[int(kind)%len(payloads)]
		t.Run(p.name, func(t *testing.T) { p.check(t, []byte(raw)) })
	})
}

// FuzzConversationInput: the Conversation workflow's input, as the
// gateway and `temporal workflow start` send it.
func FuzzConversationInput(f *testing.F) {
	for _, s := range []string{
		`{"tenant_id":"demo","session_id":"s1"}`,
		`{"tenant_id":"demo","session_id":"s1","agent_id":"assistant","history":"fresh","max_history_events":500}`,
		`{"tenant_id":"demo","session_id":"s1","carry":{"pending":[{"prompt":"hi","job_id":"s1-1"}],"turns":3,"accepted":4,"recent":["s1-1"],"runs":1}}`,
		`{"tenant_id":"demo","session_id":"s/1"}`, `{"tenant_id":"demo","session_id":"s1","max_history_events":100}`,
		`{"tenant_id":"demo"}`, `{"tenant_id":"demo","session_id":"s1","history":"x"}`, `{"session_id":3}`,
		fmt.Sprintf(`{"tenant_id":"demo","session_id":%q}`, strings.Repeat("s", MaxKeyLength)),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var in ConversationInput
		if json.Unmarshal([]byte(raw), &in) != nil {
			return
		}
		if err := in.Validate(); err != nil {
			requireInvalid(t, err)
			return
		}
		for _, id := range []string{in.TenantID, in.SessionID} {
			require.NotEmpty(t, strings.TrimSpace(id))
			require.NoError(t, ValidateID("id", id))
		}
		require.NoError(t, ValidateID("agent_id", in.AgentID))
		require.True(t, in.MaxHistoryEvents == 0 || in.MaxHistoryEvents >= 200)
		requireRoundTrip(t, in)
	})
}

// FuzzCheckNotify: a turn's notify workflow is refused unless it is the
// turn's parent or a workflow of the turn's own tenant by the id scheme;
// never a panic, and a refusal is PermissionDenied.
func FuzzCheckNotify(f *testing.F) {
	for _, s := range [][3]string{
		{"demo", "turn/demo/j1", ""}, {"demo", "conv/demo/s1", ""}, {"demo", "turn/other/j1", ""},
		{"demo", "process-7", "process-7"}, {"demo", "process-7", ""}, {"demo", "turn//j", ""},
		{"demo", "/demo/x", ""}, {"demo", "turn/demo/", ""}, {"demo", "turn/demo", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, tenant, notify, parent string) {
		err := TurnRequest{TenantID: tenant, Notify: notify}.CheckNotify(parent)
		if err != nil {
			require.Equal(t, CodePermissionDenied, ErrorCode(err))
			require.NotEqual(t, parent, notify)
			return
		}
		if notify == "" || notify == parent {
			return
		}
		parts := strings.SplitN(notify, "/", 3)
		require.Len(t, parts, 3, "an accepted notify has the form <kind>/<tenant>/<id>")
		require.Equal(t, tenant, parts[1], "an accepted notify is of the turn's tenant")
		require.NotEmpty(t, parts[0])
		require.NotEmpty(t, parts[2])
	})
}

// FuzzDecodeEvent: events as readers of logs and tool payloads decode
// them. Any input is refused with CodeInvalid or decodes to an event of
// its kind's shape that survives a JSON round trip and validates again.
func FuzzDecodeEvent(f *testing.F) {
	for _, d := range documentedEvents() {
		f.Add(d.json)
	}
	for _, s := range []string{
		`{"kind":"token","text":""}`,
		`{"kind":"status","status":"RETRYING","void_from":5,"event_index":3}`,
		`{"kind":"tool_args_delta","tool":{"call_id":"c","name":"n","args_delta":"\ud800"}}`,
		`{"kind":"custom","custom":{"name":"a.b-c_d","value":null}}`,
		`{"kind":"custom","custom":{"name":"x","value":{"a":[1,2,{"b":"\u0000"}]}}}`,
		`{"kind":"step_finish","step":1,"usage":{"prompt_tokens":-1},"finish_reason":"stop"}`,
		`{"kind":"approval_decided","tool":{"call_id":"c","name":"n"},"approval":{"outcome":"approved","via":"update"}}`,
		`{"kind":"message_end","message":{"id":"m","status":"completed"},"child":{"call_id":"c","stream_id":"s","event_index":1}}`,
		`{"kind":"content","content":null}`,
		`{"kind":"tool_start","tool":{"call_id":"c","name":"n","deadline":"not a time"}}`,
		`{"kind":7}`, `[]`, `null`, `{}`, `"x"`, `{`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		e, err := DecodeEvent([]byte(raw))
		if err != nil {
			requireInvalid(t, err)
			return
		}
		require.NoError(t, e.Validate())
		require.Contains(t, EventKinds(), e.Kind)
		back := requireRoundTrip(t, e)
		require.NoError(t, back.Validate(), "a valid event stays valid through JSON")
		if e.Custom != nil {
			require.LessOrEqual(t, len(e.Custom.Value), MaxCustomValueBytes)
			require.True(t, json.Valid(e.Custom.Value))
		}
		_ = e.String()
	})
}
