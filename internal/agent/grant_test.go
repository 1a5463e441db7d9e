package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func cond(path, equals string) ArgCondition {
	return ArgCondition{Path: path, Equals: json.RawMessage(equals)}
}

// TestArgsMatch: a match holds when every condition's JSON Pointer finds
// its value in the arguments, numbers compared by value, objects and
// arrays member by member; arguments that are not an object match only
// the empty match.
func TestArgsMatch(t *testing.T) {
	args := json.RawMessage(`{"region": "eu", "amount": 100, "items": [{"sku": "a/b"}, {"sku": "c"}], "a/b": true, "m~n": null, "opts": {"x": 1, "y": [1, 2]}}`)
	tests := []struct {
		name  string
		match ArgsMatch
		args  json.RawMessage
		want  bool
	}{
		{"empty", nil, args, true},
		{"a string", ArgsMatch{cond("/region", `"eu"`)}, args, true},
		{"another string", ArgsMatch{cond("/region", `"us"`)}, args, false},
		{"a number by value", ArgsMatch{cond("/amount", `100.0`)}, args, true},
		{"a number by value, in exponent", ArgsMatch{cond("/amount", `1e2`)}, args, true},
		{"another number", ArgsMatch{cond("/amount", `100.5`)}, args, false},
		{"a number is no string", ArgsMatch{cond("/amount", `"100"`)}, args, false},
		{"an array element", ArgsMatch{cond("/items/1/sku", `"c"`)}, args, true},
		{"an index past the end", ArgsMatch{cond("/items/2/sku", `"c"`)}, args, false},
		{"an index with a leading zero", ArgsMatch{cond("/items/01/sku", `"c"`)}, args, false},
		{"an escaped slash", ArgsMatch{cond("/a~1b", `true`)}, args, true},
		{"an escaped tilde, and null", ArgsMatch{cond("/m~0n", `null`)}, args, true},
		{"a missing key is not null", ArgsMatch{cond("/nope", `null`)}, args, false},
		{"an object, whole", ArgsMatch{cond("/opts", `{"y": [1, 2.0], "x": 1}`)}, args, true},
		{"an object with a member more", ArgsMatch{cond("/opts", `{"x": 1}`)}, args, false},
		{"all conditions", ArgsMatch{cond("/region", `"eu"`), cond("/amount", `100`)}, args, true},
		{"one condition fails", ArgsMatch{cond("/region", `"eu"`), cond("/amount", `99`)}, args, false},
		{"the whole arguments", ArgsMatch{cond("", `{"q": 1}`)}, json.RawMessage(`{"q": 1}`), true},
		{"arguments that are no object", ArgsMatch{cond("/0", `1`)}, json.RawMessage(`[1]`), false},
		{"arguments that are no JSON", ArgsMatch{cond("/a", `1`)}, json.RawMessage(`{`), false},
		{"two JSON values", ArgsMatch{cond("/a", `1`)}, json.RawMessage(`{"a": 1} {"a": 1}`), false},
		{"empty arguments, an empty match", nil, json.RawMessage(``), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, tt.match.Validate())
			require.Equal(t, tt.want, tt.match.Matches(tt.args))
		})
	}
}

func TestArgsMatchValidate(t *testing.T) {
	many := make(ArgsMatch, MaxGrantConditions+1)
	for i := range many {
		many[i] = cond("/a", `1`)
	}
	tests := []struct {
		name  string
		match ArgsMatch
		err   string
	}{
		{"too many", many, "conditions; the limit is"},
		{"no pointer", ArgsMatch{cond("region", `"eu"`)}, "want a JSON Pointer"},
		{"a bad escape", ArgsMatch{cond("/a~2", `1`)}, "'~' must be followed by 0 or 1"},
		{"no value", ArgsMatch{{Path: "/a"}}, "equals is required"},
		{"not JSON", ArgsMatch{cond("/a", `{`)}, "is not JSON"},
		{"a long path", ArgsMatch{cond("/"+strings.Repeat("a", MaxGrantPathBytes), `1`)}, "path is longer"},
		{"a long value", ArgsMatch{cond("/a", `"`+strings.Repeat("a", MaxGrantValueBytes)+`"`)}, "equals is longer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.match.Validate()
			requireInvalid(t, err)
			require.ErrorContains(t, err, tt.err)
		})
	}
}

// TestGrantCovers: a grant decides a call of its tenant, agent and tool,
// in its session (scope session) or its turn (scope turn), whose
// arguments match, while it is neither expired nor revoked.
func TestGrantCovers(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	session := Grant{ID: "g1", TenantID: "acme", Scope: ScopeSession, SessionID: "s1", JobID: "j1", AgentID: "ops", Tool: "restart",
		Match: ArgsMatch{cond("/service", `"api"`)}, ExpiresAt: &later}
	turn := session
	turn.Scope, turn.Match, turn.ExpiresAt = ScopeTurn, nil, nil
	call := GrantedCall{TenantID: "acme", SessionID: "s1", JobID: "j2", AgentID: "ops", Tool: "restart", Args: json.RawMessage(`{"service": "api"}`)}
	tests := []struct {
		name  string
		grant Grant
		call  func(GrantedCall) GrantedCall
		at    time.Time
		want  bool
	}{
		{"the session's later turn", session, func(c GrantedCall) GrantedCall { return c }, now, true},
		{"expired", session, func(c GrantedCall) GrantedCall { return c }, later, false},
		{"another session", session, func(c GrantedCall) GrantedCall { c.SessionID = "s2"; return c }, now, false},
		{"no session", session, func(c GrantedCall) GrantedCall { c.SessionID = ""; return c }, now, false},
		{"another tenant", session, func(c GrantedCall) GrantedCall { c.TenantID = "rival"; return c }, now, false},
		{"another agent", session, func(c GrantedCall) GrantedCall { c.AgentID = "dev"; return c }, now, false},
		{"another tool", session, func(c GrantedCall) GrantedCall { c.Tool = "deploy"; return c }, now, false},
		{"arguments that do not match", session, func(c GrantedCall) GrantedCall { c.Args = json.RawMessage(`{"service": "db"}`); return c }, now, false},
		{"the turn's grant, in its turn", turn, func(c GrantedCall) GrantedCall { c.JobID = "j1"; return c }, later, true},
		{"the turn's grant, in another turn", turn, func(c GrantedCall) GrantedCall { return c }, now, false},
		{"revoked", func() Grant { g := turn; g.RevokedAt = &now; return g }(), func(c GrantedCall) GrantedCall { c.JobID = "j1"; return c }, now, false},
		{"no scope", func() Grant { g := turn; g.Scope = ScopeCall; return g }(), func(c GrantedCall) GrantedCall { c.JobID = "j1"; return c }, now, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, tt.grant.Covers(tt.call(call), tt.at))
		})
	}
}

// TestApprovalIDOf: the id names the run, the step and the call; each
// differing gives another id.
func TestApprovalIDOf(t *testing.T) {
	id := ApprovalIDOf("run-1", 2, "call_0")
	require.Regexp(t, `^apr_[0-9a-f]{24}$`, id)
	require.Equal(t, id, ApprovalIDOf("run-1", 2, "call_0"))
	for _, other := range []string{ApprovalIDOf("run-2", 2, "call_0"), ApprovalIDOf("run-1", 4, "call_0"), ApprovalIDOf("run-1", 2, "call_1"),
		ApprovalIDOf("run-1", 22, "call_0"), ApprovalIDOf("run-12", 2, "call_0")} {
		require.NotEqual(t, id, other)
	}
	require.Equal(t, "grant_"+strings.TrimPrefix(id, "apr_"), GrantIDOf(id))
}

// FuzzArgsMatch: any condition and arguments are matched or not, never a
// panic; a valid condition whose value is the one its pointer finds in
// the arguments holds.
func FuzzArgsMatch(f *testing.F) {
	for _, s := range [][3]string{
		{"/region", `"eu"`, `{"region": "eu"}`}, {"/items/0/sku", `"a"`, `{"items": [{"sku": "a"}]}`},
		{"/a~1b", `1.0`, `{"a/b": 1}`}, {"", `{}`, `{}`}, {"/x", `[1, {"y": null}]`, `{"x": [1, {"y": null}]}`},
		{"/a", `1e400`, `{"a": 1e400}`}, {"/", `1`, `{"": 1}`}, {"x", `{`, `[`},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, path, equals, args string) {
		m := ArgsMatch{{Path: path, Equals: json.RawMessage(equals)}}
		got := m.Matches(json.RawMessage(args))
		if m.Validate() != nil || !got {
			return
		}
		require.True(t, json.Valid([]byte(args)), "matched arguments are JSON")
		require.True(t, strings.HasPrefix(strings.TrimSpace(args), "{"), "matched arguments are an object")
	})
}
